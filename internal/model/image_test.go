package model

import "testing"

// Registry images default to imagePullPolicy Always for the tag latest
// (said or left out, with no digest) and IfNotPresent otherwise; catalog
// images get none.
func TestPullPolicyDefaults(t *testing.T) {
	for image, want := range map[string]string{
		"alpine:3.20": PullIfNotPresent, "alpine:latest": PullAlways, "library/alpine": PullAlways,
		"127.0.0.1:5000/demo/app": PullAlways, "127.0.0.1:5000/demo/app:1": PullIfNotPresent,
		"alpine@sha256:0123": PullIfNotPresent, "base": "",
	} {
		p := &Pod{Spec: PodSpec{Containers: []Container{{Name: "a", Image: image}}}}
		DefaultPod(p)
		if got := p.Spec.Containers[0].ImagePullPolicy; got != want {
			t.Errorf("%s: %q, want %q", image, got, want)
		}
	}
}

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
