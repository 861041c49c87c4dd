package api

import "testing"

// Every route the server answers is in the route table with what it does,
// so nothing is served without the authorizer having a say.
func TestEveryRouteIsInTheTable(t *testing.T) {
	s := &Server{}
	engine := s.engine()
	table := map[string]route{}
	for _, rt := range s.routes() {
		key := rt.method + " " + rt.path
		if _, dup := table[key]; dup {
			t.Errorf("%s is in the table twice", key)
		}
		table[key] = rt
		if _, checked := rt.attributes(); !checked && rt.does != open {
			t.Errorf("%s: %q says neither what it does nor that it is open", key, rt.does)
		}
	}
	served := engine.Routes()
	for _, r := range served {
		if _, ok := table[r.Method+" "+r.Path]; !ok {
			t.Errorf("%s %s is served but not in the route table", r.Method, r.Path)
		}
	}
	if len(served) != len(table) {
		t.Errorf("%d routes served, %d in the table", len(served), len(table))
	}
}
