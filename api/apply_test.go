package api_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

const applyType = "application/apply-patch+yaml"

// applied is a deployment's apply configuration as kubectl apply
// --server-side sends it (YAML), with the lines given.
func appliedDeployment(lines ...string) []byte {
	return []byte(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: ssa
` + strings.Join(lines, "\n") + "\n")
}

const ssaSpec = `spec:
  selector: {matchLabels: {app: ssa}}
  template:
    metadata: {labels: {app: ssa}}
    spec:
      containers:
      - {name: app, image: omnios, command: [sleep, "3600"]}`

// managerOf is the manager and operation of each managedFields entry.
func managersOf(d model.Deployment) map[string]string {
	out := map[string]string{}
	for _, e := range d.Metadata.ManagedFields {
		out[e.Manager] = e.Operation + " " + string(e.FieldsV1)
	}
	return out
}

// Server-side apply records who set what and merges, as Kubernetes does:
// an apply creates, is idempotent, refuses a field another manager set
// to another value unless forced, and removes what its manager no longer
// names; ordinary writes are recorded too, so an apply conflicts with
// them. (Make writeManagers return obj's managedFields unchanged to see
// the conflict with the merge patch's manager go.)
func TestServerSideApply(t *testing.T) {
	c := newAPI(t)
	base := "/apis/apps/v1/namespaces/default/deployments"
	apply := func(manager, query string, body []byte) response {
		return c.do("PATCH", base+"/ssa?fieldManager="+manager+query, applyType, body)
	}

	r := apply("alice", "", appliedDeployment("  labels: {team: a, tier: web}", ssaSpec, "  replicas: 2"))
	d := decodeDeployment(t, r)
	if r.code != http.StatusCreated || *d.Spec.Replicas != 2 || d.Metadata.Labels["team"] != "a" {
		t.Fatalf("an apply of what does not exist creates it: %d %s", r.code, r.body)
	}
	if m := managersOf(d)["alice"]; !strings.HasPrefix(m, "Apply ") || !strings.Contains(m, `"f:replicas"`) {
		t.Fatalf("alice's entry after her apply: %q in %s", m, r.body)
	}
	r = apply("alice", "", appliedDeployment("  labels: {team: a, tier: web}", ssaSpec, "  replicas: 2"))
	if again := decodeDeployment(t, r); r.code != http.StatusOK || again.Metadata.Generation != d.Metadata.Generation || !reflect.DeepEqual(again.Metadata.ManagedFields, d.Metadata.ManagedFields) {
		t.Fatalf("the same apply again changes nothing: %d generation %d→%d, managers %s", r.code, d.Metadata.Generation, again.Metadata.Generation, r.body)
	}

	// Another manager setting alice's field to another value conflicts.
	r = apply("bob", "", appliedDeployment("spec:", "  replicas: 3"))
	var st model.Status
	if r.code != http.StatusConflict || json.Unmarshal(r.body, &st) != nil || st.Details == nil || len(st.Details.Causes) != 1 ||
		st.Details.Causes[0].Field != ".spec.replicas" || !strings.Contains(st.Message, `conflict with "alice"`) {
		t.Fatalf("bob's apply of alice's replicas: %d %s", r.code, r.body)
	}
	r = apply("bob", "&force=true", appliedDeployment("spec:", "  replicas: 3"))
	if d = decodeDeployment(t, r); r.code != http.StatusOK || *d.Spec.Replicas != 3 || strings.Contains(managersOf(d)["alice"], "f:replicas") {
		t.Fatalf("bob's forced apply takes replicas from alice: %d %s", r.code, r.body)
	}
	// alice drops replicas (bob's now) and a label (hers): the label goes,
	// replicas stays.
	r = apply("alice", "", appliedDeployment("  labels: {team: a}", ssaSpec))
	if d = decodeDeployment(t, r); r.code != http.StatusOK || *d.Spec.Replicas != 3 || d.Metadata.Labels["tier"] != "" || d.Metadata.Labels["team"] != "a" {
		t.Fatalf("alice's apply without replicas and tier: %d %s", r.code, r.body)
	}

	// An ordinary write is recorded under its fieldManager: an apply of
	// another value of what it changed conflicts with it.
	r = c.do("PATCH", base+"/ssa?fieldManager=carol", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"team":"c"}}}`))
	if d = decodeDeployment(t, r); r.code != http.StatusOK || !strings.HasPrefix(managersOf(d)["carol"], "Update ") {
		t.Fatalf("carol's merge patch: %d %s", r.code, r.body)
	}
	r = apply("alice", "", appliedDeployment("  labels: {team: a}", ssaSpec))
	if r.code != http.StatusConflict || !strings.Contains(string(r.body), `conflict with \"carol\"`) {
		t.Fatalf("alice's apply of the label carol changed: %d %s", r.code, r.body)
	}

	// Status is the controllers': an apply cannot set it.
	r = apply("alice", "&force=true", appliedDeployment("  labels: {team: a}", ssaSpec, "status: {replicas: 40}"))
	if d = decodeDeployment(t, r); r.code != http.StatusOK || d.Status.Replicas == 40 || strings.Contains(managersOf(d)["alice"], "f:status") {
		t.Fatalf("an apply of status: %d %s", r.code, r.body)
	}

	for _, bad := range []struct {
		name, path string
		body       []byte
		code       int
	}{
		{"no fieldManager", base + "/ssa", appliedDeployment(ssaSpec), http.StatusUnprocessableEntity},
		{"another kind", base + "/ssa?fieldManager=x", []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: ssa}\n"), http.StatusBadRequest},
		{"another name", base + "/ssa?fieldManager=x", []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: other}\n"), http.StatusBadRequest},
		{"a field the kind lacks", base + "/ssa?fieldManager=x", appliedDeployment("spec: {replicaz: 1}"), http.StatusUnprocessableEntity},
		{"not YAML", base + "/ssa?fieldManager=x", []byte("{{{"), http.StatusBadRequest},
		{"a subresource", base + "/ssa/scale?fieldManager=x", []byte("apiVersion: autoscaling/v1\nkind: Scale\nmetadata: {name: ssa}\n"), http.StatusUnsupportedMediaType},
	} {
		if r := c.do("PATCH", bad.path, applyType, bad.body); r.code != bad.code {
			t.Errorf("%s: %d %s, want %d", bad.name, r.code, r.body, bad.code)
		}
	}
	if r := c.do("PATCH", base+"/ssa?force=true", "application/merge-patch+json", []byte(`{}`)); r.code != http.StatusUnprocessableEntity {
		t.Errorf("force on a merge patch: %d %s", r.code, r.body)
	}
}
