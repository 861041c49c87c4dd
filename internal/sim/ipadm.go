package sim

import (
	"fmt"
	"net/netip"
	"strings"
)

// ipadm works on the IP stack of the zone it runs in: the global zone's,
// or (through zlogin) a running exclusive-IP zone's. Errors are
// "ipadm: ..." with exit 1, and, like ipadm's die(), also put a newline on
// stdout (spec §8).

const ipadmUsageText = `usage: ipadm <subcommand> <args> ...
	create-if	[-t] <interface>
	delete-if	<interface>
	create-addr	[-t] -T static [-d] -a{local|remote}=addr[/prefixlen]
			<addrobj>
	create-addr	[-t] -T dhcp [-w <seconds> | forever] <addrobj>
	create-addr	[-t] -T addrconf [-i interface-id]
			[-p {stateful|stateless}={yes|no}] <addrobj>
	delete-addr	[-r] <addrobj>
	show-addr	[[-p] -o <field>,...] [<addrobj>]
	show-if		[[-p] -o <field>,...] [<interface>]
	set-ifprop	[-t] -p <prop>=<value[,...]> -m <protocol> <interface>
	show-ifprop	[[-c] -o <field>,...] [-p <prop>,...] [-m <protocol>]
			[interface]
`

func ipadmUsage(inv *invocation) int {
	inv.errf("%s", strings.TrimRight(ipadmUsageText, "\n"))
	return 1
}

// ipadmDie prints an error as ipadm's die() does.
func ipadmDie(inv *invocation, format string, a ...any) int {
	inv.errf("ipadm: "+format, a...)
	fmt.Fprintln(inv.stdout)
	return 1
}

func runIpadm(inv *invocation) int {
	if len(inv.args) == 0 {
		return ipadmUsage(inv)
	}
	sub, args := inv.args[0], inv.args[1:]
	handlers := map[string]func(*invocation, []string) int{
		"create-if": ipadmCreateIf, "create-ip": ipadmCreateIf,
		"delete-if": ipadmDeleteIf, "delete-ip": ipadmDeleteIf,
		"create-addr": ipadmCreateAddr, "delete-addr": ipadmDeleteAddr,
		"show-addr": ipadmShowAddr, "show-if": ipadmShowIf,
		"set-ifprop": ipadmSetProp, "set-prop": ipadmSetProp, "set-addrprop": ipadmSetProp,
		"show-ifprop": ipadmShowIfProp,
	}
	h, ok := handlers[sub]
	if !ok {
		inv.errf("ipadm: unknown subcommand '%s'", sub)
		return ipadmUsage(inv)
	}
	return h(inv, args)
}

// ipZone loads the zone whose IP stack the command works on and checks it
// has one: a non-global zone must be running and exclusive-IP.
func ipZone(inv *invocation, st *State, what string) (*Zone, bool) {
	z := st.zone(inv.zone)
	if z == nil {
		ipadmDie(inv, "%s: zone %s does not exist", what, inv.zone)
		return nil, false
	}
	if z.Name != "global" {
		if z.State != stateRunning {
			ipadmDie(inv, "%s: zone %s is not running", what, z.Name)
			return nil, false
		}
		if !z.Config.exclusive() {
			ipadmDie(inv, "%s: Operation not supported", what)
			return nil, false
		}
	}
	return z, true
}

// zoneLinks are the datalinks an IP stack may plumb.
func zoneLinks(st *State, z *Zone) map[string]bool {
	m := map[string]bool{"lo0": true}
	if z.Name != "global" {
		for _, l := range z.Config.netLinks() {
			if st.link(l) != nil {
				m[l] = true
			}
		}
		return m
	}
	owners := linkOwners(st)
	for _, l := range st.Links {
		if l.Class != "etherstub" && owners[l.Name] == "" {
			m[l.Name] = true
		}
	}
	return m
}

func findIface(z *Zone, name string) *IPInterface {
	for _, i := range z.Interfaces {
		if i.Name == name {
			return i
		}
	}
	return nil
}

func findAddr(z *Zone, obj string) *IPAddress {
	for _, a := range z.Addresses {
		if a.Obj == obj {
			return a
		}
	}
	return nil
}

// ipadm create-if [-t] IF
func ipadmCreateIf(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "t")
	if !ok || len(rest) != 1 {
		return ipadmUsage(inv)
	}
	name := rest[0]
	code := 0
	err := inv.h.update(func(st *State) bool {
		z, ok := ipZone(inv, st, "Could not create "+name+" ")
		if !ok {
			code = 1
			return false
		}
		switch {
		case name == "lo0" || findIface(z, name) != nil:
			code = ipadmDie(inv, "Could not create %s : Interface already exists", name)
			return false
		case !zoneLinks(st, z)[name]:
			code = ipadmDie(inv, "Could not create %s : Datalink does not exist", name)
			return false
		}
		z.Interfaces = append(z.Interfaces, &IPInterface{Name: name, Temporary: len(opts) > 0})
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// ipadm delete-if IF
func ipadmDeleteIf(inv *invocation, args []string) int {
	_, rest, _, ok := getopt(args, "")
	if !ok || len(rest) != 1 {
		return ipadmUsage(inv)
	}
	name := rest[0]
	code := 0
	err := inv.h.update(func(st *State) bool {
		z, ok := ipZone(inv, st, "Could not delete "+name)
		if !ok {
			code = 1
			return false
		}
		if findIface(z, name) == nil {
			code = ipadmDie(inv, "Could not delete %s: Interface does not exist", name)
			return false
		}
		var ifs []*IPInterface
		for _, i := range z.Interfaces {
			if i.Name != name {
				ifs = append(ifs, i)
			}
		}
		z.Interfaces = ifs
		var addrs []*IPAddress
		for _, a := range z.Addresses {
			if !strings.HasPrefix(a.Obj, name+"/") {
				addrs = append(addrs, a)
			}
		}
		z.Addresses = addrs
		var routes []*Route
		for _, r := range z.Routes {
			if r.Iface != name {
				routes = append(routes, r)
			}
		}
		z.Routes = routes
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// validAddrObj checks IF/NAME: a link name, then a name starting with a
// letter, alphanumeric, at most 32 characters.
func validAddrObj(obj string) (string, bool) {
	ifname, name, ok := strings.Cut(obj, "/")
	if !ok || ifname == "" || name == "" || len(name) > 32 || !isAlpha(name[0]) {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		if !isAlnum(name[i]) {
			return "", false
		}
	}
	if ifname != "lo0" && !validLinkName(ifname) {
		return "", false
	}
	return ifname, true
}

// defaultPrefix is the classful mask ipadm falls back to without /N.
func defaultPrefix(a netip.Addr) int {
	if a.Is6() {
		return 64
	}
	switch b := a.As4()[0]; {
	case b < 128:
		return 8
	case b < 192:
		return 16
	}
	return 24
}

// ipadm create-addr [-t] -T static|dhcp|addrconf [-a [local=]ADDR[/N]] IF/NAME
func ipadmCreateAddr(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "tT:a:dh:w:i:p:1")
	if !ok || len(rest) != 1 {
		return ipadmUsage(inv)
	}
	typ, addrSpec := "", ""
	temp := false
	for _, o := range opts {
		switch o.c {
		case 't':
			temp = true
		case 'T':
			typ = o.val
		case 'a':
			addrSpec = o.val
		}
	}
	obj := rest[0]
	ifname, ok := validAddrObj(obj)
	if !ok {
		inv.errf("ipadm: invalid address object name: %s", obj)
		return ipadmUsage(inv)
	}
	var addr string
	switch typ {
	case "static":
		if addrSpec == "" {
			return ipadmUsage(inv)
		}
		spec := strings.TrimPrefix(addrSpec, "local=")
		p, ok := parseAddrWithDefault(spec)
		if !ok {
			return ipadmDie(inv, "Could not create address: Invalid argument provided")
		}
		addr = p.String()
	case "dhcp":
		addr = "?"
	case "addrconf":
	default:
		return ipadmUsage(inv)
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		z, ok := ipZone(inv, st, "Could not create address")
		if !ok {
			code = 1
			return false
		}
		if findAddr(z, obj) != nil || obj == "lo0/v4" || obj == "lo0/v6" {
			code = ipadmDie(inv, "Could not create address: Address object already exists")
			return false
		}
		if findIface(z, ifname) == nil && ifname != "lo0" {
			// libipadm plumbs the interface implicitly.
			if !zoneLinks(st, z)[ifname] {
				code = ipadmDie(inv, "Could not create address: Datalink does not exist")
				return false
			}
			z.Interfaces = append(z.Interfaces, &IPInterface{Name: ifname, Temporary: temp})
		}
		if typ == "addrconf" {
			addr = linkLocal(st, ifname)
		}
		if typ == "static" {
			for _, a := range z.Addresses {
				if ap, ok := parseIPPrefix(a.Addr); ok && ap.Addr().String() == strings.Split(addr, "/")[0] {
					code = ipadmDie(inv, "Could not create address: Address already in use")
					return false
				}
			}
		}
		z.Addresses = append(z.Addresses, &IPAddress{Obj: obj, Type: typ, Addr: addr, Temporary: temp})
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

func parseAddrWithDefault(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, defaultPrefix(a)), true
}

// linkLocal derives the EUI-64 link-local address of a link's MAC.
func linkLocal(st *State, ifname string) string {
	mac := []byte{2, 8, 0x20, 0, 0, 1}
	if l := st.link(ifname); l != nil {
		if m, ok := parseMAC(l.MAC); ok {
			mac = m
		}
	}
	b := [16]byte{0xfe, 0x80}
	b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15] = mac[0]^2, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]
	return fmt.Sprintf("%s%%%s/10", netip.AddrFrom16(b).String(), ifname)
}

// ipadm delete-addr [-r] IF/NAME
func ipadmDeleteAddr(inv *invocation, args []string) int {
	_, rest, _, ok := getopt(args, "r")
	if !ok || len(rest) != 1 {
		return ipadmUsage(inv)
	}
	obj := rest[0]
	if _, ok := validAddrObj(obj); !ok {
		inv.errf("ipadm: invalid address object name: %s", obj)
		return ipadmUsage(inv)
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		z, ok := ipZone(inv, st, "could not delete address")
		if !ok {
			code = 1
			return false
		}
		a := findAddr(z, obj)
		switch {
		case a == nil:
			code = ipadmDie(inv, "could not delete address: Object not found")
			return false
		case a.Type == "from-gz":
			code = ipadmDie(inv, "could not delete address: Operation not supported")
			return false
		}
		var addrs []*IPAddress
		for _, x := range z.Addresses {
			if x != a {
				addrs = append(addrs, x)
			}
		}
		z.Addresses = addrs
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

var addrFields = []ofmtField{{"ADDROBJ", 18}, {"TYPE", 9}, {"STATE", 13}, {"CURRENT", 8}, {"PERSISTENT", 11}, {"ADDR", 47}}

// ipadm show-addr [[-p] -o FIELDS] [IF/NAME | IF/]
func ipadmShowAddr(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "po:")
	if !ok || len(rest) > 1 {
		return ipadmUsage(inv)
	}
	parsable, fields := false, ""
	for _, o := range opts {
		switch o.c {
		case 'p':
			parsable = true
		case 'o':
			fields = o.val
		}
	}
	if parsable && fields == "" {
		return ipadmDie(inv, "-p requires -o")
	}
	if parsable && strings.EqualFold(fields, "all") {
		return ipadmDie(inv, "\"-o all\" is invalid with -p")
	}
	t, bad := selectFields(addrFields, []string{"ADDROBJ", "TYPE", "STATE", "ADDR"}, fields)
	if t == nil {
		return ipadmDie(inv, "unknown output field: '%s'", bad)
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		z, ok := ipZone(inv, st, "Could not get address")
		if !ok {
			code = 1
			return
		}
		all := append([]*IPAddress{
			{Obj: "lo0/v4", Type: "static", Addr: "127.0.0.1/8"},
			{Obj: "lo0/v6", Type: "static", Addr: "::1/128"},
		}, z.Addresses...)
		for _, a := range all {
			if len(rest) == 1 {
				filter := rest[0]
				if strings.HasSuffix(filter, "/") {
					if !strings.HasPrefix(a.Obj, filter) {
						continue
					}
				} else if a.Obj != filter {
					continue
				}
			}
			persistent := "U--"
			if a.Temporary {
				persistent = ""
			}
			rows = append(rows, map[string]string{
				"ADDROBJ": a.Obj, "TYPE": a.Type, "STATE": "ok", "CURRENT": "U----",
				"PERSISTENT": persistent, "ADDR": a.Addr,
			})
		}
		if len(rest) == 1 && len(rows) == 0 {
			code = ipadmDie(inv, "Could not get address: Object not found")
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 {
		t.print(inv.stdout, parsable, rows)
	}
	return code
}

var ifFields = []ofmtField{{"IFNAME", 11}, {"CLASS", 10}, {"STATE", 9}, {"CURRENT", 13}, {"PERSISTENT", 11}, {"OVER", 11}}

// ipadm show-if [[-p] -o FIELDS] [IF]
func ipadmShowIf(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "po:")
	if !ok || len(rest) > 1 {
		return ipadmUsage(inv)
	}
	parsable, fields := false, ""
	for _, o := range opts {
		switch o.c {
		case 'p':
			parsable = true
		case 'o':
			fields = o.val
		}
	}
	if parsable && fields == "" {
		return ipadmDie(inv, "-p requires -o")
	}
	t, bad := selectFields(ifFields, []string{"IFNAME", "CLASS", "STATE", "CURRENT", "PERSISTENT"}, fields)
	if t == nil {
		return ipadmDie(inv, "unknown output field: '%s'", bad)
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		z, ok := ipZone(inv, st, "Could not get interface")
		if !ok {
			code = 1
			return
		}
		rows = append(rows, map[string]string{"IFNAME": "lo0", "CLASS": "loopback", "STATE": "ok",
			"CURRENT": "-m-v------46", "PERSISTENT": "---", "OVER": ""})
		for _, i := range z.Interfaces {
			persistent := "-46"
			if i.Temporary {
				persistent = ""
			}
			rows = append(rows, map[string]string{"IFNAME": i.Name, "CLASS": "ip", "STATE": "ok",
				"CURRENT": "bm--------46", "PERSISTENT": persistent, "OVER": ""})
		}
		if len(rest) == 1 {
			var keep []map[string]string
			for _, r := range rows {
				if r["IFNAME"] == rest[0] {
					keep = append(keep, r)
				}
			}
			rows = keep
			if len(rows) == 0 {
				code = ipadmDie(inv, "Could not get interface information: Interface does not exist")
			}
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 {
		t.print(inv.stdout, parsable, rows)
	}
	return code
}
