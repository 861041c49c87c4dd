package sim

import (
	"net/netip"
	"strings"
)

// route: kernel results go to stdout and the exit status is the errno
// (17 EEXIST, 3 ESRCH, 128 ENETUNREACH); parse errors are "route: ..." on
// stderr with exit 1 (spec §9).

const (
	errnoESRCH       = 3
	errnoEEXIST      = 17
	errnoENETUNREACH = 128
)

func routeUsage(inv *invocation) int {
	inv.errf("usage: route [ -fnpqtv ] [-R <root-dir>] cmd [[ -<qualifers> ] args ]")
	return 1
}

// routeReq is one parsed add/delete/change/get.
type routeReq struct {
	cmd      string
	host     bool
	dest     string // "default", ADDR/N or ADDR
	gateway  string
	ifp      string
	iface    bool // -interface
	destText string
}

func runRoute(inv *invocation) int {
	args := inv.args
	persistent := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		a := args[0]
		if a == "-R" {
			if len(args) < 2 {
				return routeUsage(inv)
			}
			args = args[2:]
			continue
		}
		for _, c := range a[1:] {
			switch c {
			case 'p':
				persistent = true
			case 'f', 'n', 'q', 't', 'v':
			default:
				inv.errf("route: illegal option -- %c", c)
				return routeUsage(inv)
			}
		}
		args = args[1:]
	}
	if len(args) == 0 {
		return routeUsage(inv)
	}
	cmd := args[0]
	switch cmd {
	case "show":
		return routeShow(inv, persistent)
	case "flush":
		return routeFlush(inv)
	case "add", "delete", "change", "get":
	default:
		inv.errf("route: %s: unknown command", cmd)
		return routeUsage(inv)
	}
	req, ok := parseRouteArgs(inv, cmd, args[1:])
	if !ok {
		return 1
	}
	if cmd == "get" {
		return routeGet(inv, req)
	}
	return routeChange(inv, req, persistent)
}

func parseRouteArgs(inv *invocation, cmd string, args []string) (*routeReq, bool) {
	r := &routeReq{cmd: cmd}
	var pos []string
	forceNet := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-net":
			forceNet = true
		case "-host":
			r.host = true
		case "-inet", "-inet6", "-static", "-reject", "-blackhole", "-private", "-proto1", "-proto2", "-xresolve", "-multirt", "-setsrc":
		case "-interface", "-iface":
			r.iface = true
		case "-ifp", "-netmask", "-mtu", "-hopcount", "-expire", "-recvpipe", "-sendpipe", "-ssthresh", "-rtt", "-rttvar", "-gateway":
			if i+1 >= len(args) {
				inv.errf("route: argument required following keyword %s", a)
				return nil, false
			}
			if a == "-ifp" {
				r.ifp = args[i+1]
			}
			if a == "-gateway" {
				r.gateway = args[i+1]
			}
			i++
		default:
			if strings.HasPrefix(a, "-") {
				inv.errf("route: %s: unknown keyword", strings.TrimPrefix(a, "-"))
				return nil, false
			}
			pos = append(pos, a)
		}
	}
	if len(pos) == 0 {
		inv.errf("route: destination required following command")
		return nil, false
	}
	dest := pos[0]
	switch {
	case dest == "default":
		r.dest = "default"
	default:
		if p, err := netip.ParsePrefix(dest); err == nil {
			r.dest = p.Masked().String()
		} else if a, err := netip.ParseAddr(dest); err == nil {
			r.dest = a.String()
			if !forceNet {
				r.host = true
			}
		} else {
			inv.errf("route: bad address: %s", dest)
			return nil, false
		}
	}
	if len(pos) > 1 && r.gateway == "" {
		r.gateway = pos[1]
	}
	if r.gateway != "" {
		if _, err := netip.ParseAddr(r.gateway); err != nil {
			inv.errf("route: bad address: %s", r.gateway)
			return nil, false
		}
	}
	if cmd != "get" && r.gateway == "" {
		inv.errf("route: gateway required for add or delete command")
		return nil, false
	}
	kind := "net"
	if r.host {
		kind = "host"
	}
	r.destText = kind + " " + r.dest
	return r, true
}

func findRoute(routes []*Route, dest, gw string) *Route {
	for _, r := range routes {
		if r.Dest == dest && r.Gateway == gw {
			return r
		}
	}
	return nil
}

// routeZone loads the IP stack route works on, like ipadm.
func routeZone(inv *invocation, st *State) (*Zone, bool) {
	z := st.zone(inv.zone)
	if z == nil || (z.Name != "global" && (z.State != stateRunning || !z.Config.exclusive())) {
		inv.errf("%s: socket: Operation not supported", inv.name)
		return nil, false
	}
	return z, true
}

// reachable: a gateway must be on a connected subnet of the stack (or be
// the loopback address, as -reject and -blackhole routes use), in the
// global zone as in a zone.
func reachable(z *Zone, gw string) bool {
	a, err := netip.ParseAddr(gw)
	if err != nil {
		return false
	}
	if a.IsLoopback() {
		return true
	}
	for _, ad := range z.Addresses {
		if p, ok := parseIPPrefix(strings.SplitN(ad.Addr, "%", 2)[0]); ok && p.Masked().Contains(a) {
			return true
		}
	}
	return false
}

func routeChange(inv *invocation, r *routeReq, persistent bool) int {
	msg := r.cmd + " " + r.destText + ": gateway " + r.gateway
	code := 0
	err := inv.h.update(func(st *State) bool {
		z, ok := routeZone(inv, st)
		if !ok {
			code = 1
			return false
		}
		if r.ifp != "" && findIface(z, r.ifp) == nil {
			inv.errf("route: %s: no such interface", r.ifp)
			code = 1
			return false
		}
		existing := findRoute(z.Routes, r.dest, r.gateway)
		kernelErr := ""
		errno := 0
		switch r.cmd {
		case "add":
			switch {
			case existing != nil:
				kernelErr, errno = "entry exists", errnoEEXIST
			case !r.iface && !reachable(z, r.gateway):
				kernelErr, errno = "Network is unreachable", errnoENETUNREACH
			default:
				z.Routes = append(z.Routes, &Route{Dest: r.dest, Host: r.host, Gateway: r.gateway, Iface: r.ifp})
			}
		case "change":
			if cur := firstRouteTo(z.Routes, r.dest); cur == nil {
				kernelErr, errno = "not in table", errnoESRCH
			} else {
				cur.Gateway, cur.Iface = r.gateway, r.ifp
			}
		case "delete":
			if existing == nil {
				kernelErr, errno = "not in table", errnoESRCH
			} else {
				z.Routes = removeRoute(z.Routes, existing)
			}
		}
		if kernelErr != "" {
			inv.outf("%s: %s", msg, kernelErr)
			code = errno
		} else {
			inv.outf("%s", msg)
		}
		if !persistent {
			return errno == 0
		}
		// -p: the persistent store is updated whatever the kernel said
		// (except unreachable), and the kernel result no longer decides
		// the exit status.
		if errno == errnoENETUNREACH {
			return false
		}
		code = 0
		pmsg := r.cmd + " persistent " + r.destText + ": gateway " + r.gateway
		pr := findRoute(z.PersistentRoutes, r.dest, r.gateway)
		switch {
		case r.cmd == "add" && pr != nil:
			inv.errf("%s: entry exists", pmsg)
			code = 1
		case r.cmd == "add":
			z.PersistentRoutes = append(z.PersistentRoutes, &Route{Dest: r.dest, Host: r.host, Gateway: r.gateway, Iface: r.ifp})
			inv.outf("%s", pmsg)
		case r.cmd == "delete" && pr == nil:
			inv.errf("%s: not in file", pmsg)
			code = 1
		case r.cmd == "delete":
			z.PersistentRoutes = removeRoute(z.PersistentRoutes, pr)
			inv.outf("%s", pmsg)
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

func firstRouteTo(routes []*Route, dest string) *Route {
	for _, r := range routes {
		if r.Dest == dest {
			return r
		}
	}
	return nil
}

func removeRoute(routes []*Route, r *Route) []*Route {
	var out []*Route
	for _, x := range routes {
		if x != r {
			out = append(out, x)
		}
	}
	return out
}

// routeGet prints the route that would carry traffic to the destination.
func routeGet(inv *invocation, r *routeReq) int {
	code := 0
	err := inv.h.view(func(st *State) {
		z, ok := routeZone(inv, st)
		if !ok {
			code = 1
			return
		}
		best, bestLen := (*Route)(nil), -1
		target, _ := netip.ParseAddr(r.dest)
		for _, x := range z.Routes {
			switch {
			case x.Dest == r.dest:
				best, bestLen = x, 129
			case x.Dest == "default" && bestLen < 0:
				best, bestLen = x, 0
			case target.IsValid():
				if p, err := netip.ParsePrefix(x.Dest); err == nil && p.Contains(target) && p.Bits() > bestLen {
					best, bestLen = x, p.Bits()
				} else if a, err := netip.ParseAddr(x.Dest); err == nil && a == target {
					best, bestLen = x, 128
				}
			}
		}
		if best == nil {
			inv.outf("get %s: not in table", r.destText)
			code = errnoESRCH
			return
		}
		iface := best.Iface
		if iface == "" {
			iface = ifaceFor(z, best.Gateway)
		}
		inv.outf("   route to: %s", r.dest)
		inv.outf("destination: %s", best.Dest)
		inv.outf("       mask: %s", routeMask(best.Dest))
		inv.outf("    gateway: %s", best.Gateway)
		inv.outf("  interface: %s", iface)
		inv.outf("      flags: <UP,GATEWAY,DONE,STATIC>")
		inv.outf(" recvpipe  sendpipe  ssthresh    rtt,ms rttvar,ms  hopcount      mtu     expire")
		inv.outf("       0         0         0         0         0         0      1500         0")
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

func routeMask(dest string) string {
	if dest == "default" {
		return "default"
	}
	p, err := netip.ParsePrefix(dest)
	if err != nil {
		return "255.255.255.255"
	}
	if p.Addr().Is4() {
		m := uint32(0xffffffff) << (32 - p.Bits())
		if p.Bits() == 0 {
			m = 0
		}
		return netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}).String()
	}
	return p.String()
}

// ifaceFor is the interface whose subnet holds the gateway.
func ifaceFor(z *Zone, gw string) string {
	a, err := netip.ParseAddr(gw)
	if err != nil {
		return ""
	}
	for _, ad := range z.Addresses {
		if p, ok := parseIPPrefix(strings.SplitN(ad.Addr, "%", 2)[0]); ok && p.Masked().Contains(a) {
			return strings.SplitN(ad.Obj, "/", 2)[0]
		}
	}
	return ""
}

// routeShow is "route -p show".
func routeShow(inv *invocation, persistent bool) int {
	if !persistent {
		return routeUsage(inv)
	}
	code := 0
	err := inv.h.view(func(st *State) {
		z, ok := routeZone(inv, st)
		if !ok {
			code = 1
			return
		}
		if len(z.PersistentRoutes) == 0 {
			inv.outf("No persistent routes are defined")
			return
		}
		inv.outf("Persistent routes:")
		for _, r := range z.PersistentRoutes {
			kind := "-net"
			if r.Host {
				kind = "-host"
			}
			line := "add " + kind + " " + r.Dest + " " + r.Gateway
			if r.Iface != "" {
				line += " -ifp " + r.Iface
			}
			inv.outf("%s", line)
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// routeFlush removes every gateway route.
func routeFlush(inv *invocation) int {
	code := 0
	err := inv.h.update(func(st *State) bool {
		z, ok := routeZone(inv, st)
		if !ok {
			code = 1
			return false
		}
		for _, r := range z.Routes {
			inv.outf("%-20s %-20s done", r.Dest, r.Gateway)
		}
		z.Routes = nil
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}
