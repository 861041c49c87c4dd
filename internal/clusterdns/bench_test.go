package clusterdns

import (
	"net"
	"testing"

	"github.com/miekg/dns"

	"github.com/zonewright/zonewright/internal/servicenet"
)

// packWriter packs the reply as the server would send it, over UDP.
type packWriter struct{ dns.ResponseWriter }

func (packWriter) RemoteAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5300} }
func (packWriter) WriteMsg(m *dns.Msg) error {
	_, err := m.Pack()
	return err
}

// BenchmarkServeDNS is the work of one query without the sockets:
// lookup, reply, truncation check and packing.
func BenchmarkServeDNS(b *testing.B) {
	var h servicenet.Holder
	h.Store(cluster(1))
	s := &Server{holder: &h, domain: "cluster.local."}
	s.forward, _ = newForwarder(nil)
	s.index.Store(buildIndex(nil, s.domain))
	for _, c := range []struct {
		name  string
		qname string
		qtype uint16
	}{
		{"A", "web.default.svc.cluster.local.", dns.TypeA},
		{"SRV headless", "_pg._tcp.db.default.svc.cluster.local.", dns.TypeSRV},
		{"NXDOMAIN", "nope.default.svc.cluster.local.", dns.TypeA},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := new(dns.Msg).SetQuestion(c.qname, c.qtype)
			b.ReportAllocs()
			for b.Loop() {
				s.ServeDNS(packWriter{}, q)
			}
		})
	}
}
