package sim

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The ipnat rule grammar the simulator accepts (ipnat.5, the forms a
// provisioner writes) and its normalised rendering:
//
//	rdr IF ADDR[/MASK] port P[-P2] -> ADDR[,ADDR2] port Q [tcp|udp|tcp/udp] [round-robin] [frag] [sticky] [age N[/M]] [mssclamp N]
//	map IF ADDR/MASK -> ADDR/MASK [portmap tcp|udp|tcp/udp LOW:HIGH | portmap tcp/udp auto] [proxy port P NAME/PROTO]
//	bimap IF ADDR/MASK -> ADDR/MASK
//	map-block IF ADDR/MASK -> ADDR/MASK [ports N|auto]
//
// MASK may be a prefix length or a dotted netmask; it is printed as /bits.

// NATRule is one parsed rule.
type NATRule struct {
	Kind     string // rdr, map, bimap, map-block
	Iface    string
	From     netip.Prefix
	FromPort [2]int // rdr: external port range
	To       []netip.Prefix
	ToPort   int
	Proto    string
	Portmap  string // map: "tcp/udp 1025:65000" or "tcp/udp auto"
	Ports    string // map-block
	Options  []string
}

// String renders the normalised rule.
func (r *NATRule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", r.Kind, r.Iface, r.From)
	if r.Kind == "rdr" {
		fmt.Fprintf(&b, " port %d", r.FromPort[0])
		if r.FromPort[1] != r.FromPort[0] {
			fmt.Fprintf(&b, "-%d", r.FromPort[1])
		}
		to := make([]string, len(r.To))
		for i, t := range r.To {
			to[i] = t.Addr().String()
		}
		fmt.Fprintf(&b, " -> %s port %d %s", strings.Join(to, ","), r.ToPort, r.Proto)
	} else {
		fmt.Fprintf(&b, " -> %s", r.To[0])
		if r.Portmap != "" {
			fmt.Fprintf(&b, " portmap %s", r.Portmap)
		}
		if r.Ports != "" {
			fmt.Fprintf(&b, " ports %s", r.Ports)
		}
	}
	for _, o := range r.Options {
		b.WriteString(" " + o)
	}
	return b.String()
}

// natLine is one rule line of input with its line number.
type natLine struct {
	line int
	rule *NATRule
}

// parseNATRules parses a rule file. It returns the line of the first
// syntax error (0 when none).
func parseNATRules(input string) ([]natLine, int) {
	var out []natLine
	for i, raw := range strings.Split(input, "\n") {
		if j := strings.IndexByte(raw, '#'); j >= 0 {
			raw = raw[:j]
		}
		toks := natTokens(raw)
		if len(toks) == 0 {
			continue
		}
		r, ok := parseNATRule(toks)
		if !ok {
			return nil, i + 1
		}
		out = append(out, natLine{line: i + 1, rule: r})
	}
	return out, 0
}

// natTokens splits on white space and makes "->" a token of its own.
func natTokens(s string) []string {
	s = strings.ReplaceAll(s, "->", " -> ")
	return strings.Fields(s)
}

// natAddr parses ADDR[/MASK] with a dotted or prefix mask; "0" is 0.0.0.0.
func natAddr(s string, needMask bool) (netip.Prefix, bool) {
	addrPart, mask, hasMask := strings.Cut(s, "/")
	if addrPart == "0" {
		addrPart = "0.0.0.0"
	}
	a, err := netip.ParseAddr(addrPart)
	if err != nil {
		return netip.Prefix{}, false
	}
	if !hasMask {
		if needMask {
			return netip.Prefix{}, false
		}
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	if bits, err := strconv.Atoi(mask); err == nil {
		if bits < 0 || bits > a.BitLen() || strings.HasPrefix(mask, "+") {
			return netip.Prefix{}, false
		}
		return netip.PrefixFrom(a, bits), true
	}
	m, err := netip.ParseAddr(mask)
	if err != nil || !m.Is4() || !a.Is4() {
		return netip.Prefix{}, false
	}
	v := m.As4()
	n := uint32(v[0])<<24 | uint32(v[1])<<16 | uint32(v[2])<<8 | uint32(v[3])
	bits := 0
	for n&0x80000000 != 0 {
		bits++
		n <<= 1
	}
	if n != 0 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, bits), true
}

var natServices = map[string]int{"ftp": 21, "ssh": 22, "telnet": 23, "smtp": 25, "domain": 53, "dns": 53, "http": 80, "https": 443}

func natPort(s string) (int, bool) {
	if p, ok := natServices[s]; ok {
		return p, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || s[0] == '+' {
		return 0, false
	}
	return n, true
}

func validNATIface(s string) bool {
	return s != "" && !strings.ContainsAny(s, "/,") && (validLinkName(s) || s == "lo0")
}

func parseNATRule(t []string) (*NATRule, bool) {
	if len(t) < 5 || !validNATIface(t[1]) {
		return nil, false
	}
	r := &NATRule{Kind: t[0], Iface: t[1]}
	switch r.Kind {
	case "rdr":
		return parseRdr(r, t[2:])
	case "map", "bimap", "map-block":
		return parseMap(r, t[2:])
	}
	return nil, false
}

func parseRdr(r *NATRule, t []string) (*NATRule, bool) {
	// ADDR port P[-P2] -> ADDR[,ADDR2] port Q [proto] [options]
	if len(t) < 7 || t[1] != "port" || t[3] != "->" || t[5] != "port" {
		return nil, false
	}
	from, ok := natAddr(t[0], false)
	if !ok {
		return nil, false
	}
	r.From = from
	lo, hi, isRange := strings.Cut(t[2], "-")
	p1, ok1 := natPort(lo)
	p2 := p1
	ok2 := true
	if isRange {
		p2, ok2 = natPort(hi)
	}
	if !ok1 || !ok2 || p2 < p1 {
		return nil, false
	}
	r.FromPort = [2]int{p1, p2}
	for _, a := range strings.Split(t[4], ",") {
		p, ok := natAddr(a, false)
		if !ok || len(r.To) == 2 {
			return nil, false
		}
		r.To = append(r.To, netip.PrefixFrom(p.Addr(), p.Addr().BitLen()))
	}
	q, ok := natPort(t[6])
	if !ok {
		return nil, false
	}
	r.ToPort = q
	r.Proto = "tcp"
	rest := t[7:]
	if len(rest) > 0 && (rest[0] == "tcp" || rest[0] == "udp" || rest[0] == "tcp/udp") {
		r.Proto = rest[0]
		rest = rest[1:]
	}
	return natOptions(r, rest, map[string]int{"round-robin": 0, "frag": 0, "sticky": 0, "age": 1, "mssclamp": 1})
}

func natOptions(r *NATRule, rest []string, allowed map[string]int) (*NATRule, bool) {
	for i := 0; i < len(rest); i++ {
		nargs, ok := allowed[rest[i]]
		if !ok || i+nargs > len(rest)-1 {
			return nil, false
		}
		opt := rest[i]
		for k := 0; k < nargs; k++ {
			i++
			if !validNATOptArg(opt, rest[i]) {
				return nil, false
			}
			opt += " " + rest[i]
		}
		r.Options = append(r.Options, opt)
	}
	return r, true
}

func validNATOptArg(opt, arg string) bool {
	switch opt {
	case "age":
		a, b, two := strings.Cut(arg, "/")
		if _, err := strconv.Atoi(a); err != nil || strings.HasPrefix(a, "+") || strings.HasPrefix(a, "-") {
			return false
		}
		if two {
			if _, err := strconv.Atoi(b); err != nil || strings.HasPrefix(b, "+") || strings.HasPrefix(b, "-") {
				return false
			}
		}
		return true
	case "mssclamp":
		n, err := strconv.Atoi(arg)
		return err == nil && n > 0 && !strings.HasPrefix(arg, "+")
	}
	return false
}

func parseMap(r *NATRule, t []string) (*NATRule, bool) {
	// ADDR/MASK -> ADDR/MASK [...]
	if len(t) < 3 || t[1] != "->" {
		return nil, false
	}
	from, ok := natAddr(t[0], true)
	if !ok {
		return nil, false
	}
	to, ok := natAddr(t[2], true)
	if !ok {
		return nil, false
	}
	r.From, r.To = from, []netip.Prefix{to}
	rest := t[3:]
	switch r.Kind {
	case "map":
		if len(rest) >= 3 && rest[0] == "portmap" {
			proto := rest[1]
			if proto != "tcp" && proto != "udp" && proto != "tcp/udp" {
				return nil, false
			}
			if rest[2] == "auto" {
				r.Portmap = proto + " auto"
			} else {
				lo, hi, ok := strings.Cut(rest[2], ":")
				a, ok1 := natPort(lo)
				b, ok2 := natPort(hi)
				if !ok || !ok1 || !ok2 || b < a {
					return nil, false
				}
				r.Portmap = fmt.Sprintf("%s %d:%d", proto, a, b)
			}
			rest = rest[3:]
		}
		if len(rest) == 4 && rest[0] == "proxy" && rest[1] == "port" {
			p, ok := natPort(rest[2])
			if !ok || !strings.Contains(rest[3], "/") {
				return nil, false
			}
			r.Options = append(r.Options, fmt.Sprintf("proxy port %d %s", p, rest[3]))
			rest = nil
		}
	case "map-block":
		if len(rest) >= 2 && rest[0] == "ports" {
			if rest[1] != "auto" {
				if n, err := strconv.Atoi(rest[1]); err != nil || n <= 0 || strings.HasPrefix(rest[1], "+") {
					return nil, false
				}
			}
			r.Ports = rest[1]
			rest = rest[2:]
		}
	}
	return r, len(rest) == 0
}
