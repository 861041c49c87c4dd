package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

func TestJobDefaultsAndValidation(t *testing.T) {
	c := newAPI(t)
	base := "/apis/batch/v1/namespaces/default/jobs"
	r := c.json("POST", base, `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"pi"},
	  "spec":{"template":{"spec":{"containers":[{"name":"c","image":"omnios","command":["true"]}]}}}}`)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var j model.Job
	if err := json.Unmarshal(r.body, &j); err != nil {
		t.Fatal(err)
	}
	if *j.Spec.Completions != 1 || *j.Spec.Parallelism != 1 || *j.Spec.BackoffLimit != 6 || j.Spec.Template.Spec.RestartPolicy != model.RestartNever ||
		j.Spec.Template.Metadata.Labels[model.LabelJobName] != "pi" || j.APIVersion != "batch/v1" {
		t.Fatalf("defaults not applied: %s", r.body)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"restartPolicy Always", `{"metadata":{"name":"a"},"spec":{"template":{"spec":{"restartPolicy":"Always","containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.template.spec.restartPolicy"},
		{"negative completions", `{"metadata":{"name":"a"},"spec":{"completions":-1,"template":{"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.completions"},
		{"negative parallelism", `{"metadata":{"name":"a"},"spec":{"parallelism":-1,"template":{"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.parallelism"},
		{"a zero deadline", `{"metadata":{"name":"a"},"spec":{"activeDeadlineSeconds":0,"template":{"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.activeDeadlineSeconds"},
		{"a negative TTL", `{"metadata":{"name":"a"},"spec":{"ttlSecondsAfterFinished":-5,"template":{"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.ttlSecondsAfterFinished"},
		{"an image not in the catalog", `{"metadata":{"name":"a"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"nope","command":["x"]}]}}}}`, "spec.template.spec.containers[0].image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.json("POST", base, tc.body)
			if r.code != http.StatusUnprocessableEntity || !slices.Contains(causeFields(r), tc.field) {
				t.Fatalf("%d %s; want 422 naming %s", r.code, r.body, tc.field)
			}
		})
	}
	if r := c.json("DELETE", base+"/pi", nil); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if r := c.json("PUT", base+"/pi", `{}`); r.code != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d %s", r.code, r.body)
	}
}
