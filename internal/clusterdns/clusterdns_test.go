package clusterdns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/zonewright/zonewright/internal/servicenet"
)

// cluster is the snapshot most tests answer from.
func cluster(gen int64) *servicenet.Snapshot {
	var many []servicenet.Endpoint
	for i := range 200 {
		many = append(many, servicenet.Endpoint{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)})
	}
	return &servicenet.Snapshot{Generation: gen, Services: []servicenet.Service{
		{Namespace: "default", Name: "web", ClusterIP: "10.96.0.20", Ports: []servicenet.Port{
			{Name: "http", Protocol: "TCP", Port: 80},
			{Protocol: "TCP", Port: 8080}, // unnamed: no SRV
		}},
		{Namespace: "default", Name: "db", Ports: []servicenet.Port{{Name: "pg", Protocol: "TCP", Port: 5432}},
			Endpoints: []servicenet.Endpoint{
				{IP: "10.0.0.5", Hostname: "db-0", TargetPorts: []int32{5432}},
				{IP: "10.0.0.6", TargetPorts: []int32{15432}},
			}},
		{Namespace: "default", Name: "empty"}, // headless, no endpoints
		{Namespace: "default", Name: "half", Ports: []servicenet.Port{{Name: "pg", Protocol: "TCP", Port: 5432}},
			Endpoints: []servicenet.Endpoint{
				{IP: "10.0.0.8", Hostname: "half-0", TargetPorts: []int32{5432}},
				{IP: "10.0.0.9", Hostname: "half-1", TargetPorts: []int32{0}}, // no such port on this pod
			}},
		{Namespace: "prod", Name: "web", ClusterIP: "10.96.0.30"},
		{Namespace: "default", Name: "six", ClusterIP: "fd00:96::20"},
		{Namespace: "big", Name: "many", Endpoints: many},
	}}
}

// start serves from h on loopback until the test ends.
func start(t *testing.T, h *servicenet.Holder, upstreams []string) *Server {
	t.Helper()
	if upstreams == nil {
		upstreams = []string{} // no forwarding unless a test asks for it
	}
	s, err := Listen(Config{Addr: "127.0.0.1:0", Upstreams: upstreams}, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// ask sends one query over network ("udp" or "tcp"); edns is the EDNS0
// size offered, 0 for none.
func ask(t *testing.T, network, addr, name string, qtype uint16, edns uint16) *dns.Msg {
	t.Helper()
	q := new(dns.Msg).SetQuestion(name, qtype)
	if edns > 0 {
		q.SetEdns0(edns, false)
	}
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(q, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	return r
}

// rdata is each answer's data, sorted: "10.96.0.20", "0 100 80 web...".
func rdata(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		s := rr.String()
		out = append(out, s[len(rr.Header().String()):])
	}
	slices.Sort(out)
	return out
}

func TestRecordsAndRcodesOverUDPAndTCP(t *testing.T) {
	var h servicenet.Holder
	h.Store(cluster(7))
	s := start(t, &h, nil)
	const (
		web = "web.default.svc.cluster.local."
		db  = "db.default.svc.cluster.local."
	)
	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		rcode  int
		answer []string // rdata, sorted
		extra  []string // rdata of the additional section, sorted
		soa    bool     // the SOA is in the authority section
	}{
		{name: "a ClusterIP service's name is its ClusterIP", qname: web, qtype: dns.TypeA, answer: []string{"10.96.0.20"}},
		{name: "the same name in another namespace is another service", qname: "web.prod.svc.cluster.local.", qtype: dns.TypeA, answer: []string{"10.96.0.30"}},
		{name: "a headless service's name is its endpoints", qname: db, qtype: dns.TypeA, answer: []string{"10.0.0.5", "10.0.0.6"}},
		{name: "a headless service without endpoints does not exist", qname: "empty.default.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: true},
		{name: "an endpoint with a hostname has a name under its service", qname: "db-0." + db, qtype: dns.TypeA, answer: []string{"10.0.0.5"}},
		{name: "an endpoint without one is named by its address", qname: "10-0-0-6." + db, qtype: dns.TypeA, answer: []string{"10.0.0.6"}},
		{name: "a named port of a ClusterIP service has an SRV to the service", qname: "_http._tcp." + web, qtype: dns.TypeSRV,
			answer: []string{"0 100 80 " + web}, extra: []string{"10.96.0.20"}},
		{name: "a named port of a headless service has an SRV per endpoint, on the pod's port", qname: "_pg._tcp." + db, qtype: dns.TypeSRV,
			answer: []string{"0 50 15432 10-0-0-6." + db, "0 50 5432 db-0." + db}, extra: []string{"10.0.0.5", "10.0.0.6"}},
		{name: "a pod without the port has no SRV for it", qname: "_pg._tcp.half.default.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"0 50 5432 half-0.half.default.svc.cluster.local."}, extra: []string{"10.0.0.8"}},
		{name: "a port under the other protocol does not exist", qname: "_http._udp." + web, qtype: dns.TypeSRV, rcode: dns.RcodeNameError, soa: true},
		{name: "a ClusterIP's reverse name is the service", qname: "20.0.96.10.in-addr.arpa.", qtype: dns.TypePTR, answer: []string{web}},
		{name: "a headless endpoint with a hostname has a reverse name", qname: "5.0.0.10.in-addr.arpa.", qtype: dns.TypePTR, answer: []string{"db-0." + db}},
		{name: "a known reverse name without the type asked is NODATA", qname: "20.0.96.10.in-addr.arpa.", qtype: dns.TypeA, soa: true},
		{name: "an IPv6 ClusterIP is an AAAA", qname: "six.default.svc.cluster.local.", qtype: dns.TypeAAAA, answer: []string{"fd00:96::20"}},
		{name: "an IPv6 ClusterIP's reverse name is the service", qname: "0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypePTR,
			answer: []string{"six.default.svc.cluster.local."}},
		{name: "dns-version is the schema version", qname: "dns-version.cluster.local.", qtype: dns.TypeTXT, answer: []string{`"1.1.0"`}},
		{name: "a name without the type asked is NODATA", qname: web, qtype: dns.TypeAAAA, soa: true},
		{name: "a namespace exists", qname: "default.svc.cluster.local.", qtype: dns.TypeA, soa: true},
		{name: "svc exists", qname: "svc.cluster.local.", qtype: dns.TypeA, soa: true},
		{name: "the names above an SRV exist", qname: "_tcp." + web, qtype: dns.TypeA, soa: true},
		{name: "the domain has its SOA", qname: "cluster.local.", qtype: dns.TypeSOA, answer: []string{"ns.dns.cluster.local. hostmaster.cluster.local. 7 7200 1800 86400 5"}},
		{name: "an unknown service does not exist", qname: "nope.default.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: true},
		{name: "an unknown namespace does not exist", qname: "web.nope.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: true},
		{name: "pod names are not served", qname: "10-0-0-5.default.pod.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError, soa: true},
		{name: "names are case-insensitive", qname: "WeB.DeFault.SVC.Cluster.LOCAL.", qtype: dns.TypeA, answer: []string{"10.96.0.20"}},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, c := range cases {
			t.Run(network+": "+c.name, func(t *testing.T) {
				r := ask(t, network, s.Addr(), c.qname, c.qtype, 0)
				if r.Rcode != c.rcode {
					t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
				}
				if !r.Authoritative {
					t.Error("a cluster answer is not authoritative")
				}
				if r.Question[0].Name != c.qname {
					t.Errorf("question %q, want it as asked, %q", r.Question[0].Name, c.qname)
				}
				if got := rdata(r.Answer); !slices.Equal(got, c.answer) {
					t.Errorf("answer %q, want %q", got, c.answer)
				}
				for _, rr := range r.Answer {
					if rr.Header().Ttl != TTL || rr.Header().Name != c.qname {
						t.Errorf("answer %s: want TTL %d and the name as asked", rr, TTL)
					}
				}
				if got := rdata(r.Extra); !slices.Equal(got, c.extra) {
					t.Errorf("additional %q, want %q", got, c.extra)
				}
				if !c.soa {
					if len(r.Ns) != 0 {
						t.Errorf("authority %v, want none", r.Ns)
					}
					return
				}
				if len(r.Ns) != 1 {
					t.Fatalf("authority %v, want one SOA", r.Ns)
				}
				soa, ok := r.Ns[0].(*dns.SOA)
				if !ok || soa.Minttl != TTL || soa.Hdr.Ttl != TTL || soa.Serial != 7 {
					t.Errorf("authority %v, want an SOA with TTL and minimum %d and serial 7 (the generation)", r.Ns[0], TTL)
				}
			})
		}
	}
}

func TestBigAnswersAreTruncatedOnUDPAndWholeOnTCP(t *testing.T) {
	var h servicenet.Holder
	h.Store(cluster(1))
	s := start(t, &h, nil)
	const many = "many.big.svc.cluster.local."
	cases := []struct {
		name      string
		network   string
		edns      uint16
		truncated bool
	}{
		{name: "UDP without EDNS0 gets 512 bytes and TC", network: "udp", truncated: true},
		{name: "UDP with a 1232-byte EDNS0 size gets that much and TC", network: "udp", edns: 1232, truncated: true},
		{name: "UDP with a 4096-byte EDNS0 size gets the whole answer", network: "udp", edns: 4096},
		{name: "TCP gets the whole answer", network: "tcp"},
		{name: "TCP with EDNS0 gets the whole answer", network: "tcp", edns: 1232},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ask(t, c.network, s.Addr(), many, dns.TypeA, c.edns)
			if r.Truncated != c.truncated {
				t.Fatalf("TC %v, want %v", r.Truncated, c.truncated)
			}
			if (r.IsEdns0() != nil) != (c.edns > 0) {
				t.Errorf("OPT in the reply %v, in the query %v: it is echoed when asked only", r.IsEdns0() != nil, c.edns > 0)
			}
			r.Compress = true // as sent
			size := r.Len()
			if !c.truncated {
				if len(r.Answer) != 200 {
					t.Errorf("%d answers, want all 200", len(r.Answer))
				}
				return
			}
			limit := max(512, int(c.edns))
			if len(r.Answer) == 0 || len(r.Answer) >= 200 || size > limit {
				t.Errorf("%d answers in %d bytes: want some, not all, within %d bytes", len(r.Answer), size, limit)
			}
		})
	}
}

func TestAnEDNS0VersionAboveZeroIsBADVERS(t *testing.T) {
	var h servicenet.Holder
	h.Store(cluster(1))
	s := start(t, &h, nil)
	q := new(dns.Msg).SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	q.SetEdns0(1232, false)
	q.IsEdns0().SetVersion(1)
	r, _, err := (&dns.Client{Net: "udp"}).Exchange(q, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeBadVers || r.IsEdns0() == nil {
		t.Fatalf("rcode %s, OPT %v; want BADVERS with an OPT", dns.RcodeToString[r.Rcode], r.IsEdns0())
	}
}

// upstream serves example.org. and a big TXT over UDP and TCP on loopback.
func upstream(t *testing.T) string {
	t.Helper()
	pc, l, err := listenBoth("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		q := r.Question[0]
		switch {
		case q.Name == "example.org." && q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, 1)}}
		case q.Name == "big.example.org." && q.Qtype == dns.TypeTXT:
			for i := range 40 {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
					Txt: []string{fmt.Sprintf("%02d %s", i, strings.Repeat("x", 60))}})
			}
		case q.Name == "1.2.0.192.in-addr.arpa." && q.Qtype == dns.TypePTR:
			m.Answer = []dns.RR{&dns.PTR{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: 60}, Ptr: "example.org."}}
		default:
			m.Rcode = dns.RcodeNameError
		}
		if _, ok := w.RemoteAddr().(*net.UDPAddr); ok {
			m.Truncate(dns.MinMsgSize)
		}
		w.WriteMsg(m)
	})
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: handler}, {Listener: l, Handler: handler}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return pc.LocalAddr().String()
}

func TestOtherNamesAreForwardedUpstream(t *testing.T) {
	var h servicenet.Holder
	h.Store(cluster(1))
	s := start(t, &h, []string{upstream(t)})
	for _, network := range []string{"udp", "tcp"} {
		t.Run(network, func(t *testing.T) {
			r := ask(t, network, s.Addr(), "example.org.", dns.TypeA, 0)
			if r.Rcode != dns.RcodeSuccess || !slices.Equal(rdata(r.Answer), []string{"192.0.2.1"}) || !r.RecursionAvailable {
				t.Fatalf("example.org: %v", r)
			}
			r = ask(t, network, s.Addr(), "1.2.0.192.in-addr.arpa.", dns.TypePTR, 0)
			if !slices.Equal(rdata(r.Answer), []string{"example.org."}) {
				t.Fatalf("an address that is not the cluster's is not looked up upstream: %v", r)
			}
			r = ask(t, network, s.Addr(), "nope.example.org.", dns.TypeA, 0)
			if r.Rcode != dns.RcodeNameError {
				t.Fatalf("upstream's NXDOMAIN came back as %s", dns.RcodeToString[r.Rcode])
			}
			// The cluster's names are still the server's own.
			r = ask(t, network, s.Addr(), "web.default.svc.cluster.local.", dns.TypeA, 0)
			if !slices.Equal(rdata(r.Answer), []string{"10.96.0.20"}) {
				t.Fatalf("a cluster name with an upstream: %v", r)
			}
		})
	}
	t.Run("a truncated upstream answer is truncated for a UDP client and whole for a TCP one", func(t *testing.T) {
		if r := ask(t, "udp", s.Addr(), "big.example.org.", dns.TypeTXT, 0); !r.Truncated {
			t.Errorf("UDP: TC not set, %d answers", len(r.Answer))
		}
		if r := ask(t, "tcp", s.Addr(), "big.example.org.", dns.TypeTXT, 0); r.Truncated || len(r.Answer) != 40 {
			t.Errorf("TCP: TC %v, %d answers; want all 40", r.Truncated, len(r.Answer))
		}
	})
}

func TestWithoutUpstreamOtherNamesAreRefused(t *testing.T) {
	var h servicenet.Holder
	h.Store(cluster(1))
	s := start(t, &h, []string{})
	for _, network := range []string{"udp", "tcp"} {
		for _, name := range []string{"example.org.", "1.2.0.192.in-addr.arpa."} {
			if r := ask(t, network, s.Addr(), name, dns.TypeA, 0); r.Rcode != dns.RcodeRefused || r.RecursionAvailable {
				t.Errorf("%s %s: %s (RA %v), want REFUSED without RA", network, name, dns.RcodeToString[r.Rcode], r.RecursionAvailable)
			}
		}
	}
}

func TestANewerSnapshotIsAnsweredFromByTheNextQuery(t *testing.T) {
	var h servicenet.Holder
	h.Store(cluster(1))
	s := start(t, &h, nil)
	if g := s.Generation(); g != 1 {
		t.Fatalf("generation %d served, want 1", g)
	}
	const added = "added.default.svc.cluster.local."
	if r := ask(t, "udp", s.Addr(), added, dns.TypeA, 0); r.Rcode != dns.RcodeNameError {
		t.Fatalf("a service not yet added: %s", dns.RcodeToString[r.Rcode])
	}
	next := cluster(2)
	next.Services = append(next.Services, servicenet.Service{Namespace: "default", Name: "added", ClusterIP: "10.96.0.40"})
	next.Services[1].Endpoints = next.Services[1].Endpoints[:1] // db loses 10.0.0.6
	h.Store(next)
	if r := ask(t, "udp", s.Addr(), added, dns.TypeA, 0); !slices.Equal(rdata(r.Answer), []string{"10.96.0.40"}) {
		t.Fatalf("a service added at generation 2: %v", r)
	}
	if r := ask(t, "udp", s.Addr(), "db.default.svc.cluster.local.", dns.TypeA, 0); !slices.Equal(rdata(r.Answer), []string{"10.0.0.5"}) {
		t.Fatalf("a removed endpoint is still answered: %v", r.Answer)
	}
	if r := ask(t, "udp", s.Addr(), "10-0-0-6.db.default.svc.cluster.local.", dns.TypeA, 0); r.Rcode != dns.RcodeNameError {
		t.Fatalf("a removed endpoint's name: %s", dns.RcodeToString[r.Rcode])
	}
	if g := s.Generation(); g != 2 {
		t.Fatalf("generation %d served, want 2", g)
	}
}

func TestBeforeTheFirstSnapshotClusterNamesFail(t *testing.T) {
	var h servicenet.Holder
	s := start(t, &h, nil)
	// SERVFAIL, not NXDOMAIN: a negative answer would be cached.
	if r := ask(t, "udp", s.Addr(), "web.default.svc.cluster.local.", dns.TypeA, 0); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s before any snapshot, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	h.Store(cluster(1))
	if r := ask(t, "udp", s.Addr(), "web.default.svc.cluster.local.", dns.TypeA, 0); len(r.Answer) != 1 {
		t.Fatalf("after the first snapshot: %v", r)
	}
}

func TestShutdownStopsBothListenersAndLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	var h servicenet.Holder
	h.Store(cluster(1))
	s, err := Listen(Config{Addr: "127.0.0.1:0", Upstreams: []string{upstream(t)}}, &h)
	if err != nil {
		t.Fatal(err)
	}
	for _, network := range []string{"udp", "tcp"} {
		ask(t, network, s.Addr(), "web.default.svc.cluster.local.", dns.TypeA, 0)
		ask(t, network, s.Addr(), "example.org.", dns.TypeA, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("TCP still accepts after Shutdown")
	}
	c := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond}
	if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("web.default.svc.cluster.local.", dns.TypeA), s.Addr()); err == nil {
		t.Error("UDP still answers after Shutdown")
	}
	// The upstream's two servers stop at cleanup: allow for them.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after Shutdown, %d before\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

func TestResolvConfUpstreamsLeaveOutTheServerItself(t *testing.T) {
	conf := `# generated
search example.org
nameserver 127.0.0.1
nameserver 192.0.2.53
nameserver fe80::1%net0
nameserver 2001:db8::53
options ndots:2
nameserver 10.0.0.1
`
	cases := []struct {
		name, self string
		want       []string
	}{
		{name: "listening elsewhere, every nameserver", self: "10.0.0.1:5353",
			want: []string{"127.0.0.1:53", "192.0.2.53:53", "[2001:db8::53]:53", "10.0.0.1:53"}},
		{name: "listening on one of them, the others", self: "127.0.0.1:53",
			want: []string{"192.0.2.53:53", "[2001:db8::53]:53", "10.0.0.1:53"}},
		{name: "listening on every address, neither loopback nor the node's own", self: "0.0.0.0:53",
			want: []string{"192.0.2.53:53", "[2001:db8::53]:53"}},
	}
	local := map[netip.Addr]bool{netip.MustParseAddr("10.0.0.1"): true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseResolvConf(strings.NewReader(conf), c.self, local)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestQueriesDuringSnapshotSwapsSeeOneWholeGeneration(t *testing.T) {
	var h servicenet.Holder
	h.Store(cluster(1))
	s := start(t, &h, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
			for ctx.Err() == nil {
				r, _, err := c.Exchange(new(dns.Msg).SetQuestion("_pg._tcp.db.default.svc.cluster.local.", dns.TypeSRV), s.Addr())
				if err != nil {
					errs <- err
					return
				}
				// Every generation has the same two endpoints: an answer
				// mixing two indexes would show more or fewer.
				if len(r.Answer) != 2 || len(r.Extra) != 2 {
					errs <- fmt.Errorf("%d answers, %d additional", len(r.Answer), len(r.Extra))
					return
				}
			}
			errs <- nil
		}()
	}
	for g := int64(2); g <= 200; g++ {
		h.Store(cluster(g))
	}
	cancel()
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s.Generation() != 200 {
		t.Fatalf("generation %d served, want 200", s.Generation())
	}
}

func TestShutdownDoesNotWaitForASilentUpstream(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	var h servicenet.Holder
	h.Store(cluster(1))
	s, err := Listen(Config{Addr: "127.0.0.1:0", Upstreams: []string{silent.LocalAddr().String()}}, &h)
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan *dns.Msg, 1)
	go func() {
		r, _, _ := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(new(dns.Msg).SetQuestion("example.org.", dns.TypeA), s.Addr())
		answered <- r
	}()
	time.Sleep(200 * time.Millisecond) // the forward is under way
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Shutdown took %s with a forward in flight", took)
	}
	if r := <-answered; r != nil && r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("the forward cut short came back %s, want SERVFAIL or nothing", dns.RcodeToString[r.Rcode])
	}
}

func TestTheDOBitIsCopiedBack(t *testing.T) {
	var h servicenet.Holder
	h.Store(cluster(1))
	s := start(t, &h, nil)
	q := new(dns.Msg).SetQuestion("web.default.svc.cluster.local.", dns.TypeA)
	q.SetEdns0(1232, true)
	r, _, err := (&dns.Client{Net: "udp"}).Exchange(q, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if opt := r.IsEdns0(); opt == nil || !opt.Do() || len(r.Answer) != 1 {
		t.Fatalf("OPT %v with %d answers, want DO set and the answer", opt, len(r.Answer))
	}
}

func TestUpstreamFlagValues(t *testing.T) {
	cases := []struct {
		flag string
		want []string
	}{
		{"", nil},
		{"none", []string{}},
		{"192.0.2.53", []string{"192.0.2.53"}},
		{"192.0.2.53:5353, 2001:db8::53", []string{"192.0.2.53:5353", "2001:db8::53"}},
	}
	for _, c := range cases {
		got := ParseUpstreams(c.flag)
		if !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%q: %#v, want %#v", c.flag, got, c.want)
		}
	}
	if _, err := newForwarder(ParseUpstreams("192.0.2.53:5353, 2001:db8::53")); err != nil {
		t.Errorf("the forwarder refuses a parsed list: %v", err)
	}
}

// Other names are forwarded only for the sources the node serves (its
// pods, itself), each within its share: an open forwarder lets anyone who
// reaches it aim floods (85× amplification) at whoever a spoofed query
// names. The cluster's names are answered to all. Make mayForward return
// true to see the stranger's name forwarded and the flood pass.
func TestOnlyTheNodesSourcesAreForwardedForWithinTheirShare(t *testing.T) {
	var h servicenet.Holder
	h.Store(cluster(1))
	s, err := Listen(Config{Addr: "127.0.0.1:0", Upstreams: []string{upstream(t)},
		ForwardFor: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}, &h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	askFrom := func(src, name string) *dns.Msg {
		t.Helper()
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second,
			Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
		r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), s.Addr())
		if err != nil {
			t.Fatalf("%s from %s: %v", name, src, err)
		}
		return r
	}
	if r := askFrom("127.0.0.3", "example.org."); r.Rcode != dns.RcodeRefused {
		t.Errorf("a stranger's external name: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	if r := askFrom("127.0.0.3", "web.default.svc.cluster.local."); !slices.Equal(rdata(r.Answer), []string{"10.96.0.20"}) {
		t.Errorf("a stranger's cluster name: %v", r)
	}
	if r := askFrom("127.0.0.2", "example.org."); r.Rcode != dns.RcodeSuccess || !slices.Equal(rdata(r.Answer), []string{"192.0.2.1"}) {
		t.Fatalf("a pod's external name: %v", r)
	}
	refused := 0
	for range forwardBurst + 50 {
		if askFrom("127.0.0.2", "example.org.").Rcode == dns.RcodeRefused {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("%d external names at once from one pod were all forwarded; want those past its share of %d refused", forwardBurst+50, forwardBurst)
	}
	if r := askFrom("127.0.0.2", "web.default.svc.cluster.local."); !slices.Equal(rdata(r.Answer), []string{"10.96.0.20"}) {
		t.Errorf("a pod past its share asks a cluster name: %v", r)
	}
}
