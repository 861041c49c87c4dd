package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

// checkBody takes whatever a client sends: it answers 400 or 422, never
// panics, and lets through no key that matches a field only by case.
func FuzzCheckBody(f *testing.F) {
	for _, s := range []string{`{"metadata":{"name":"x"}}`, `{"Metadata":{}}`, `{"metadata":{"labels":{"a":"\u0000"}}}`,
		`{"spec":{"containers":[{"Name":"a"}]}}`, `[1,"\u0000"]`, `"x"`, `{"spec":{"ports":[{"targetPort":"http"}]}}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := checkBody(body, reflect.TypeOf(&model.Pod{}))
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || (ae.code != http.StatusBadRequest && ae.code != http.StatusUnprocessableEntity) {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		var doc map[string]any
		if json.Unmarshal(body, &doc) != nil {
			return
		}
		for k := range doc {
			if k != "apiVersion" && k != "kind" && k != "metadata" && k != "spec" && k != "status" &&
				strings.EqualFold(k, "metadata") {
				t.Fatalf("%q: key %q accepted", body, k)
			}
		}
	})
}
