// Package clusterdns is the cluster's DNS server: it answers
// <svc>.<ns>.svc.<domain> and the rest of the Kubernetes DNS specification
// from the newest servicenet snapshot, on UDP and TCP, and forwards every
// other name to upstream resolvers, since it is the pods' only nameserver.
//
// Records are indexed once per snapshot generation and the index swapped
// whole, so a query reads one whole generation. A new snapshot is indexed
// as soon as it is stored; a query waits for that only when it comes
// first, and otherwise takes no lock held longer than a pointer load.
package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/zonewright/zonewright/internal/servicenet"
)

// DefaultDomain is the cluster domain when none is given.
const DefaultDomain = "cluster.local"

// CheckDomain refuses a cluster domain that is no domain name (or the root).
func CheckDomain(domain string) error {
	if _, ok := dns.IsDomainName(domain); !ok || strings.Trim(domain, ".") == "" {
		return fmt.Errorf("cluster domain %q is not a domain name", domain)
	}
	return nil
}

// Config is what a Server needs besides its snapshots.
type Config struct {
	// Addr is the host:port served on both UDP and TCP. With port 0, one
	// free port is picked for both.
	Addr string
	// Domain is the cluster domain; DefaultDomain when empty.
	Domain string
	// Upstreams are the resolvers names outside the cluster go to (host
	// or host:port, port 53 by default). Nil: the nameservers of
	// /etc/resolv.conf other than this server. Empty but not nil: none;
	// such names are REFUSED.
	Upstreams []string
	// ForwardFor are the sources whose other names are forwarded: the
	// node's pods and the node itself. Anyone else gets REFUSED for them
	// (the cluster's own names are answered to all): an open forwarder
	// amplifies floods at whoever a spoofed query names. Nil: any source.
	ForwardFor []netip.Prefix
	// Log receives what goes wrong forwarding; slog.Default when nil.
	Log *slog.Logger
}

// Server answers cluster DNS from a servicenet.Holder. It is also a
// dns.Handler.
type Server struct {
	holder  *servicenet.Holder
	domain  string // lower case, absolute
	forward *forwarder
	// forwardFor: Config.ForwardFor; nil: any.
	forwardFor []netip.Prefix
	log        *slog.Logger
	index      atomic.Pointer[index]
	building   sync.Mutex // one index build at a time

	udp, tcp *dns.Server
	addr     string
	stop     context.CancelFunc
	ctx      context.Context // ends at Shutdown: forwards in flight give up
	wg       sync.WaitGroup
	shutdown sync.Once
}

// Listen binds cfg.Addr on UDP and TCP and serves from names until
// Shutdown.
func Listen(cfg Config, names *servicenet.Holder) (*Server, error) {
	domain := cfg.Domain
	if domain == "" {
		domain = DefaultDomain
	}
	if err := CheckDomain(domain); err != nil {
		return nil, err
	}
	s := &Server{holder: names, domain: dns.Fqdn(strings.ToLower(domain)), forwardFor: cfg.ForwardFor, log: cfg.Log}
	if s.log == nil {
		s.log = slog.Default()
	}
	pc, l, err := listenBoth(cfg.Addr)
	if err != nil {
		return nil, err
	}
	s.addr = pc.LocalAddr().String()
	upstreams := cfg.Upstreams
	if upstreams == nil {
		upstreams, err = ResolvConfUpstreams(DefaultResolvConf, s.addr)
		if err != nil || len(upstreams) == 0 {
			s.log.Warn("cluster DNS: no upstream resolvers in "+DefaultResolvConf+", names outside the cluster will be refused", "err", err)
		}
	}
	if s.forward, err = newForwarder(upstreams); err != nil {
		pc.Close()
		l.Close()
		return nil, err
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.index.Store(buildIndex(nil, s.domain))
	s.current() // the snapshot already held is indexed before the first query

	// Queries are read into buffers of the largest EDNS0 size honoured,
	// so that one with options (cookies, padding) is not cut.
	s.udp = &dns.Server{PacketConn: pc, Handler: s, UDPSize: maxUDPSize}
	s.tcp = &dns.Server{Listener: l, Handler: s}
	for _, srv := range []*dns.Server{s.udp, s.tcp} {
		started, failed := make(chan struct{}), make(chan error, 1)
		srv.NotifyStartedFunc = func() { close(started) }
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := srv.ActivateAndServe(); err != nil {
				failed <- err
				s.log.Error("cluster DNS stopped serving", "addr", s.addr, "err", err)
			}
		}()
		// Shutdown refuses a server that has not started yet.
		select {
		case <-started:
		case err := <-failed:
			s.Shutdown(context.Background())
			pc.Close()
			l.Close()
			return nil, fmt.Errorf("dns serve %s: %w", s.addr, err)
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.follow()
	}()
	return s, nil
}

// listenBoth binds UDP and TCP on the same address; with port 0 it takes
// the UDP port it got for TCP too, trying again if that port is taken.
func listenBoth(addr string) (net.PacketConn, net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dns listen address %q: %w", addr, err)
	}
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("dns listen udp %s: %w", addr, err)
		}
		_, got, _ := net.SplitHostPort(pc.LocalAddr().String())
		l, err := net.Listen("tcp", net.JoinHostPort(host, got))
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		if port != "0" || attempt == 10 {
			return nil, nil, fmt.Errorf("dns listen tcp %s: %w", net.JoinHostPort(host, got), err)
		}
	}
}

// Addr is the address served, on UDP and TCP.
func (s *Server) Addr() string { return s.addr }

// Generation is the snapshot generation the next query is answered from
// (0 before the first snapshot).
func (s *Server) Generation() int64 { return s.current().generation() }

// Shutdown stops both listeners and waits for them, and for queries in
// flight until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutdown.Do(func() {
		s.stop()
		err = errors.Join(s.udp.ShutdownContext(ctx), s.tcp.ShutdownContext(ctx))
		done := make(chan struct{})
		go func() {
			s.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			err = errors.Join(err, ctx.Err())
		}
	})
	return err
}

// follow indexes each new snapshot as it arrives, so that queries rarely
// build one themselves.
func (s *Server) follow() {
	for {
		if s.holder.Newer(s.ctx, s.Generation()) == nil {
			return
		}
	}
}

// current returns the index of the holder's newest snapshot, building it
// if it is not built yet: a snapshot stored is answered from by the next
// query.
func (s *Server) current() *index {
	snap := s.holder.Load()
	ix := s.index.Load()
	if ix.snap == snap || snap == nil {
		return ix
	}
	s.building.Lock()
	defer s.building.Unlock()
	ix = s.index.Load()
	if ix.snap == snap || ix.generation() >= snap.Generation {
		return ix // built meanwhile, or a newer one was
	}
	ix = buildIndex(snap, s.domain)
	s.index.Store(ix)
	return ix
}
