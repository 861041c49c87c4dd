// Package noderoutes carries pod traffic between nodes: each node routes
// every other node's pod CIDR to that node's underlay address in its global
// zone (`route -p add -net 10.88.2.0/24 192.168.7.12`), and forwards IPv4
// between the pods' gateway link and its underlay link. Want computes the
// routes from the cluster's Nodes, Diff compares them with the routing
// table, and a Reconciler applies the difference: adds the missing
// routes, deletes the stale ones it owns, leaves the correct ones alone.
//
// The routes are plain routes through a next hop on the underlay network,
// so they need a network that delivers pod addresses between the nodes
// as it is (one layer-2 segment, or routers that know the pod CIDRs).
package noderoutes

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
)

// Route is one other node's pod CIDR through that node's address.
type Route struct {
	Dest    netip.Prefix `json:"dest"`
	Gateway netip.Addr   `json:"gateway"`
	Node    string       `json:"node,omitempty"` // the node whose pods Dest holds
}

func (r Route) same(o Route) bool { return r.Dest == o.Dest && r.Gateway == o.Gateway }

// Skipped is a node Want cannot route to, and why.
type Skipped struct {
	Node   string
	Reason string
}

// Want is the routes node self needs: every other Node's pod CIDR through
// its InternalIP. Nodes without a pod CIDR or an IPv4 InternalIP yet (not
// registered, or not reporting an address), and any whose pod CIDR
// overlaps self's, are skipped with the reason.
func Want(self string, nodes []model.Node) ([]Route, []Skipped) {
	var own netip.Prefix
	for i := range nodes {
		if nodes[i].Metadata.Name == self {
			own, _ = netip.ParsePrefix(nodes[i].Spec.PodCIDR)
		}
	}
	var routes []Route
	var skipped []Skipped
	for i := range nodes {
		n := &nodes[i]
		name := n.Metadata.Name
		if name == self {
			continue
		}
		cidr, err := netip.ParsePrefix(n.Spec.PodCIDR)
		if err != nil || cidr.Masked() != cidr || !cidr.Addr().Is4() || cidr.Bits() == 0 {
			skipped = append(skipped, Skipped{name, "no IPv4 pod CIDR"})
			continue
		}
		gw, err := netip.ParseAddr(n.InternalIP())
		if err != nil || !gw.Is4() {
			skipped = append(skipped, Skipped{name, "no IPv4 InternalIP address"})
			continue
		}
		if own.IsValid() && own.Overlaps(cidr) {
			skipped = append(skipped, Skipped{name, "its pod CIDR " + cidr.String() + " overlaps this node's " + own.String()})
			continue
		}
		routes = append(routes, Route{Dest: cidr, Gateway: gw, Node: name})
	}
	sortRoutes(routes)
	return routes, skipped
}

// Plan is what a Reconciler changes.
type Plan struct {
	Add    []Route // wanted, not in the table
	Delete []Route // stale: owned and no longer wanted, or in the way of a wanted one
	Keep   []Route // wanted and in the table
}

// Diff compares the wanted routes with the routing table. owned are the
// routes this node programmed before (a route not owned is an operator's
// and stays, unless it sends a wanted pod CIDR, or own, this node's pod
// CIDR, to another gateway: such a route would take pod traffic away).
// An owned route no longer wanted is deleted whether or not the table
// still has it, so its persistent copy goes too.
func Diff(want []Route, table []illumos.NetRoute, owned []Route, own netip.Prefix) Plan {
	var p Plan
	inTable := func(r Route) bool {
		return slices.ContainsFunc(table, func(t illumos.NetRoute) bool {
			return t.ThroughGateway() && t.Dest == r.Dest && t.Gateway == r.Gateway
		})
	}
	wanted := func(r Route) bool { return slices.ContainsFunc(want, r.same) }
	for _, r := range want {
		if inTable(r) {
			p.Keep = append(p.Keep, r)
		} else {
			p.Add = append(p.Add, r)
		}
	}
	for _, r := range owned {
		if !wanted(r) && !slices.ContainsFunc(p.Delete, r.same) {
			p.Delete = append(p.Delete, r)
		}
	}
	for _, t := range table {
		if !t.ThroughGateway() {
			continue
		}
		r := Route{Dest: t.Dest, Gateway: t.Gateway}
		claimed := (own.IsValid() && t.Dest == own) || slices.ContainsFunc(want, func(w Route) bool { return w.Dest == t.Dest })
		if claimed && !wanted(r) && !slices.ContainsFunc(p.Delete, r.same) {
			p.Delete = append(p.Delete, r)
		}
	}
	sortRoutes(p.Add)
	sortRoutes(p.Delete)
	return p
}

func sortRoutes(rs []Route) {
	slices.SortFunc(rs, func(a, b Route) int {
		if c := a.Dest.Addr().Compare(b.Dest.Addr()); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Dest.Bits(), b.Dest.Bits()); c != 0 {
			return c
		}
		return a.Gateway.Compare(b.Gateway)
	})
}
