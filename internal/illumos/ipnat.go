package illumos

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

const ipnatPath = "/usr/sbin/ipnat"

// Ipnat manages the host's IPFilter NAT rules (service ClusterIPs and
// egress NAT).
type Ipnat struct{ Runner Executor }

// NATRule is one ipnat.conf rule: an *RdrRule, a *MapRule, or a RawRule
// (a listed rule this package does not model, kept as printed).
type NATRule interface {
	// Rule renders the rule as one ipnat.conf line, or says why it cannot
	// be one.
	Rule() (string, error)
}

// RdrRule redirects traffic for an external address and port to internal
// addresses (ipnat.5 rdr).
type RdrRule struct {
	Interface  string
	ExtAddr    netip.Prefix // usually a /32
	ExtPort    int
	ExtPortEnd int // 0 for a single port, else the last port of a range
	IntAddrs   []netip.Addr
	IntPort    int
	Proto      string // tcp, udp, tcp/udp
	RoundRobin bool   // spread across IntAddrs
}

// MapRule rewrites source addresses of outgoing traffic (ipnat.5 map).
type MapRule struct {
	Interface string
	Src       netip.Prefix
	Dst       netip.Prefix
	// Portmap is "" (none), "auto", or "LOW:HIGH"; PortmapProto is then
	// tcp, udp or tcp/udp.
	Portmap      string
	PortmapProto string
}

// RawRule is a listed rule kept as printed.
type RawRule string

// Rule implements NATRule.
func (r RawRule) Rule() (string, error) {
	if strings.ContainsAny(string(r), "\n\r\x00#") {
		return "", fmt.Errorf("raw rule %q contains a newline, NUL or comment", string(r))
	}
	return strings.TrimSpace(string(r)), nil
}

// Rule implements NATRule.
func (r *RdrRule) Rule() (string, error) {
	if !ValidLinkName(r.Interface) {
		return "", fmt.Errorf("rdr: invalid interface %q", r.Interface)
	}
	if !r.ExtAddr.IsValid() {
		return "", fmt.Errorf("rdr: missing external address")
	}
	if !validPort(r.ExtPort) || !validPort(r.IntPort) {
		return "", fmt.Errorf("rdr: ports %d -> %d out of 1-65535", r.ExtPort, r.IntPort)
	}
	if r.ExtPortEnd != 0 && (!validPort(r.ExtPortEnd) || r.ExtPortEnd < r.ExtPort) {
		return "", fmt.Errorf("rdr: bad port range %d-%d", r.ExtPort, r.ExtPortEnd)
	}
	if len(r.IntAddrs) == 0 {
		return "", fmt.Errorf("rdr: no internal address")
	}
	if !validProto(r.Proto) {
		return "", fmt.Errorf("rdr: protocol %q must be tcp, udp or tcp/udp", r.Proto)
	}
	ints := make([]string, len(r.IntAddrs))
	for i, a := range r.IntAddrs {
		if !a.IsValid() || a.Is4() != r.ExtAddr.Addr().Is4() {
			return "", fmt.Errorf("rdr: internal address %v does not match %v", a, r.ExtAddr)
		}
		ints[i] = a.String()
	}
	ports := strconv.Itoa(r.ExtPort)
	if r.ExtPortEnd != 0 && r.ExtPortEnd != r.ExtPort {
		ports += "-" + strconv.Itoa(r.ExtPortEnd)
	}
	s := fmt.Sprintf("rdr %s %s port %s -> %s port %d %s", r.Interface, r.ExtAddr, ports, strings.Join(ints, ","), r.IntPort, r.Proto)
	if r.RoundRobin {
		s += " round-robin"
	}
	return s, nil
}

// Rule implements NATRule.
func (r *MapRule) Rule() (string, error) {
	if !ValidLinkName(r.Interface) {
		return "", fmt.Errorf("map: invalid interface %q", r.Interface)
	}
	if !r.Src.IsValid() || !r.Dst.IsValid() || r.Src.Addr().Is4() != r.Dst.Addr().Is4() {
		return "", fmt.Errorf("map: bad prefixes %v -> %v", r.Src, r.Dst)
	}
	s := fmt.Sprintf("map %s %s -> %s", r.Interface, r.Src, r.Dst)
	if r.Portmap == "" {
		return s, nil
	}
	if !validProto(r.PortmapProto) {
		return "", fmt.Errorf("map: portmap protocol %q must be tcp, udp or tcp/udp", r.PortmapProto)
	}
	if r.Portmap != "auto" {
		lo, hi, ok := strings.Cut(r.Portmap, ":")
		l, err1 := strconv.Atoi(lo)
		h, err2 := strconv.Atoi(hi)
		if !ok || err1 != nil || err2 != nil || !validPort(l) || !validPort(h) || h < l {
			return "", fmt.Errorf("map: portmap %q must be auto or LOW:HIGH", r.Portmap)
		}
	}
	return s + " portmap " + r.PortmapProto + " " + r.Portmap, nil
}

func validPort(p int) bool { return p >= 1 && p <= 65535 }

func validProto(p string) bool { return p == "tcp" || p == "udp" || p == "tcp/udp" }

// RenderNATRules renders rules as an ipnat.conf file, one rule a line.
func RenderNATRules(rules []NATRule) (string, error) {
	var b strings.Builder
	for i, r := range rules {
		if r == nil {
			return "", fmt.Errorf("rule %d is nil", i)
		}
		line, err := r.Rule()
		if err != nil {
			return "", fmt.Errorf("rule %d: %w", i, err)
		}
		b.WriteString(line + "\n")
	}
	return b.String(), nil
}

// Load adds rules to the active set (`ipnat -f -`). A rule that is already
// loaded gives ErrAlreadyExists.
func (n Ipnat) Load(ctx context.Context, rules []NATRule) error {
	return n.load(ctx, "ipnat load", rules, "-f", "-")
}

// Replace makes rules the whole active rule set (`ipnat -C -f -`: flush the
// rules, then load). Active sessions are kept.
func (n Ipnat) Replace(ctx context.Context, rules []NATRule) error {
	return n.load(ctx, "ipnat replace", rules, "-C", "-f", "-")
}

// Remove removes rules from the active set (`ipnat -r -f -`).
func (n Ipnat) Remove(ctx context.Context, rules []NATRule) error {
	return n.load(ctx, "ipnat remove", rules, "-r", "-f", "-")
}

func (n Ipnat) load(ctx context.Context, op string, rules []NATRule, args ...string) error {
	conf, err := RenderNATRules(rules)
	if err != nil {
		return &Error{Op: op, Kind: KindInvalid, Err: err}
	}
	_, err = run(ctx, n.Runner, op, "", Cmd{Path: ipnatPath, Args: args, Stdin: []byte(conf)})
	return err
}

// Flush removes every rule and every active session (`ipnat -C -F`).
func (n Ipnat) Flush(ctx context.Context) error {
	_, err := run(ctx, n.Runner, "ipnat flush", "", Cmd{Path: ipnatPath, Args: []string{"-C", "-F"}})
	return err
}

// List returns the active rules (`ipnat -l`).
func (n Ipnat) List(ctx context.Context) ([]NATRule, error) {
	const op = "ipnat list"
	res, err := run(ctx, n.Runner, op, "", Cmd{Path: ipnatPath, Args: []string{"-l"}})
	if err != nil {
		return nil, err
	}
	rules, err := ParseIpnatList(string(res.Stdout))
	if err != nil {
		return nil, parseError(op, "", err)
	}
	return rules, nil
}

// ParseIpnatList parses the rule section of `ipnat -l` (spec 10.3): the
// lines after "List of active MAP/Redirect filters:" up to "List of active
// sessions:". rdr and map rules in the normalised form become *RdrRule and
// *MapRule; any other rule line (bimap, map-block, options this package
// does not model) is kept as a RawRule.
func ParseIpnatList(out string) ([]NATRule, error) {
	var rules []NATRule
	section := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "List of active MAP/Redirect filters"):
			section = "rules"
			continue
		case strings.HasPrefix(line, "List of active sessions"):
			section = "sessions"
			continue
		case line == "" || section != "rules":
			continue
		}
		r, err := ParseNATRule(line)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	if section == "" && strings.TrimSpace(out) != "" {
		return nil, fmt.Errorf("no rule section in ipnat output")
	}
	return rules, nil
}

// ParseNATRule parses one rule line. Lines that are not rdr or map rules
// in the modelled form are returned as RawRule.
func ParseNATRule(line string) (NATRule, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil, fmt.Errorf("empty rule")
	}
	switch f[0] {
	case "rdr":
		if r, ok := parseRdr(f); ok {
			return r, nil
		}
	case "map":
		if r, ok := parseMap(f); ok {
			return r, nil
		}
	}
	return RawRule(strings.Join(f, " ")), nil
}

// parseRdr reads: rdr IF ADDR[/MASK] port P[-P2] -> A[,B...] port Q PROTO [round-robin]
func parseRdr(f []string) (*RdrRule, bool) {
	if len(f) < 9 || f[3] != "port" || f[5] != "->" || f[7] != "port" {
		return nil, false
	}
	r := &RdrRule{Interface: f[1]}
	var ok bool
	if r.ExtAddr, ok = parseNATPrefix(f[2]); !ok {
		return nil, false
	}
	lo, hi, isRange := strings.Cut(f[4], "-")
	var err error
	if r.ExtPort, err = strconv.Atoi(lo); err != nil {
		return nil, false
	}
	if isRange {
		if r.ExtPortEnd, err = strconv.Atoi(hi); err != nil {
			return nil, false
		}
	}
	for _, a := range strings.Split(f[6], ",") {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return nil, false
		}
		r.IntAddrs = append(r.IntAddrs, ip)
	}
	if r.IntPort, err = strconv.Atoi(f[8]); err != nil {
		return nil, false
	}
	rest := f[9:]
	if len(rest) == 0 || !validProto(rest[0]) {
		return nil, false
	}
	r.Proto, rest = rest[0], rest[1:]
	if len(rest) > 0 && rest[0] == "round-robin" {
		r.RoundRobin, rest = true, rest[1:]
	}
	if len(rest) > 0 {
		return nil, false // flags this package does not model
	}
	return r, true
}

// parseMap reads: map IF SRC/MASK -> DST/MASK [portmap PROTO auto|LOW:HIGH]
func parseMap(f []string) (*MapRule, bool) {
	if (len(f) != 5 && len(f) != 8) || f[3] != "->" {
		return nil, false
	}
	r := &MapRule{Interface: f[1]}
	var ok bool
	if r.Src, ok = parseNATPrefix(f[2]); !ok {
		return nil, false
	}
	if r.Dst, ok = parseNATPrefix(f[4]); !ok {
		return nil, false
	}
	if len(f) == 8 {
		if f[5] != "portmap" || !validProto(f[6]) {
			return nil, false
		}
		r.PortmapProto, r.Portmap = f[6], f[7]
	}
	return r, true
}

// parseNATPrefix reads ADDR, ADDR/BITS or ADDR/DOTTED-MASK.
func parseNATPrefix(s string) (netip.Prefix, bool) {
	addrS, maskS, hasMask := strings.Cut(s, "/")
	addr, err := netip.ParseAddr(addrS)
	if err != nil {
		return netip.Prefix{}, false
	}
	bits := addr.BitLen()
	if hasMask {
		if n, err := strconv.Atoi(maskS); err == nil {
			bits = n
		} else if m, err := netip.ParseAddr(maskS); err == nil && m.Is4() && addr.Is4() {
			bits = maskBits(m)
			if bits < 0 {
				return netip.Prefix{}, false
			}
		} else {
			return netip.Prefix{}, false
		}
	}
	p, err := addr.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, false
	}
	// Keep the address as written (ipnat prints host bits of a /32 etc.).
	return netip.PrefixFrom(addr, p.Bits()), true
}

// maskBits returns the prefix length of a contiguous IPv4 netmask, or -1.
func maskBits(m netip.Addr) int {
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n := 0
	for v&0x80000000 != 0 {
		n++
		v <<= 1
	}
	if v != 0 {
		return -1
	}
	return n
}
