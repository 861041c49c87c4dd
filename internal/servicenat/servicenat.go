// Package servicenat turns the service network into a node's ipnat rules
// and converges the host's rules to them: kube-proxy's job, done by
// each node's agent. Planning (Rules, Diff) is pure; Converge drives a
// host's ipnat.
//
// One rule per (service port, endpoint), all with the same left-hand side
// per service port and `round-robin`, is how IPFilter spreads connections
// over more than two backends (spec 10.3). Every rule carries Tag, so the
// rules zonewright owns are told apart from an operator's, which are never
// touched.
package servicenat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/servicenet"
)

// Tag marks zonewright's service rules. It is part of a rule's identity
// (spec 10.5) and fits IPFilter's 16 bytes, so it is printed back whole.
const Tag = "zonewright-svc"

// Network is where a node's pods are.
type Network struct {
	// Interface is the global zone's link the pods' traffic enters it by
	// (the VNIC on the etherstub holding their gateway address): rdr
	// applies to packets arriving inbound on it (spec 10.9).
	Interface string
	// PodCIDR is the node's pod network; its first address is the pods'
	// gateway (as model.PodGateway). Invalid: no hairpin rule.
	PodCIDR netip.Prefix
}

// Rules returns the node's NAT rules for snap, in a deterministic order.
//
// For every service with a ClusterIP, every port, every endpoint that has
// the port (a non-zero target port): one round-robin rdr rule on the
// network's interface, ordered by ClusterIP, port, protocol, then
// endpoint address. Headless services, ports that are neither TCP nor
// UDP, and addresses that do not parse (the control plane validated
// them; a bad one must not stop the others) get none.
//
// When there is any rdr rule and the pod network is known, a hairpin map
// rule comes first (HairpinRule).
func Rules(snap *servicenet.Snapshot, nw Network) []illumos.NATRule {
	if snap == nil {
		return nil
	}
	iface := nw.Interface
	var rules []*illumos.RdrRule
	for _, svc := range snap.Services {
		if svc.Headless() {
			continue
		}
		vip, err := netip.ParseAddr(svc.ClusterIP)
		if err != nil || !vip.Is4() {
			continue // IPv6 is not served (nor simulated)
		}
		for i, p := range svc.Ports {
			proto := protocol(p.Protocol)
			if proto == "" || p.Port <= 0 {
				continue
			}
			for _, ep := range svc.Endpoints {
				if i >= len(ep.TargetPorts) || ep.TargetPorts[i] <= 0 {
					continue // the pod lacks this port
				}
				ip, err := netip.ParseAddr(ep.IP)
				if err != nil || !ip.Is4() {
					continue
				}
				rules = append(rules, &illumos.RdrRule{Interface: iface, ExtAddr: netip.PrefixFrom(vip, 32),
					ExtPort: int(p.Port), IntAddrs: []netip.Addr{ip}, IntPort: int(ep.TargetPorts[i]),
					Proto: proto, RoundRobin: true, Tag: Tag})
			}
		}
	}
	slices.SortFunc(rules, compareRdr)
	rules = slices.CompactFunc(rules, func(a, b *illumos.RdrRule) bool { return compareRdr(a, b) == 0 })
	var out []illumos.NATRule
	if h := HairpinRule(nw); h != nil && len(rules) > 0 {
		out = append(out, h)
	}
	for _, r := range rules {
		out = append(out, r)
	}
	return out
}

// HairpinRule is the source NAT that lets a pod reach a ClusterIP whose
// chosen backend is on the same node (spec 10.9, remedy (a)). The pod's
// packet enters the global zone by the gateway link, is rdr'ed to the
// other pod and leaves by the same link; without this rule the backend
// would answer the client directly over the etherstub, from its own
// address rather than the ClusterIP, and the client would drop the reply.
// Rewriting the source to the gateway address makes the reply come back
// through the global zone, where both translations are undone. Only
// traffic routed through the global zone leaves by that link with a
// source in the pod network: pods on the etherstub talk to each other
// directly. Whether IPFilter applies a map to a packet it has just
// rdr'ed is UNCONFIRMED on a host (see docs/services.md). Nil without a pod network.
func HairpinRule(nw Network) *illumos.MapRule {
	if !nw.PodCIDR.IsValid() || !nw.PodCIDR.Addr().Is4() {
		return nil
	}
	cidr := nw.PodCIDR.Masked()
	gateway := cidr.Addr().Next()
	return &illumos.MapRule{Interface: nw.Interface, Src: cidr, Dst: netip.PrefixFrom(gateway, 32),
		Portmap: "auto", PortmapProto: "tcp/udp", Tag: Tag}
}

func compareRdr(a, b *illumos.RdrRule) int {
	return cmp.Or(a.ExtAddr.Addr().Compare(b.ExtAddr.Addr()), cmp.Compare(a.ExtPort, b.ExtPort),
		strings.Compare(a.Proto, b.Proto), a.IntAddrs[0].Compare(b.IntAddrs[0]), cmp.Compare(a.IntPort, b.IntPort))
}

// protocol is ipnat's name for a service port's protocol, "" when ipnat
// cannot redirect it (SCTP).
func protocol(p string) string {
	switch strings.ToUpper(p) {
	case "", "TCP":
		return "tcp"
	case "UDP":
		return "udp"
	}
	return ""
}

// Owned reports whether a listed rule is zonewright's: it carries Tag.
// A tagged rule with options this code does not model still counts (it
// is listed as a RawRule), so it is removed rather than left behind.
func Owned(r illumos.NATRule) bool {
	switch r := r.(type) {
	case *illumos.RdrRule:
		return r.Tag == Tag
	case *illumos.MapRule:
		return r.Tag == Tag
	case illumos.RawRule:
		f := strings.Fields(string(r))
		return len(f) >= 2 && f[len(f)-2] == "tag" && f[len(f)-1] == Tag
	}
	return false
}

// Diff compares the wanted rules with the host's (as `ipnat -l` lists
// them): add is what is wanted and not loaded, in the wanted order;
// remove is zonewright's loaded rules that are not wanted. Rules without
// Tag are never in remove.
func Diff(want, current []illumos.NATRule) (add, remove []illumos.NATRule) {
	loaded := map[string]bool{}
	for _, r := range current {
		loaded[key(r)] = true
	}
	wanted := map[string]bool{}
	for _, r := range want {
		k := key(r)
		if !wanted[k] && !loaded[k] {
			add = append(add, r)
		}
		wanted[k] = true
	}
	for _, r := range current {
		if Owned(r) && !wanted[key(r)] {
			remove = append(remove, r)
		}
	}
	return add, remove
}

// key is a rule's identity: its ipnat.conf line, which for a listed rule
// is the form ipnat prints (the wanted rules are built in that form).
func key(r illumos.NATRule) string {
	s, err := r.Rule()
	if err != nil {
		return fmt.Sprintf("invalid %#v", r)
	}
	return s
}

// NAT is the part of a host's ipnat that Converge uses; illumos.Ipnat
// is one.
type NAT interface {
	List(ctx context.Context) ([]illumos.NATRule, error)
	Load(ctx context.Context, rules []illumos.NATRule) error
	Remove(ctx context.Context, rules []illumos.NATRule) error
}

// Result is what one Converge did and found.
type Result struct {
	Added   int // rules sent to ipnat to add
	Removed int // obsolete zonewright rules sent to ipnat to remove
	// Missing are the wanted rules not loaded afterwards: ipnat refused
	// them (its exit status does not say, spec 10.5) or they were removed
	// meanwhile. Empty when the host has every wanted rule.
	Missing []illumos.NATRule
	// Leftover are obsolete zonewright rules still loaded afterwards.
	Leftover []illumos.NATRule
}

// Changed reports whether Converge changed anything.
func (r Result) Changed() bool { return r.Added > 0 || r.Removed > 0 }

// Converged reports whether the host has exactly the wanted zonewright
// rules.
func (r Result) Converged() bool { return len(r.Missing) == 0 && len(r.Leftover) == 0 }

// Converge makes the host's zonewright rules the wanted ones, level-
// triggered: it lists the loaded rules, adds the missing ones, then
// removes zonewright's obsolete ones (adding first, so a service port
// never has no rule while its backends change: during the swap both
// co-exist and each new connection takes one of them, spec 10.6), and
// reads the rules back to report what is still missing. Rules without
// Tag are never touched. A host that already has the wanted rules costs
// one `ipnat -l`.
func Converge(ctx context.Context, nat NAT, want []illumos.NATRule) (Result, error) {
	var res Result
	current, err := nat.List(ctx)
	if err != nil {
		return res, fmt.Errorf("list ipnat rules: %w", err)
	}
	add, remove := Diff(want, current)
	if len(add) == 0 && len(remove) == 0 {
		return res, nil
	}
	if len(add) > 0 {
		res.Added = len(add)
		// Refused rules are found by the read-back below.
		if err := nat.Load(ctx, add); err != nil && !errors.As(err, new(illumos.RefusedRules)) {
			return res, fmt.Errorf("add %d ipnat rules: %w", len(add), err)
		}
	}
	if len(remove) > 0 {
		res.Removed = len(remove)
		// A rule gone already (ESRCH) is what was wanted.
		if err := nat.Remove(ctx, remove); err != nil && !errors.As(err, new(illumos.RefusedRules)) {
			return res, fmt.Errorf("remove %d ipnat rules: %w", len(remove), err)
		}
	}
	if current, err = nat.List(ctx); err != nil {
		return res, fmt.Errorf("read back ipnat rules: %w", err)
	}
	res.Missing, res.Leftover = Diff(want, current)
	return res, nil
}
