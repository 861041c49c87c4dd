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
