package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/zonewright/zonewright/internal/clusterdns"
	"github.com/zonewright/zonewright/internal/servicenet"
)

// The DNS section's synthetic cluster: every tenth service headless with
// a few endpoints, the rest with a ClusterIP, all with a named port.
const (
	dnsServices             = 1000
	dnsNamespaces           = 20
	dnsHeadlessEvery        = 10
	dnsEndpointsPerHeadless = 3
)

// DNSResults are the cluster DNS server's figures, alone on loopback.
type DNSResults struct {
	Services         int     `json:"services"`
	HeadlessServices int     `json:"headlessServices"`
	IndexBuildMs     float64 `json:"indexBuildMs"`
	Clients          int     `json:"clients"`
	Seconds          float64 `json:"seconds"`
	Queries          int64   `json:"queries"`
	QueriesPerSecond float64 `json:"queriesPerSecond"`
	// Errors are queries that timed out or came back with another rcode
	// or answer count than the name has.
	Errors  int64       `json:"errors"`
	Latency Percentiles `json:"latencyMs"`
	Mix     string      `json:"mix"`
}

// dnsQuery is one name of the load and what its answer must be.
type dnsQuery struct {
	name    string
	qtype   uint16
	rcode   int
	answers int
}

// dnsSection serves a synthetic snapshot from the cluster DNS server on
// loopback and queries it over UDP from clients at once for the given
// time, each sending its next query when the last is answered.
func dnsSection(ctx context.Context, seconds time.Duration, clients int, log *slog.Logger) (*DNSResults, error) {
	snap, queries := dnsCluster()
	var h servicenet.Holder
	srv, err := clusterdns.Listen(clusterdns.Config{Addr: "127.0.0.1:0", Upstreams: []string{}, Log: log}, &h)
	if err != nil {
		return nil, err
	}
	defer srv.Shutdown(context.Background())
	res := &DNSResults{Services: dnsServices, HeadlessServices: dnsServices / dnsHeadlessEvery, Clients: clients,
		Mix: "per 10 queries: 6 A of a ClusterIP service, 1 A of a headless one, 2 SRV, 1 NXDOMAIN"}
	start := time.Now()
	h.Store(snap)
	srv.Generation() // builds the index
	res.IndexBuildMs = float64(time.Since(start).Microseconds()) / 1000

	fmt.Fprintf(stderr, "dns: %d UDP clients for %s on %d services\n", clients, seconds, dnsServices)
	ctx, cancel := context.WithTimeout(ctx, seconds)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
	)
	began := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, errs := dnsClient(ctx, srv.Addr(), queries, c)
			mu.Lock()
			latencies = append(latencies, mine...)
			res.Errors += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(began).Seconds()
	res.Queries = int64(len(latencies))
	res.QueriesPerSecond = float64(res.Queries) / res.Seconds
	res.Latency = percentiles(latencies)
	if res.Queries == 0 {
		return nil, fmt.Errorf("dns: no query was answered (%d errors)", res.Errors)
	}
	return res, nil
}

// dnsClient queries over one UDP socket until ctx ends, starting at its
// own place in the list, and returns each answered query's latency and
// how many went wrong.
func dnsClient(ctx context.Context, addr string, queries []dnsQuery, offset int) ([]time.Duration, int64) {
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	conn, err := c.Dial(addr)
	if err != nil {
		return nil, 1
	}
	defer conn.Close()
	var (
		latencies []time.Duration
		errs      int64
	)
	m := new(dns.Msg)
	for i := offset * 7919; ctx.Err() == nil; i++ {
		q := queries[i%len(queries)]
		m.SetQuestion(q.name, q.qtype)
		start := time.Now()
		r, _, err := c.ExchangeWithConn(m, conn)
		if err != nil || r.Rcode != q.rcode || len(r.Answer) != q.answers {
			errs++
			continue
		}
		latencies = append(latencies, time.Since(start))
	}
	return latencies, errs
}

// dnsCluster is the synthetic snapshot and the queries of the load, in
// the proportions of DNSResults.Mix.
func dnsCluster() (*servicenet.Snapshot, []dnsQuery) {
	snap := &servicenet.Snapshot{Generation: 1}
	var clusterIP, headless, srv, missing []dnsQuery
	for i := range dnsServices {
		ns := fmt.Sprintf("ns-%d", i%dnsNamespaces)
		svc := servicenet.Service{Namespace: ns, Name: fmt.Sprintf("svc-%d", i),
			Ports: []servicenet.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
		name := svc.Name + "." + ns + ".svc.cluster.local."
		answers := 1
		if i%dnsHeadlessEvery == 0 {
			for e := range dnsEndpointsPerHeadless {
				svc.Endpoints = append(svc.Endpoints, servicenet.Endpoint{
					IP: fmt.Sprintf("10.%d.%d.%d", 1+e, i/250, i%250+1), Hostname: fmt.Sprintf("pod-%d", e)})
			}
			answers = dnsEndpointsPerHeadless
			headless = append(headless, dnsQuery{name: name, qtype: dns.TypeA, answers: answers})
		} else {
			svc.ClusterIP = fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
			clusterIP = append(clusterIP, dnsQuery{name: name, qtype: dns.TypeA, answers: 1})
		}
		srv = append(srv, dnsQuery{name: "_http._tcp." + name, qtype: dns.TypeSRV, answers: answers})
		missing = append(missing, dnsQuery{name: "nope-" + name, qtype: dns.TypeA, rcode: dns.RcodeNameError})
		snap.Services = append(snap.Services, svc)
	}
	var queries []dnsQuery
	for i := range dnsServices {
		queries = append(queries,
			clusterIP[i%len(clusterIP)], clusterIP[(i+1)%len(clusterIP)], clusterIP[(i+2)%len(clusterIP)],
			clusterIP[(i+3)%len(clusterIP)], clusterIP[(i+4)%len(clusterIP)], clusterIP[(i+5)%len(clusterIP)],
			headless[i%len(headless)], srv[i], srv[(i+500)%len(srv)], missing[i])
	}
	return snap, queries
}

func (r *DNSResults) print(w io.Writer) {
	fmt.Fprintf(w, "\ncluster DNS alone on loopback: %d services (%d headless), %d UDP clients, %.0f s\n",
		r.Services, r.HeadlessServices, r.Clients, r.Seconds)
	fmt.Fprintf(w, "  %s\n", r.Mix)
	fmt.Fprintf(w, "  queries/s served        %.0f (%d queries, %d errors)\n", r.QueriesPerSecond, r.Queries, r.Errors)
	fmt.Fprintf(w, "  latency                 p50 %.3f ms, p95 %.3f ms, p99 %.3f ms, max %.3f ms\n",
		r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max)
	fmt.Fprintf(w, "  index build             %.1f ms\n", r.IndexBuildMs)
}
