package agent

import (
	"net"
	"net/netip"

	"github.com/zonewright/zonewright/internal/clusterdns"
	"github.com/zonewright/zonewright/internal/model"
)

// PodDNSPort is where the pods' resolver asks: resolv.conf names no port.
const PodDNSPort = "53"

// servePodDNS answers the cluster DNS for this node's pods on their
// gateway, from the service network snapshot the node follows (the same
// generation as its NAT rules). Pods reach it without NAT, whose UDP
// races are a known cause of 5-second lookups, and it keeps answering
// while the control plane is unreachable. Before the first snapshot it
// answers SERVFAIL, so resolvers ask again rather than cache a miss.
// It returns nil, having said why, when it cannot listen: pods then keep
// their image's resolver configuration.
func (a *Agent) servePodDNS() *clusterdns.Server {
	addr := net.JoinHostPort(a.podGateway().String(), PodDNSPort)
	// Other names are forwarded for this node's pods and the node itself
	// only: the server may be reachable from beyond them.
	forwardFor := []netip.Prefix{a.podCIDR, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	srv, err := clusterdns.Listen(clusterdns.Config{Addr: addr, Domain: a.cfg.ClusterDomain,
		Upstreams: a.cfg.DNSUpstreams, ForwardFor: forwardFor, Log: a.log.With("component", "dns")}, &a.serviceNet)
	if err != nil {
		a.log.Error("cannot serve the cluster DNS on the pods' gateway; pods keep their own resolver configuration", "addr", addr, "err", err)
		return nil
	}
	a.log.Info("serving the cluster DNS to pods", "addr", srv.Addr(), "domain", a.cfg.ClusterDomain)
	return srv
}

// podGateway is the pods' default router on this node: the assigned pod
// CIDR's first address, held by GatewayLink.
func (a *Agent) podGateway() netip.Addr {
	return model.PodGateway(a.podCIDR)
}
