package api_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/auth"
)

// Discovery is for whoever is authenticated (a namespace's view token
// too), not for a join token nor anyone without credentials, and it
// lists each resource with the verbs its routes serve. (Make Allowed
// refuse discovery to see the view token refused.)
func TestDiscoveryListsWhatTheRoutesServe(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	view := caller{bearer: issue(t, a.st, auth.RoleView, "a")}
	code, b := a.do(view, "GET", "/api/v1", "")
	if code != 200 {
		t.Fatalf("a view token reads /api/v1: %d %s", code, b)
	}
	var core api.APIResourceList
	if err := json.Unmarshal([]byte(b), &core); err != nil {
		t.Fatal(err)
	}
	byName := map[string]api.APIResource{}
	for _, r := range core.Resources {
		byName[r.Name] = r
	}
	pods := byName["pods"]
	for _, v := range []string{"list", "watch", "get", "create", "update", "patch", "delete"} {
		if !slices.Contains(pods.Verbs, v) {
			t.Errorf("pods' verbs %v lack %s", pods.Verbs, v)
		}
	}
	if !pods.Namespaced || pods.Kind != "Pod" || byName["nodes"].Namespaced || byName["namespaces"].Namespaced {
		t.Errorf("scopes: pods %+v nodes %+v namespaces %+v", pods, byName["nodes"], byName["namespaces"])
	}
	if log := byName["pods/log"]; !slices.Equal(log.Verbs, []string{"get"}) || log.Kind != "Pod" {
		t.Errorf("pods/log: %+v", log)
	}
	if code, b := a.do(view, "GET", "/apis/apps/v1", ""); code != 200 || !json.Valid([]byte(b)) {
		t.Errorf("/apis/apps/v1: %d %s", code, b)
	}
	if code, _ := a.do(caller{bearer: a.issueJoin(`{}`).Token}, "GET", "/apis", ""); code != 403 {
		t.Errorf("a join token reads /apis: %d, want 403", code)
	}
	if code, _ := a.do(caller{}, "GET", "/api", ""); code != 401 {
		t.Errorf("no credentials read /api: %d, want 401", code)
	}
}
