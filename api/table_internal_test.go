package api

import "testing"

// A table only when the client puts it before plain JSON, as kubectl
// does; zwctl and curl keep getting objects.
func TestATableOnlyWhenAskedFirst(t *testing.T) {
	for accept, want := range map[string]bool{
		"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json": true,
		"application/json": false,
		"":                 false,
		"*/*":              false,
		"application/json, application/json;as=Table;v=v1;g=meta.k8s.io": false,
		"application/json;as=Table;v=v1beta1;g=meta.k8s.io":              false,
		"application/yaml": false,
	} {
		if got := wantsTable(accept); got != want {
			t.Errorf("Accept %q: table %t, want %t", accept, got, want)
		}
	}
}
