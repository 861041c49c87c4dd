package clusterdns

import (
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// maxUDPSize caps the EDNS0 payload size honoured and advertised: pods
// are one hop away, and anything larger goes over TCP.
const maxUDPSize = 4096

// ServeDNS answers one query: from the index for the cluster domain and
// the addresses it knows, from upstream for the rest.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if len(r.Question) != 1 {
		// The default accept function lets no other through; another
		// server using this handler may.
		w.WriteMsg(new(dns.Msg).SetRcodeFormatError(r))
		return
	}
	tcp := isTCP(w)
	opt := r.IsEdns0()
	if opt != nil && opt.Version() != 0 {
		m := new(dns.Msg).SetRcode(r, dns.RcodeBadVers)
		m.SetEdns0(maxUDPSize, false)
		w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	ix := s.current()
	m := ix.answer(r, name)
	if m == nil {
		if s.mayForward(w.RemoteAddr()) {
			m = s.forward.exchange(s.ctx, r, tcp, s.log)
		} else {
			m = new(dns.Msg).SetRcode(r, dns.RcodeRefused)
		}
	}
	m.RecursionAvailable = s.forward.enabled()
	if opt != nil && m.IsEdns0() == nil {
		m.SetEdns0(maxUDPSize, opt.Do()) // DO is copied back (RFC 3225 3)
	}
	fit(m, r, tcp)
	w.WriteMsg(m)
}

// mayForward: the query's source is one other names are forwarded for,
// within its share of forwards (forwarder.allow).
func (s *Server) mayForward(from net.Addr) bool {
	var ip netip.Addr
	switch a := from.(type) {
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	}
	ip = ip.Unmap()
	if s.forwardFor != nil && !slices.ContainsFunc(s.forwardFor, func(p netip.Prefix) bool { return p.Contains(ip) }) {
		return false
	}
	return s.forward.allow(ip)
}

// answer is the reply for a name the index owns, or nil for a name to
// forward: outside the cluster domain, or a reverse name that is no
// cluster address.
func (ix *index) answer(r *dns.Msg, name string) *dns.Msg {
	q := r.Question[0]
	m := new(dns.Msg).SetReply(r)
	m.Authoritative = true
	var zone *dns.SOA
	switch {
	case ix.inDomain(name):
		if ix.snap == nil {
			// Nothing known yet: an NXDOMAIN now would be cached; a
			// failure makes the client ask again.
			m.Authoritative = false
			m.Rcode = dns.RcodeServerFailure
			return m
		}
		zone = ix.soa
	case reverseZone(name) != "" && ix.names[name] != nil:
		zone = ix.reverseSOA[reverseZone(name)]
	default:
		return nil
	}
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		m.Rcode = dns.RcodeRefused
		return m
	}
	n := ix.names[name]
	if n == nil {
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{zone}
		return m
	}
	answer, extra := n.records(q.Qtype, name == ix.domain, zone)
	if len(answer) == 0 {
		m.Ns = []dns.RR{zone} // NODATA: the name exists, the type does not
		return m
	}
	// The index's slices are shared by every query: the reply gets its
	// own, answered with the name as asked (case and all), as the client
	// may compare it byte for byte (DNS 0x20).
	m.Answer = make([]dns.RR, len(answer))
	for i, rr := range answer {
		m.Answer[i] = withName(rr, q.Name)
	}
	m.Extra = slices.Clone(extra)
	return m
}

// records are a node's records of type t, and what goes in the
// additional section with them.
func (n *node) records(t uint16, apex bool, zone *dns.SOA) (answer, extra []dns.RR) {
	switch t {
	case dns.TypeA, dns.TypeAAAA:
		for _, rr := range n.addr {
			if rr.Header().Rrtype == t {
				answer = append(answer, rr)
			}
		}
	case dns.TypeSRV:
		return n.srv, n.extra
	case dns.TypePTR:
		return n.ptr, nil
	case dns.TypeTXT:
		return n.txt, nil
	case dns.TypeSOA:
		if apex {
			return []dns.RR{zone}, nil
		}
	case dns.TypeANY:
		answer = append(answer, n.addr...)
		answer = append(answer, n.srv...)
		answer = append(answer, n.ptr...)
		answer = append(answer, n.txt...)
		return answer, n.extra
	}
	return answer, nil
}

// withName is a copy of rr owned by name; the index's records are shared
// by every query and never changed.
func withName(rr dns.RR, name string) dns.RR {
	if rr.Header().Name == name {
		return rr
	}
	var c dns.RR
	switch rr := rr.(type) {
	case *dns.A:
		v := *rr
		c = &v
	case *dns.AAAA:
		v := *rr
		c = &v
	case *dns.SRV:
		v := *rr
		c = &v
	case *dns.PTR:
		v := *rr
		c = &v
	default:
		c = dns.Copy(rr)
	}
	c.Header().Name = name
	return c
}

// fit makes m fit what the client can take: 512 bytes or its EDNS0 size
// on UDP (TC set when answers had to go, so it asks again over TCP), the
// most a message can hold on TCP.
func fit(m, r *dns.Msg, tcp bool) {
	size := dns.MinMsgSize
	if tcp {
		size = dns.MaxMsgSize
	} else if opt := r.IsEdns0(); opt != nil {
		size = min(max(int(opt.UDPSize()), dns.MinMsgSize), maxUDPSize)
	}
	answers, authority := len(m.Answer), len(m.Ns)
	truncated := m.Truncated
	m.Compress = true
	m.Truncate(size)
	// Addresses of SRV targets left out of the additional section cost
	// the client a lookup, not a retry over TCP (RFC 2181 9).
	if len(m.Answer) == answers && len(m.Ns) == authority {
		m.Truncated = truncated
	}
}

func isTCP(w dns.ResponseWriter) bool {
	_, ok := w.RemoteAddr().(*net.TCPAddr)
	return ok
}
