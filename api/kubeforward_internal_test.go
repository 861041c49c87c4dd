package api

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/zonewright/zonewright/internal/auth"
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
		if got := routedServer().streams(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
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
		if got := routedServer().streams(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: a stream %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

// routedServer is a Server whose routes are known, as Handler leaves it.
func routedServer() *Server {
	s := &Server{}
	s.engine()
	return s
}

// A watch is a GET of a list route with watch=true: the same query on a
// single object, on a POST or on /healthz is an ordinary request, bounded
// as any. (Drop `&& lists.match(r.URL.Path)` in streams to see the GET
// of one namespace, of one pod and of /healthz counted as watches.)
func TestAWatchIsAGetOfAListRoute(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/api/v1/namespaces?watch=true", true},
		{"GET", "/api/v1/pods?watch=1", true},
		{"GET", "/api/v1/namespaces/default/pods?watch=true", true},
		{"GET", "/apis/apps/v1/namespaces/default/deployments?watch=true", true},
		{"GET", "/api/v1/namespaces/default/pods", false},
		{"GET", "/api/v1/namespaces/default?watch=true", false},
		{"GET", "/api/v1/namespaces/default/pods/web?watch=true", false},
		{"GET", "/api/v1/namespaces/default/pods/?watch=true", false},
		{"GET", "/api/v1/namespaces//pods?watch=true", false},
		{"POST", "/api/v1/namespaces/default/pods?watch=true", false},
		{"GET", "/healthz?watch=true", false},
		{"GET", "/api/v1/nowhere?watch=true", false},
	} {
		if got := routedServer().streams(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: a stream %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

// Every GET route counts as a watch with watch=true exactly when the
// guard makes it one: when its verb is list. A route the router prefers
// (a fixed segment over a parameter) is never taken for a list.
func TestWatchesAreTheGuardsWatches(t *testing.T) {
	s := routedServer()
	for _, rt := range s.routes() {
		if rt.method != http.MethodGet {
			continue
		}
		a, _ := rt.attributes()
		path := regexp.MustCompile(`:[a-z]+`).ReplaceAllString(rt.path, "x")
		if got, want := s.streams(httptest.NewRequest("GET", path+"?watch=true", nil)), a.Verb == auth.VerbList || streams(httptest.NewRequest("GET", path, nil), &routeShapes{}); got != want {
			t.Errorf("GET %s?watch=true (%s): a stream %v, want %v", rt.path, rt.does, got, want)
		}
	}
}
