package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlplane"
)

// APIGetResults compare one GET of the API over HTTPS and over plain HTTP,
// on kept-alive connections and on a new connection per request (TCP and,
// for HTTPS, a full handshake each), in milliseconds.
type APIGetResults struct {
	Requests       int         `json:"requestsPerMode"`
	HTTPSKeepAlive Percentiles `json:"httpsKeepAliveMs"`
	HTTPKeepAlive  Percentiles `json:"httpKeepAliveMs"`
	HTTPSNewConn   Percentiles `json:"httpsNewConnectionMs"`
	HTTPNewConn    Percentiles `json:"httpNewConnectionMs"`
}

// apiGetPath is the GET measured: a namespace's pods, through the store.
const apiGetPath = "/api/v1/namespaces/default/pods"

// apiGetSection GETs apiGetPath n times in each mode from the stack's
// HTTPS API and from a second replica serving plain HTTP
// (--insecure-http) on the same database. The modes take turns in rounds,
// so that a slower moment of the machine falls on all of them.
func apiGetSection(ctx context.Context, s *stack, n int) (*APIGetResults, error) {
	cfg := s.cpConfig
	cfg.Listen, cfg.APITLS, cfg.DNS.Addr = "127.0.0.1:0", controlplane.APITLS{InsecureHTTP: true}, ""
	plain, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("a plain HTTP replica: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = plain.Stop(sctx)
	}()
	modes := []struct {
		url     string
		newConn bool
		got     []time.Duration
	}{{url: s.cp.URL()}, {url: plain.URL()}, {url: s.cp.URL(), newConn: true}, {url: plain.URL(), newConn: true}}
	clients := make([]*http.Client, len(modes))
	for i, m := range modes {
		clients[i] = &http.Client{Transport: auth.Bearer{Token: s.cp.AdminToken(), Next: &http.Transport{DisableKeepAlives: m.newConn,
			TLSClientConfig: &tls.Config{RootCAs: s.cp.CA().Pool(), MinVersion: tls.VersionTLS12}}}}
	}
	const round, warmUp = 25, 10
	for i := range modes {
		if _, err := timeGets(ctx, clients[i], modes[i].url, warmUp); err != nil {
			return nil, err
		}
	}
	for done := 0; done < n; done += round {
		for i := range modes {
			d, err := timeGets(ctx, clients[i], modes[i].url, min(round, n-done))
			if err != nil {
				return nil, err
			}
			modes[i].got = append(modes[i].got, d...)
		}
	}
	return &APIGetResults{Requests: n, HTTPSKeepAlive: percentiles(modes[0].got), HTTPKeepAlive: percentiles(modes[1].got),
		HTTPSNewConn: percentiles(modes[2].got), HTTPNewConn: percentiles(modes[3].got)}, nil
}

// timeGets times n GETs of apiGetPath, each read to its end.
func timeGets(ctx context.Context, c *http.Client, base string, n int) ([]time.Duration, error) {
	var out []time.Duration
	for range n {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+apiGetPath, nil)
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %v", base+apiGetPath, resp.StatusCode, err)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func (r *APIGetResults) print(w io.Writer) {
	fmt.Fprintf(w, "\nAPI GET %s, %d requests per mode: HTTPS against plain HTTP (--insecure-http)\n", apiGetPath, r.Requests)
	row := func(name string, tls, plain Percentiles) {
		fmt.Fprintf(w, "  %-15s HTTPS p50 %.2f ms p99 %.2f ms   HTTP p50 %.2f ms p99 %.2f ms   added p50 %+.2f ms p99 %+.2f ms\n",
			name, tls.P50, tls.P99, plain.P50, plain.P99, tls.P50-plain.P50, tls.P99-plain.P99)
	}
	row("keep-alive", r.HTTPSKeepAlive, r.HTTPKeepAlive)
	row("new connection", r.HTTPSNewConn, r.HTTPNewConn)
}
