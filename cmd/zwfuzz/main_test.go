package main

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/simtest"
)

// Two thousand hostile requests and 48 slow clients against a dev stack
// of the test's own get no answer of 500 or more, none hangs, every slow
// client is let go of within its bound and the server logs no panic.
func TestHostileRequestsGetNoServerError(t *testing.T) {
	bin := t.TempDir()
	if err := simtest.BuildBinaries(bin, "zonewright", "illumos-sim"); err != nil {
		t.Fatal(err)
	}
	if err := run(bin, "", 2000, 48, 11, 8, 45*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A slow client is a failure when the server holds it past its bound,
// and not when the server lets it go: the check can fail. (Without the
// header timeout, the second server is the first.)
func TestASlowClientHeldPastItsBoundFails(t *testing.T) {
	t.Parallel()
	headers := slowKinds[1]
	if !strings.HasPrefix(headers.name, "headers") {
		t.Fatalf("slowKinds[1] is %q, not the slow headers", headers.name)
	}
	headers.bound = time.Second
	for _, tc := range []struct {
		name       string
		headerTime time.Duration
		wantHeld   bool
	}{{"no header timeout", 0, true}, {"a 1 s header timeout", time.Second, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewUnstartedServer(http.NotFoundHandler())
			srv.Config.ReadHeaderTimeout = tc.headerTime
			srv.StartTLS()
			defer srv.Close()
			cfg := &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
			res := hold(strings.TrimPrefix(srv.URL, "https://"), "t", cfg, headers, 3*time.Second)
			if held := res.err != nil && strings.Contains(res.err.Error(), "past its bound"); held != tc.wantHeld {
				t.Fatalf("held past its bound: %v, want %v (%+v)", held, tc.wantHeld, res)
			}
		})
	}
}
