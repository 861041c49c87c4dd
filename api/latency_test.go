package api_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/imagemap"
)

// BenchmarkAuthorizationLatency measures what authentication and
// authorisation add to a GET of a pod and to a pod create, as p50/p99 of
// each request through the handler with and without them (one token
// lookup in PostgreSQL per request):
//
//	go test -run XXX -bench AuthorizationLatency -benchtime 1x ./api/
func BenchmarkAuthorizationLatency(b *testing.B) {
	a := newAuthzAPI(b, 0)
	a.seed()
	srv := api.New(api.Config{Store: a.st, Logger: slog.New(slog.DiscardHandler), ImageMap: &imagemap.Map{}})
	guarded, bare := srv.Handler(), api.UnguardedHandler(srv)
	const n = 2000
	pod := `{"metadata":{"name":%q},"spec":{"containers":[{"name":"c","image":"i","command":["c"]}]}}`
	measure := func(h http.Handler, token, prefix string) (get, create []time.Duration) {
		for i := range n {
			req := httptest.NewRequest("POST", "/api/v1/namespaces/a/pods", strings.NewReader(fmt.Sprintf(pod, fmt.Sprintf("%s-%d", prefix, i))))
			req.Header.Set("Content-Type", "application/json")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			start := time.Now()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			create = append(create, time.Since(start))
			if w.Code != 201 {
				b.Fatalf("create: %d %s", w.Code, w.Body)
			}
			req = httptest.NewRequest("GET", "/api/v1/namespaces/a/pods/p1", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			start = time.Now()
			w = httptest.NewRecorder()
			h.ServeHTTP(w, req)
			get = append(get, time.Since(start))
			if w.Code != 200 {
				b.Fatalf("get: %d %s", w.Code, w.Body)
			}
		}
		return get, create
	}
	edit := issue(b, a.st, auth.RoleEdit, "a")
	// Warm the pool and caches once, then alternate the two measurements.
	measure(bare, "", "warm-bare")
	measure(guarded, edit, "warm-guarded")
	bareGet, bareCreate := measure(bare, "", "bare")
	authGet, authCreate := measure(guarded, edit, "authz")
	report := func(name string, without, with []time.Duration) {
		p := func(d []time.Duration, q float64) time.Duration {
			s := slices.Clone(d)
			slices.Sort(s)
			return s[int(float64(len(s)-1)*q)]
		}
		fmt.Printf("%-10s without authz p50 %-10v p99 %-10v  with authz p50 %-10v p99 %-10v  added p50 %v p99 %v\n", name,
			p(without, .5), p(without, .99), p(with, .5), p(with, .99), p(with, .5)-p(without, .5), p(with, .99)-p(without, .99))
	}
	report("GET pod", bareGet, authGet)
	report("create pod", bareCreate, authCreate)
}
