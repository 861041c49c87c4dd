package model

import "testing"

// A registry reference is told from a catalog name (a DNS label) by its
// '/', ':' or '@'.
func TestIsRegistryReference(t *testing.T) {
	for in, want := range map[string]bool{
		"alpine": false, "base-64": false, "alpine:3.20": true, "library/alpine": true,
		"docker.io/library/alpine": true, "alpine@sha256:0123": true, "localhost:5000/x": true,
	} {
		if got := IsRegistryReference(in); got != want {
			t.Errorf("IsRegistryReference(%q) = %v, want %v", in, got, want)
		}
	}
}
