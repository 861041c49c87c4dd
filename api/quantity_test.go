package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

// A quantity may be written as a number, as Kubernetes takes it: YAML's
// `cpu: 2` reaches the API as one (it was refused). It is kept as
// written; anything else is a clear 400. (Drop ResourceList's
// UnmarshalJSON to see the numbers refused.)
func TestQuantitiesMayBeNumbers(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	b := a.asAdmin("POST", "/api/v1/namespaces/a/pods", `{"metadata":{"name":"numbers"},"spec":{"containers":[{"name":"c","image":"i","command":["c"],
		"resources":{"requests":{"cpu":2,"memory":"64Mi"},"limits":{"cpu":2.5,"memory":"64Mi"}}}]}}`, 201)
	var p model.Pod
	if err := json.Unmarshal([]byte(b), &p); err != nil {
		t.Fatal(err)
	}
	r := p.Spec.Containers[0].Resources
	if r.Requests["cpu"] != "2" || r.Limits["cpu"] != "2.5" || r.Requests["memory"] != "64Mi" {
		t.Errorf("resources as stored: %+v", r)
	}
	code, body := a.do(caller{bearer: a.admin}, "POST", "/api/v1/namespaces/a/pods", `{"metadata":{"name":"bools"},"spec":{"containers":[{"name":"c","image":"i","command":["c"],
		"resources":{"requests":{"cpu":true}}}]}}`)
	if code != 400 && code != 422 || !strings.Contains(body, "cpu") {
		t.Errorf("a quantity of true: %d %s, want 400 or 422 naming cpu", code, body)
	}
}
