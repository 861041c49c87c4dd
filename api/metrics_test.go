package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/pgtest"
)

// Requests are counted under their route's template and the verb the
// authorizer sees (a list with watch=true is a watch); open watches are a
// gauge; GET /metrics serves it all.
func TestRequestsAreCountedByRouteTemplateAndVerb(t *testing.T) {
	reg := metrics.NewRegistry()
	c := serveConfig(t, pgtest.NewDatabase(t), api.Config{Metrics: metrics.NewServe(reg), MetricsHandler: metrics.Handler(reg)})
	for _, name := range []string{"a", "b"} {
		if r := c.do("GET", "/api/v1/namespaces/default/pods/"+name, "", nil); r.code != http.StatusNotFound {
			t.Fatalf("get pod %s: %d %s", name, r.code, r.body)
		}
	}
	c.watch("/api/v1/namespaces/default/pods?watch=true", "")
	r := c.do("GET", "/metrics", "", nil)
	if r.code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", r.code, r.body)
	}
	body := string(r.body)
	for _, want := range []string{
		`zonewright_api_requests_total{code="404",route="/api/v1/namespaces/:ns/pods/:name",verb="get"} 2`,
		`zonewright_api_request_duration_seconds_count{route="/api/v1/namespaces/:ns/pods/:name",verb="get"} 2`,
		`zonewright_api_open_watches 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `route="/api/v1/namespaces/default/pods/a"`) {
		t.Errorf("a request is counted under its path, not its route")
	}
}
