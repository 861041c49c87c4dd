package sim

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

// In isolation mode natd serves the rdr rules in the node's namespace,
// where the zones' packets arrive through the pods' gateway. A rule's
// external address (a ClusterIP) is held by no interface there, so the
// kernel would route its packets on rather than deliver them and natd
// could not bind it: natd gives each such address a local route on the
// loopback (table local), marked with natLocalProto, and removes those
// of rules that are gone. Kernel NAT is not realised: natd still forwards
// in userspace, its connections to the backends leaving through the
// node's own routes.
const natLocalProto = "77"

// inNodeNetns says whether the calling process runs in the node's
// namespace in isolation mode: natd touches local routes only there,
// never in a namespace it was not made for (the host's).
func inNodeNetns(h *host) bool {
	ns := h.nodeNetns()
	if ns == "" {
		return false
	}
	self, err1 := os.Stat("/proc/self/ns/net")
	node, err2 := os.Stat(ns)
	return err1 == nil && err2 == nil && os.SameFile(self, node)
}

// syncLocalRoutes makes the local routes of the calling process's
// namespace (natd's: the node's) exactly those of want's addresses that
// no interface holds.
func syncLocalRoutes(want map[natKey][]*natRoute) error {
	held := map[netip.Addr]bool{}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return err
	}
	for _, a := range ifaddrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			held[p.Addr().Unmap()] = true
		}
	}
	var have []kernelRoute
	if err := ipJSON(&have, "-4", "route", "show", "table", "local", "proto", natLocalProto); err != nil {
		return err
	}
	wanted := map[netip.Addr]bool{}
	for k := range want {
		if k.addr.Is4() && !k.addr.IsUnspecified() && !k.addr.IsLoopback() && !held[k.addr] {
			wanted[k.addr] = true
		}
	}
	var lines []string
	mine := map[netip.Addr]bool{}
	for _, r := range have {
		a, err := netip.ParseAddr(strings.TrimSuffix(r.Dst, "/32"))
		if err != nil {
			continue
		}
		mine[a] = true
		if !wanted[a] {
			lines = append(lines, fmt.Sprintf("route del local %s/32 dev lo table local proto %s", a, natLocalProto))
		}
	}
	for a := range wanted {
		if !mine[a] {
			lines = append(lines, fmt.Sprintf("route replace local %s/32 dev lo table local proto %s", a, natLocalProto))
		}
	}
	return ipBatch(lines)
}
