package control_test

import (
	"reflect"
	"testing"

	"github.com/zonewright/zonewright/activities/control"
	"github.com/zonewright/zonewright/internal/controlapi"
)

// The workflows name control-plane activities by the stand-ins of
// controlapi: each must have exactly the methods of the activities it
// stands for, by name (an activity's name is its method's) and by
// parameter and result types, or a workflow would call an activity that
// is not registered, or with arguments it cannot take.
func TestStandInsHaveTheActivitiesMethods(t *testing.T) {
	for _, pair := range []struct{ activities, standIn any }{
		{&control.Control{}, &controlapi.Activities{}},
		{&control.Images{}, &controlapi.ImageActivities{}},
	} {
		real, stand := reflect.TypeOf(pair.activities), reflect.TypeOf(pair.standIn)
		if real.NumMethod() != stand.NumMethod() {
			t.Errorf("%s has %d methods, its stand-in %s %d", real, real.NumMethod(), stand, stand.NumMethod())
		}
		for i := range real.NumMethod() {
			m := real.Method(i)
			s, ok := stand.MethodByName(m.Name)
			if !ok {
				t.Errorf("%s has no %s: a workflow cannot name that activity", stand, m.Name)
				continue
			}
			// Both take their receiver first; compare the rest.
			if !sameSignature(m.Type, s.Type) {
				t.Errorf("%s.%s is %s, its stand-in's %s", real, m.Name, m.Type, s.Type)
			}
		}
		for i := range stand.NumMethod() {
			name := stand.Method(i).Name
			if _, ok := real.MethodByName(name); !ok {
				t.Errorf("%s has %s, which %s does not: no such activity is registered", stand, name, real)
			}
		}
	}
}

// sameSignature compares two method types past their receivers.
func sameSignature(a, b reflect.Type) bool {
	if a.NumIn() != b.NumIn() || a.NumOut() != b.NumOut() || a.IsVariadic() != b.IsVariadic() {
		return false
	}
	for i := 1; i < a.NumIn(); i++ {
		if a.In(i) != b.In(i) {
			return false
		}
	}
	for i := range a.NumOut() {
		if a.Out(i) != b.Out(i) {
			return false
		}
	}
	return true
}
