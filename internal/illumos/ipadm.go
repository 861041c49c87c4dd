package illumos

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos/names"
)

// ipadmPath is ipadm inside the zone; it runs through zlogin.
const ipadmPath = "/usr/sbin/ipadm"

// Addr is one row of `ipadm show-addr -p -o ADDROBJ,TYPE,STATE,ADDR`.
type Addr struct {
	Obj   string // address object, IF/NAME
	Type  string // static, dhcp, addrconf, from-gz
	State string // ok, tentative, duplicate, down, disabled, inaccessible
	Addr  string // 10.0.0.5/24, fe80::8:20ff:fe1:2%vnic0/10, or ? when unassigned
}

// CreateIf creates the IP interface over a datalink (persistent, so it
// comes back when the zone reboots). ErrAlreadyExists when it exists.
func (z InZone) CreateIf(ctx context.Context, ifname string) error {
	const op = "ipadm create-if"
	if !validIfName(ifname) {
		return invalidf(op, z.Zone+":"+ifname, "invalid interface name %q", ifname)
	}
	_, err := z.run(ctx, op, ifname, []string{inZone(ipadmPath), "create-if", ifname}, nil)
	return err
}

// CreateStaticAddr configures a static address (persistent) as addrobj
// IF/NAME, e.g. CreateStaticAddr(ctx, "vnic0/v4", "10.0.0.5/24").
// ErrAlreadyExists when the address object exists.
func (z InZone) CreateStaticAddr(ctx context.Context, addrobj, cidr string) error {
	const op = "ipadm create-addr"
	if err := checkAddrObj(op, z.Zone, addrobj); err != nil {
		return err
	}
	if _, err := netip.ParsePrefix(cidr); err != nil {
		return invalidf(op, z.Zone+":"+addrobj, "address %q is not ADDR/PREFIXLEN", cidr)
	}
	_, err := z.run(ctx, op, addrobj, []string{inZone(ipadmPath), "create-addr", "-T", "static", "-a", cidr, addrobj}, nil)
	return err
}

// SetIfProp sets an IP interface property for a protocol (persistent),
// e.g. SetIfProp(ctx, "zwgw0", "ipv4", "forwarding", "on").
func (z InZone) SetIfProp(ctx context.Context, ifname, proto, prop, value string) error {
	const op = "ipadm set-ifprop"
	if !validIfName(ifname) {
		return invalidf(op, z.Zone+":"+ifname, "invalid interface name %q", ifname)
	}
	if proto != "ipv4" && proto != "ipv6" && proto != "ip" {
		return invalidf(op, z.Zone+":"+ifname, "protocol %q is not ipv4, ipv6 or ip", proto)
	}
	_, err := z.run(ctx, op, ifname, []string{inZone(ipadmPath), "set-ifprop", "-p", prop + "=" + value, "-m", proto, ifname}, nil)
	return err
}

// IfProp reads the current value of an IP interface property for a
// protocol (`ipadm show-ifprop -c -o current -p PROP -m PROTO IF`), e.g.
// IfProp(ctx, "zwgw0", "ipv4", "forwarding") is "on" or "off".
// ErrNotFound when the interface does not exist.
func (z InZone) IfProp(ctx context.Context, ifname, proto, prop string) (string, error) {
	const op = "ipadm show-ifprop"
	if !validIfName(ifname) {
		return "", invalidf(op, z.Zone+":"+ifname, "invalid interface name %q", ifname)
	}
	if proto != "ipv4" && proto != "ipv6" {
		return "", invalidf(op, z.Zone+":"+ifname, "protocol %q is not ipv4 or ipv6", proto)
	}
	res, err := z.run(ctx, op, ifname, []string{inZone(ipadmPath), "show-ifprop", "-c", "-o", "current", "-p", prop, "-m", proto, ifname}, nil)
	if err != nil {
		return "", err
	}
	lines := nonEmptyLines(string(res.Stdout))
	if len(lines) != 1 {
		return "", parseError(op, z.Zone+":"+ifname, fmt.Errorf("want one value, got %q", res.Stdout))
	}
	return lines[0], nil
}

// DeleteAddr removes an address object. ErrNotFound when there is none.
func (z InZone) DeleteAddr(ctx context.Context, addrobj string) error {
	const op = "ipadm delete-addr"
	if err := checkAddrObj(op, z.Zone, addrobj); err != nil {
		return err
	}
	_, err := z.run(ctx, op, addrobj, []string{inZone(ipadmPath), "delete-addr", addrobj}, nil)
	return err
}

// Addrs lists the zone's addresses; with an address object, just that one
// (ErrNotFound when it does not exist).
func (z InZone) Addrs(ctx context.Context, addrobj string) ([]Addr, error) {
	const op = "ipadm show-addr"
	args := []string{inZone(ipadmPath), "show-addr", "-p", "-o", "ADDROBJ,TYPE,STATE,ADDR"}
	if addrobj != "" {
		if err := checkAddrObj(op, z.Zone, addrobj); err != nil {
			return nil, err
		}
		args = append(args, addrobj)
	}
	res, err := z.run(ctx, op, addrobj, args, nil)
	if err != nil {
		return nil, err
	}
	addrs, err := ParseShowAddr(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, z.Zone, err)
	}
	return addrs, nil
}

// ParseShowAddr parses `ipadm show-addr -p -o ADDROBJ,TYPE,STATE,ADDR`
// (libofmt: ':' separated, '\:' and '\\' escaped).
func ParseShowAddr(out string) ([]Addr, error) {
	var addrs []Addr
	for _, line := range nonEmptyLines(out) {
		f, err := splitParsable(line, 4)
		if err != nil {
			return nil, err
		}
		if f[0] == "" || !strings.Contains(f[0], "/") {
			return nil, fmt.Errorf("bad address object %q", f[0])
		}
		addrs = append(addrs, Addr{Obj: f[0], Type: f[1], State: f[2], Addr: f[3]})
	}
	return addrs, nil
}

// validIfName accepts link names and the loopback interface.
func validIfName(s string) bool { return names.ValidLinkName(s) }

// checkAddrObj checks IF/NAME: a link name, then an alphanumeric name
// starting with a letter, at most 32 characters.
func checkAddrObj(op, zone, obj string) error {
	ifname, name, ok := strings.Cut(obj, "/")
	valid := ok && validIfName(ifname) && name != "" && len(name) <= 32 && isLetter(name[0])
	for i := 0; valid && i < len(name); i++ {
		valid = isAlnum(name[i])
	}
	if !valid {
		return invalidf(op, zone+":"+obj, "invalid address object name %q (want IF/NAME)", obj)
	}
	return nil
}
