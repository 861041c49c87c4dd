package sim

import (
	"fmt"
	"net/netip"
	"strings"
)

// netstat answers only the routing table report (`netstat -r`), of the IP
// stack route and ipadm work on (the spec's §9 lacks it; from illumos
// netstat.c ire_report_item_v4/v6, see README.md): the connected networks
// of the stack's addresses, the loopback host route, then its gateway
// routes in the order they were added. Counters (Ref, Use, Out, In/Fwd,
// Rtt) are 0; MTUs are the links' 1500 and lo0's 8232 (UNCONFIRMED: the
// kernel's walk order and counters, the IPv6 -v columns).

func netstatUsage(inv *invocation) int {
	inv.errf("usage: netstat [-anv] [-f address_family]")
	inv.errf("       netstat -r [-anv] [-f address_family|filter]")
	return 1
}

// netRoute is one row of the routing table report.
type netRoute struct {
	dest    netip.Prefix // Bits() 0 with an unspecified address: default
	gateway string       // "--" for none
	device  string
	flags   string // U, UG, UH, UGH
	mtu     int
}

func runNetstat(inv *invocation) int {
	opts, rest, bad, ok := getopt(inv.args, "adimnrspMgvf:P:I:DR")
	if !ok {
		inv.errf("netstat: illegal option -- %c", bad)
		return netstatUsage(inv)
	}
	if len(rest) > 0 {
		inv.errf("netstat: extra arguments")
		return netstatUsage(inv)
	}
	routes, verbose, v4, v6 := false, false, true, true
	for _, o := range opts {
		switch o.c {
		case 'r':
			routes = true
		case 'v':
			verbose = true
		case 'n', 'a':
		case 'f':
			switch o.val {
			case "inet":
				v4, v6 = true, false
			case "inet6":
				v4, v6 = false, true
			default:
				inv.errf("%s: unknown address family.", o.val)
				return 1
			}
		default:
			inv.errf("netstat: the simulator answers only -r [-anv] [-f inet|inet6]")
			return 1
		}
	}
	if !routes {
		inv.errf("netstat: the simulator answers only -r [-anv] [-f inet|inet6]")
		return 1
	}
	var table []netRoute
	code := 0
	err := inv.h.view(func(st *State) {
		z, ok := routeZone(inv, st)
		if !ok {
			code = 1
			return
		}
		table = routingTable(z)
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code != 0 {
		return code
	}
	if v4 {
		printRoutesV4(inv, table, verbose)
	}
	if v6 {
		printRoutesV6(inv, table, verbose)
	}
	return 0
}

// routingTable is the stack's routes: connected networks, loopback, then
// the gateway routes.
func routingTable(z *Zone) []netRoute {
	var out []netRoute
	for _, a := range z.Addresses {
		p, ok := parseIPPrefix(strings.SplitN(a.Addr, "%", 2)[0])
		if !ok || a.Addr == "?" {
			continue
		}
		flags := "U"
		if p.Bits() == p.Addr().BitLen() {
			flags = "UH"
		}
		out = append(out, netRoute{dest: p.Masked(), gateway: p.Addr().String(),
			device: strings.SplitN(a.Obj, "/", 2)[0], flags: flags, mtu: 1500})
	}
	out = append(out,
		netRoute{dest: netip.MustParsePrefix("127.0.0.1/32"), gateway: "127.0.0.1", device: "lo0", flags: "UH", mtu: 8232},
		netRoute{dest: netip.MustParsePrefix("::1/128"), gateway: "::1", device: "lo0", flags: "UH", mtu: 8252})
	for _, r := range z.Routes {
		var dest netip.Prefix
		switch {
		case r.Dest == "default":
			gw, err := netip.ParseAddr(r.Gateway)
			if err != nil {
				continue
			}
			dest = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
			if gw.Is4() {
				dest = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
			}
		default:
			p, ok := parseIPPrefix(r.Dest)
			if !ok {
				a, err := netip.ParseAddr(r.Dest)
				if err != nil {
					continue
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			dest = p
		}
		flags := "UG"
		if dest.Bits() == dest.Addr().BitLen() {
			flags = "UGH"
		}
		dev := r.Iface
		if dev == "" {
			dev = ifaceFor(z, r.Gateway)
		}
		out = append(out, netRoute{dest: dest, gateway: r.Gateway, device: dev, flags: flags, mtu: 1500})
	}
	return out
}

func v4Mask(bits int) string {
	m := uint32(0)
	if bits > 0 {
		m = ^uint32(0) << (32 - bits)
	}
	return fmt.Sprintf("%d.%d.%d.%d", byte(m>>24), byte(m>>16), byte(m>>8), byte(m))
}

// printRoutesV4 follows ire_report_item_v4: the destination is the
// network's address alone (the mask is in -v's Mask column), "default"
// for 0.0.0.0/0.
func printRoutesV4(inv *invocation, table []netRoute, verbose bool) {
	first := true
	for _, r := range table {
		if !r.dest.Addr().Is4() {
			continue
		}
		if first {
			if verbose {
				inv.outf("\nIRE Table: IPv4")
				inv.outf("  Destination             Mask           Gateway          Device Mxfrg Rtt   Ref Flg  Out  In/Fwd ")
				inv.outf("-------------------- --------------- -------------------- ------ ----- ----- --- --- ----- ------ ")
			} else {
				inv.outf("\nRouting Table: IPv4")
				inv.outf("  Destination           Gateway           Flags  Ref     Use     Interface ")
				inv.outf("-------------------- -------------------- ----- ----- ---------- --------- ")
			}
			first = false
		}
		dest := r.dest.Addr().String()
		if r.dest.Bits() == 0 {
			dest = "default"
		}
		if verbose {
			fmt.Fprintf(inv.stdout, "%-20s %-15s %-20s %-6s %5d%c %4d %3d %-4s%6d %6d \n",
				dest, v4Mask(r.dest.Bits()), r.gateway, r.device, r.mtu, ' ', 0, 0, r.flags, 0, 0)
		} else {
			fmt.Fprintf(inv.stdout, "%-20s %-20s %-5s  %4d %10d %-9s \n", dest, r.gateway, r.flags, 0, 0, r.device)
		}
	}
}

// printRoutesV6 follows ire_report_item_v6: DEST/PREFIX, without /128.
func printRoutesV6(inv *invocation, table []netRoute, verbose bool) {
	first := true
	for _, r := range table {
		if r.dest.Addr().Is4() {
			continue
		}
		if first {
			if verbose {
				inv.outf("\nIRE Table: IPv6")
				inv.outf("  Destination/Mask            Gateway                    If    PMTU   Rtt  Ref Flags  Out   In/Fwd ")
				inv.outf("--------------------------- --------------------------- ----- ------ ----- --- ----- ------ ------ ")
			} else {
				inv.outf("\nRouting Table: IPv6")
				inv.outf("  Destination/Mask            Gateway                   Flags Ref   Use    If   ")
				inv.outf("--------------------------- --------------------------- ----- --- ------- ----- ")
			}
			first = false
		}
		dest := r.dest.Addr().String()
		switch {
		case r.dest.Bits() == 0:
			dest = "default"
		case r.dest.Bits() != 128:
			dest = r.dest.String()
		}
		if verbose {
			fmt.Fprintf(inv.stdout, "%-27s %-27s %-5s %5d%c %5d %3d %-5s %6d %6d \n",
				dest, r.gateway, r.device, r.mtu, ' ', 0, 0, r.flags, 0, 0)
		} else {
			fmt.Fprintf(inv.stdout, "%-27s %-27s %-5s %3d %7d %-5s \n", dest, r.gateway, r.flags, 0, 0, r.device)
		}
	}
}
