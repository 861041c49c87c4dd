package api

import (
	"net/http/httptest"
	"testing"
)

// A port-forward lasts as long as its connections, whatever its method:
// kubectl's SPDY fallback is a POST. (Put back `get &&` before the
// /portforward suffix in streams to see the POST bounded as a request.)
func TestAPortForwardIsAStreamWhateverItsMethod(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/api/v1/namespaces/default/pods/web/portforward", true},
		{"POST", "/api/v1/namespaces/default/pods/web/portforward", true},
		{"POST", "/api/v1/namespaces/default/pods", false},
		{"POST", "/api/v1/namespaces/default/pods/web/log", false},
	} {
		if got := streams(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: a stream %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

// A request streams by its route's shape and method, never by how its
// path ends: a pod named "exec" or "log", or a PUT of one, is bounded as
// any request. (Match the subresources by suffix again, as streams once
// did, to see the PUT of pod "exec" stream.)
func TestStreamsAreToldByRouteAndMethod(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/api/v1/namespaces/default/pods/web/exec", true},
		{"GET", "/api/v1/namespaces/default/pods/web/exec", true},
		{"GET", "/api/v1/namespaces/default/pods/web/log", true},
		{"GET", "/api/v1/namespaces/default/pods?watch=true", true},
		{"PUT", "/api/v1/volumetransfers/t1", true},
		{"GET", "/api/v1/images/base/artefact", true},
		{"GET", "/api/v1/servicenet", true},
		{"PUT", "/api/v1/namespaces/default/pods/exec", false},
		{"GET", "/api/v1/namespaces/default/pods/exec", false},
		{"PUT", "/api/v1/namespaces/default/pods/log", false},
		{"DELETE", "/api/v1/namespaces/default/pods/web/exec", false},
		{"PUT", "/api/v1/namespaces/default/configmaps/web/exec", false},
		{"PUT", "/api/v1/namespaces/default/pods/web/exec/more", false},
		{"GET", "/api/v1/namespaces/default/pods//log", false},
		{"POST", "/api/v1/namespaces/default/pods?watch=true", false},
		{"DELETE", "/api/v1/volumetransfers/t1", false},
		{"PUT", "/api/v1/volumetransfers/t1/x", false},
		{"PUT", "/api/v1/images/base/artefact", false},
		{"GET", "/apis/x/v1/namespaces/default/pods/web/exec", false},
	} {
		if got := streams(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: a stream %v, want %v", c.method, c.path, got, c.want)
		}
	}
}
