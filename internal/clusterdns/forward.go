package clusterdns

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// DefaultResolvConf is where the node's own resolvers are read from when
// no upstream is configured.
const DefaultResolvConf = "/etc/resolv.conf"

const (
	// upstreamTimeout bounds one exchange with one upstream, so that a
	// dead upstream costs the client less than its own retry interval.
	upstreamTimeout = 2 * time.Second
	// maxForwarding bounds the forwards in flight: past it, a flood of
	// external names gets SERVFAIL rather than piling up goroutines.
	maxForwarding = 1000
	// forwardRate and forwardBurst are each source's share of forwards
	// (per second, and at once): past it, REFUSED. A pod resolving names
	// as programs do stays far below; a flood from one pod does not
	// become a flood at the upstream.
	forwardRate, forwardBurst = 50, 200
	// maxSources bounds the sources tracked; past it the oldest counts
	// are dropped at once (each then starts with a full share).
	maxSources = 4096
)

// forwarder sends names that are not the cluster's to upstream resolvers,
// in order, over UDP, then TCP when the answer was truncated and the
// client can take a whole one.
type forwarder struct {
	upstreams []string // host:port
	udp, tcp  *dns.Client
	slots     chan struct{}

	mu      sync.Mutex
	buckets map[netip.Addr]*bucket
	now     func() time.Time
}

// bucket is one source's share of forwards: tokens, refilled at
// forwardRate up to forwardBurst.
type bucket struct {
	tokens float64
	at     time.Time
}

// allow takes one forward from ip's share.
func (f *forwarder) allow(ip netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	b := f.buckets[ip]
	if b == nil {
		if len(f.buckets) >= maxSources {
			clear(f.buckets)
		}
		b = &bucket{tokens: forwardBurst, at: now}
		f.buckets[ip] = b
	}
	b.tokens = min(forwardBurst, b.tokens+now.Sub(b.at).Seconds()*forwardRate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func newForwarder(upstreams []string) (*forwarder, error) {
	f := &forwarder{
		udp:     &dns.Client{Net: "udp", Timeout: upstreamTimeout, UDPSize: maxUDPSize},
		tcp:     &dns.Client{Net: "tcp", Timeout: upstreamTimeout},
		slots:   make(chan struct{}, maxForwarding),
		buckets: map[netip.Addr]*bucket{},
		now:     time.Now,
	}
	for _, u := range upstreams {
		addr, err := upstreamAddr(u)
		if err != nil {
			return nil, err
		}
		f.upstreams = append(f.upstreams, addr)
	}
	return f, nil
}

func (f *forwarder) enabled() bool { return len(f.upstreams) > 0 }

// exchange returns the upstream's reply to r: REFUSED when there is no
// upstream, SERVFAIL when none answered.
func (f *forwarder) exchange(ctx context.Context, r *dns.Msg, clientTCP bool, log *slog.Logger) *dns.Msg {
	if !f.enabled() {
		return new(dns.Msg).SetRcode(r, dns.RcodeRefused)
	}
	select {
	case f.slots <- struct{}{}:
		defer func() { <-f.slots }()
	default:
		return new(dns.Msg).SetRcode(r, dns.RcodeServerFailure)
	}
	q := r.Copy() // the client's message stays the client's
	var lastErr error
	for _, up := range f.upstreams {
		reply, err := exchangeOnce(ctx, f.udp, q, up)
		if err == nil && reply.Truncated && clientTCP {
			reply, err = exchangeOnce(ctx, f.tcp, q, up)
		}
		if err == nil {
			reply.Id = r.Id
			return reply
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	log.Debug("cluster DNS: no upstream answered", "name", r.Question[0].Name, "upstreams", f.upstreams, "err", lastErr)
	return new(dns.Msg).SetRcode(r, dns.RcodeServerFailure)
}

// exchangeOnce is one exchange with one upstream that also ends when ctx
// does (the client honours only its deadline), so that Shutdown does not
// wait out a slow upstream.
func exchangeOnce(ctx context.Context, c *dns.Client, q *dns.Msg, upstream string) (*dns.Msg, error) {
	conn, err := c.DialContext(ctx, upstream)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	reply, _, err := c.ExchangeWithConnContext(ctx, q, conn)
	return reply, err
}

// ParseUpstreams reads an upstream flag's value into Config.Upstreams:
// "" is nil (the node's resolv.conf), "none" is empty (forward nothing),
// anything else a comma-separated list.
func ParseUpstreams(flag string) []string {
	switch strings.TrimSpace(flag) {
	case "":
		return nil
	case "none":
		return []string{}
	}
	return strings.FieldsFunc(flag, func(r rune) bool { return r == ',' || r == ' ' })
}

// CheckUpstreams refuses an upstream that is neither an address nor
// host:port, so a bad flag fails at start.
func CheckUpstreams(upstreams []string) error {
	for _, u := range upstreams {
		if _, err := upstreamAddr(u); err != nil {
			return err
		}
	}
	return nil
}

// upstreamAddr is host:port for "host" or "host:port" (IPv6 addresses
// bare or in brackets).
func upstreamAddr(u string) (string, error) {
	if ip, err := netip.ParseAddr(strings.Trim(u, "[]")); err == nil {
		return net.JoinHostPort(ip.String(), "53"), nil
	}
	if _, _, err := net.SplitHostPort(u); err != nil {
		return "", fmt.Errorf("dns upstream %q: %w", u, err)
	}
	return u, nil
}

// ResolvConfUpstreams returns the nameservers of a resolv.conf file as
// host:port, less self (the cluster DNS's own address, to which a node
// may point its own resolver): forwarding to it would loop.
func ResolvConfUpstreams(path, self string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	local := map[netip.Addr]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				local[p.Addr().Unmap()] = true
			}
		}
	}
	return parseResolvConf(f, self, local)
}

// parseResolvConf reads nameservers less self; local are the node's own
// addresses, each of which is self when it listens on all of them.
func parseResolvConf(r io.Reader, self string, local map[netip.Addr]bool) ([]string, error) {
	selfAddr, _ := netip.ParseAddrPort(self)
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		// A zone index (fe80::1%net0) does not survive JoinHostPort
		// usefully for an exchange; link-local resolvers are skipped.
		ip, err := netip.ParseAddr(fields[1])
		if err != nil || ip.Zone() != "" {
			continue
		}
		ap := netip.AddrPortFrom(ip.Unmap(), 53)
		if isSelf(ap, selfAddr, local) {
			continue
		}
		out = append(out, ap.String())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// isSelf reports whether a nameserver is the cluster DNS itself: the
// same address and port, or any of the node's addresses on its port when
// it listens on all of them.
func isSelf(ns, self netip.AddrPort, local map[netip.Addr]bool) bool {
	if !self.IsValid() || ns.Port() != self.Port() {
		return false
	}
	if ns.Addr() == self.Addr().Unmap() {
		return true
	}
	return self.Addr().IsUnspecified() && (ns.Addr().IsLoopback() || local[ns.Addr()])
}
