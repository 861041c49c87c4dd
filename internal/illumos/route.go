package illumos

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// routePath is route inside the zone; it runs through zlogin.
const routePath = "/usr/sbin/route"

// AddDefaultRoute adds a persistent default route via gw
// (`route -p add default GW`). A route that is already there (exit 17,
// EEXIST, or "entry exists" in the persistent store) is success.
func (z InZone) AddDefaultRoute(ctx context.Context, gw string) error {
	const op = "route add"
	if _, err := netip.ParseAddr(gw); err != nil {
		return invalidf(op, z.Zone, "gateway %q is not an address", gw)
	}
	_, err := z.run(ctx, op, "default", []string{inZone(routePath), "-p", "add", "default", gw}, nil)
	if KindOf(err) == KindAlreadyExists {
		return nil
	}
	return err
}

// DeleteDefaultRoute removes the persistent default route via gw. A route
// that is not there (exit 3, ESRCH) is success.
func (z InZone) DeleteDefaultRoute(ctx context.Context, gw string) error {
	const op = "route delete"
	if _, err := netip.ParseAddr(gw); err != nil {
		return invalidf(op, z.Zone, "gateway %q is not an address", gw)
	}
	_, err := z.run(ctx, op, "default", []string{inZone(routePath), "-p", "delete", "default", gw}, nil)
	if KindOf(err) == KindNotFound {
		return nil
	}
	return err
}

// netstatPath is netstat of the host's own stack.
const netstatPath = "/usr/bin/netstat"

// NetRoute is one IPv4 route of a routing table (`netstat -rnv -f inet`).
type NetRoute struct {
	Dest netip.Prefix // 0.0.0.0/0 for the default route
	// Gateway is the next hop; for a connected network, the stack's own
	// address on it; invalid when the table shows none ("--").
	Gateway netip.Addr
	Device  string // the outgoing interface; "" when the table shows none
	Flags   string // U, G (through a gateway), H (host), ...
}

// ThroughGateway reports a route to a gateway (flag G), not a connected
// network or a local address.
func (r NetRoute) ThroughGateway() bool { return strings.Contains(r.Flags, "G") }

// AddNetRoute routes the network dest to gw, persistently (`route -p add
// -net DEST GW`: in the kernel's table and the persistent store, so it
// comes back after a reboot). A route already in the kernel's table or
// the store is success, so the call also restores a route an operator
// deleted from the table alone.
func (z InZone) AddNetRoute(ctx context.Context, dest netip.Prefix, gw netip.Addr) error {
	const op = "route add"
	if err := checkNetRoute(op, z.Zone, dest, gw); err != nil {
		return err
	}
	_, err := z.run(ctx, op, dest.String(), []string{inZone(routePath), "-p", "add", "-net", dest.String(), gw.String()}, nil)
	if KindOf(err) == KindAlreadyExists {
		return nil
	}
	return err
}

// DeleteNetRoute removes the route of dest to gw from the kernel's table
// and the persistent store (`route -p delete -net DEST GW`). A route
// already gone from either is success.
func (z InZone) DeleteNetRoute(ctx context.Context, dest netip.Prefix, gw netip.Addr) error {
	const op = "route delete"
	if err := checkNetRoute(op, z.Zone, dest, gw); err != nil {
		return err
	}
	_, err := z.run(ctx, op, dest.String(), []string{inZone(routePath), "-p", "delete", "-net", dest.String(), gw.String()}, nil)
	if KindOf(err) == KindNotFound {
		return nil
	}
	return err
}

func checkNetRoute(op, zone string, dest netip.Prefix, gw netip.Addr) error {
	if !dest.IsValid() || dest.Masked() != dest || dest.Bits() == 0 {
		return invalidf(op, zone, "destination %v is not a network such as 10.88.2.0/24", dest)
	}
	if !gw.IsValid() || gw.Is4() != dest.Addr().Is4() {
		return invalidf(op, zone, "gateway %v is not an address of %v's family", gw, dest)
	}
	return nil
}

// RoutingTable lists the host's IPv4 routes (`netstat -rnv -f inet`, whose
// verbose form is the one that shows each route's mask).
func (h Host) RoutingTable(ctx context.Context) ([]NetRoute, error) {
	const op = "netstat -r"
	res, err := run(ctx, h.Runner, op, "global", Cmd{Path: netstatPath, Args: []string{"-rnv", "-f", "inet"}})
	if err != nil {
		return nil, err
	}
	routes, err := ParseNetstatRoutes(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, "global", err)
	}
	return routes, nil
}

// ParseNetstatRoutes parses the IPv4 table of `netstat -rnv`
// (ire_report_item_v4 in illumos netstat.c): after the "IRE Table: IPv4"
// title and two header lines, one route a line, "%-20s %-15s %-20s %-6s
// %5u%c %4u %3u %-4s%6u %6u": destination (or "default"), mask, gateway
// ("--" for none), device (blank when the route has none), MTU with a '*'
// when fragmenting, RTT, references, flags, packets out and in.
func ParseNetstatRoutes(out string) ([]NetRoute, error) {
	var routes []NetRoute
	inV4, header := false, 0
	for _, line := range strings.Split(out, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasSuffix(trimmed, "Table: IPv4"):
			inV4, header = true, 2
			continue
		case strings.HasSuffix(trimmed, "Table: IPv6"):
			inV4 = false
			continue
		case !inV4 || trimmed == "":
			continue
		case header > 0:
			header--
			continue
		}
		// Destination, mask and gateway are never blank; the device is
		// (then the MTU, digits, comes next); the flags, "%-4s", run into
		// the packet count when they take 4 letters and it 6 digits.
		f := strings.Fields(trimmed)
		if len(f) < 7 {
			return nil, fmt.Errorf("route line %q: too few fields", trimmed)
		}
		device, rest := "", f[3:]
		if c := rest[0][0]; c < '0' || c > '9' {
			device, rest = rest[0], rest[1:]
		}
		if len(rest) < 4 {
			return nil, fmt.Errorf("route line %q: too few fields", trimmed)
		}
		flags := strings.TrimRight(rest[3], "0123456789")
		if flags == "" {
			return nil, fmt.Errorf("route line %q: no flags", trimmed)
		}
		var r NetRoute
		mask, err := netip.ParseAddr(f[1])
		if err != nil || !mask.Is4() {
			return nil, fmt.Errorf("route line %q: bad mask %q", trimmed, f[1])
		}
		bits := maskBits(mask)
		if bits < 0 {
			return nil, fmt.Errorf("route line %q: mask %s is not contiguous", trimmed, f[1])
		}
		dest := netip.IPv4Unspecified()
		if f[0] != "default" {
			if dest, err = netip.ParseAddr(f[0]); err != nil || !dest.Is4() {
				return nil, fmt.Errorf("route line %q: bad destination %q", trimmed, f[0])
			}
		}
		r.Dest = netip.PrefixFrom(dest, bits).Masked()
		if f[2] != "--" {
			if r.Gateway, err = netip.ParseAddr(f[2]); err != nil {
				return nil, fmt.Errorf("route line %q: bad gateway %q", trimmed, f[2])
			}
		}
		r.Device, r.Flags = device, flags
		routes = append(routes, r)
	}
	return routes, nil
}
