package clusterdns

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/zonewright/zonewright/internal/servicenet"
)

// TTL is the time to live of every answer and of negative answers (the
// SOA's minimum): short, so that a service created, changed or deleted is
// seen within seconds, positive or negative (CoreDNS's default; no cache
// layer in front).
const TTL = 5

// SchemaVersion is the Kubernetes DNS specification's schema version,
// served as dns-version.<domain> TXT.
const SchemaVersion = "1.1.0"

// node is what one name holds. A node with no records is a name that
// exists only because names below it do (NODATA, not NXDOMAIN).
type node struct {
	addr  []dns.RR // A and AAAA
	srv   []dns.RR
	extra []dns.RR // the addresses of the SRV targets, for the additional section
	ptr   []dns.RR
	txt   []dns.RR
}

// index is one snapshot's records by lower-case absolute name, built
// once per generation and never changed afterwards.
type index struct {
	snap       *servicenet.Snapshot
	domain     string // lower case, absolute
	names      map[string]*node
	soa        *dns.SOA // of the cluster domain
	reverseSOA map[string]*dns.SOA
}

func (ix *index) generation() int64 {
	if ix.snap == nil {
		return 0
	}
	return ix.snap.Generation
}

// buildIndex turns a snapshot into records. snap may be nil (nothing
// known yet).
func buildIndex(snap *servicenet.Snapshot, domain string) *index {
	ix := &index{snap: snap, domain: domain, names: map[string]*node{}, reverseSOA: map[string]*dns.SOA{}}
	ix.soa = soa(domain, ix.generation())
	for _, zone := range []string{"in-addr.arpa.", "ip6.arpa."} {
		ix.reverseSOA[zone] = soa(zone, ix.generation())
	}
	ix.node(domain)
	ix.node("dns-version." + domain).txt = []dns.RR{&dns.TXT{Hdr: hdr("dns-version."+domain, dns.TypeTXT), Txt: []string{SchemaVersion}}}
	ix.node("svc." + domain)
	if snap == nil {
		return ix
	}
	for i := range snap.Services {
		ix.addService(&snap.Services[i])
	}
	return ix
}

func (ix *index) addService(svc *servicenet.Service) {
	ns := strings.ToLower(svc.Namespace)
	name := strings.ToLower(svc.Name) + "." + ns + ".svc." + ix.domain
	ix.node(ns + ".svc." + ix.domain)
	if !svc.Headless() {
		ip, err := netip.ParseAddr(svc.ClusterIP)
		if err != nil {
			return
		}
		a := addrRR(name, ip)
		ix.node(name).addr = append(ix.node(name).addr, a)
		ix.addPTR(ip, name)
		for _, p := range svc.Ports {
			if p.Name == "" || p.Port <= 0 {
				continue // the spec gives SRV records to named ports only
			}
			owner := srvName(p, name)
			n := ix.node(owner)
			n.srv = []dns.RR{srvRR(owner, name, uint16(p.Port), 100)}
			n.extra = []dns.RR{a}
		}
		return
	}
	// Headless: the name is the endpoints; NXDOMAIN when there are none.
	seen := map[netip.Addr]bool{}
	weight := uint16(max(1, 100/max(1, len(svc.Endpoints))))
	for _, ep := range svc.Endpoints {
		ip, err := netip.ParseAddr(ep.IP)
		if err != nil {
			continue
		}
		if seen[ip] {
			continue // listed twice: one set of records
		}
		seen[ip] = true
		ix.node(name).addr = append(ix.node(name).addr, addrRR(name, ip))
		// An endpoint without a hostname is named by its address, as in
		// CoreDNS, so that its SRV target resolves.
		label := strings.ToLower(ep.Hostname)
		if label == "" {
			label = dashed(ip)
		}
		epName := label + "." + name
		a := addrRR(epName, ip)
		ix.node(epName).addr = append(ix.node(epName).addr, a)
		if ep.Hostname != "" {
			ix.addPTR(ip, epName)
		}
		for i, p := range svc.Ports {
			if p.Name == "" {
				continue
			}
			// Headless traffic is not translated: the port is the pod's.
			port := p.Port
			if len(ep.TargetPorts) > 0 {
				if i >= len(ep.TargetPorts) || ep.TargetPorts[i] <= 0 {
					continue // this pod has no such port
				}
				port = ep.TargetPorts[i]
			}
			if port <= 0 {
				continue
			}
			owner := srvName(p, name)
			n := ix.node(owner)
			n.srv = append(n.srv, srvRR(owner, epName, uint16(port), weight))
			n.extra = append(n.extra, a)
		}
	}
}

func (ix *index) addPTR(ip netip.Addr, target string) {
	rev, err := dns.ReverseAddr(ip.String())
	if err != nil {
		return
	}
	n := ix.nodeOnly(rev)
	for _, rr := range n.ptr {
		if rr.(*dns.PTR).Ptr == target {
			return
		}
	}
	n.ptr = append(n.ptr, &dns.PTR{Hdr: hdr(rev, dns.TypePTR), Ptr: target})
}

// node returns the node of name, creating it and the names above it up
// to the cluster domain so that they exist.
func (ix *index) node(name string) *node {
	n := ix.nodeOnly(name)
	for parent := name; parent != ix.domain; {
		i := strings.IndexByte(parent, '.')
		if i < 0 || i == len(parent)-1 {
			break
		}
		parent = parent[i+1:]
		if _, ok := ix.names[parent]; ok {
			break
		}
		ix.names[parent] = &node{}
	}
	return n
}

// nodeOnly returns the node of name, creating it alone (reverse names:
// in-addr.arpa's other names are not ours).
func (ix *index) nodeOnly(name string) *node {
	n, ok := ix.names[name]
	if !ok {
		n = &node{}
		ix.names[name] = n
	}
	return n
}

// inDomain reports whether a lower-case absolute name is the cluster
// domain or below it.
func (ix *index) inDomain(name string) bool {
	return name == ix.domain || strings.HasSuffix(name, "."+ix.domain)
}

// reverseZone returns the reverse zone a lower-case name is under, or "".
func reverseZone(name string) string {
	for _, zone := range []string{"in-addr.arpa.", "ip6.arpa."} {
		if strings.HasSuffix(name, "."+zone) {
			return zone
		}
	}
	return ""
}

func srvName(p servicenet.Port, service string) string {
	return "_" + strings.ToLower(p.Name) + "._" + strings.ToLower(p.Protocol) + "." + service
}

func srvRR(owner, target string, port, weight uint16) dns.RR {
	return &dns.SRV{Hdr: hdr(owner, dns.TypeSRV), Priority: 0, Weight: weight, Port: port, Target: target}
}

func addrRR(name string, ip netip.Addr) dns.RR {
	if ip.Is4() || ip.Is4In6() {
		return &dns.A{Hdr: hdr(name, dns.TypeA), A: ip.Unmap().AsSlice()}
	}
	return &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA), AAAA: ip.AsSlice()}
}

func hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: TTL}
}

// soa is a zone's SOA; its serial is the generation (truncated), its
// minimum the TTL so that negative answers are cached no longer than
// positive ones.
func soa(zone string, generation int64) *dns.SOA {
	return &dns.SOA{
		Hdr:     hdr(zone, dns.TypeSOA),
		Ns:      "ns.dns." + zone,
		Mbox:    "hostmaster." + zone,
		Serial:  uint32(generation),
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  TTL,
	}
}

// dashed is an address as a DNS label: 10-1-2-3, or fd00--1 for IPv6.
func dashed(ip netip.Addr) string {
	s := ip.Unmap().String()
	return strings.NewReplacer(".", "-", ":", "-").Replace(s)
}
