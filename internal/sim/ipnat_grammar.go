package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// The ipnat rule grammar (spec §10.2, ipnat_y.y). IPv4 only.
//
//	rdr IF[,IF2] ADDR[/M] [port P[-P2|:P2]] -> DIP[,DIP2] port [=] Q [PROTO] RDROPTS
//	rdr IF[,IF2] [!] from SRC [port CMP N] [!] to DST [port CMP N] -> DIP[,DIP2] port [=] Q [PROTO] RDROPTS
//	rdr IF[,IF2] ADDR[/M] -> DIP[,DIP2] [PROTO] RDROPTS
//	map|bimap IF[,IF2] SRC[/M] -> DST[/M] | range A-B [portmap P LOW:HIGH|auto [sequential] | icmpidmap icmp N:M | proxy port P NAME/PROTO] MAPOPTS
//	map|bimap IF[,IF2] [!] from SRC [port CMP N] [!] to DST [port CMP N] -> (as above)
//	map-block IF SRC/M -> DST/M [ports N|ports auto] MAPOPTS
//	RDROPTS := [round-robin] [frag] [age N[/M]] [sticky] [mssclamp N] [proxy NAME] [tag NAME]
//	MAPOPTS := [round-robin] [frag] [age N[/M]] [mssclamp N] [tag NAME] [PROTO]
//
// Rules end at `;`, at the next rule keyword or at the end of input; a
// rule may span lines. `NAME = "value";` defines $NAME.

func (p *natParser) ifaces(r *NATRule) error {
	t := p.next()
	if t.eof || t.quoted || !validNATIface(t.text) {
		return syntaxErr(t)
	}
	r.Ifaces = []string{t.text}
	if p.accept(",") {
		t = p.next()
		if t.eof || t.quoted || !validNATIface(t.text) {
			return syntaxErr(t)
		}
		r.Ifaces = append(r.Ifaces, t.text)
	}
	return nil
}

// validNATIface: IPFilter takes any interface name, bound when it appears
// (spec §10.6); a name is letters, digits, `_` and `.`, ending in a digit
// or not.
func validNATIface(s string) bool {
	if s == "" || len(s) > 32 || isRuleKeyword(s) {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// parseIPv4 reads a dotted quad (`0` alone is 0.0.0.0, as in inet_aton).
func parseIPv4(s string) (uint32, bool) {
	if s == "0" {
		return 0, true
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return 0, false
	}
	var v uint32
	for _, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 || n > 255 || part == "" || part[0] == '+' {
			return 0, false
		}
		v = v<<8 | uint32(n)
	}
	return v, true
}

func looksNumeric(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.") == ""
}

// addrErr is the error for a bad address word.
func addrErr(t natToken, s string) error {
	if looksNumeric(s) {
		return &natError{msg: "Invalid octet string for IP address", tok: s, line: t.line}
	}
	return &natError{msg: "Unknown hostname", tok: s, line: t.line}
}

// parseMask reads a mask: bits, dotted or 0xHEX.
func parseMask(s string) (uint32, bool) {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		n, err := strconv.ParseUint(s[2:], 16, 32)
		return uint32(n), err == nil
	}
	if strings.Contains(s, ".") {
		return parseIPv4(s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 32 || s[0] == '+' {
		return 0, false
	}
	if n == 0 {
		return 0, true
	}
	return ^uint32(0) << (32 - n), true
}

// address reads `any`, A, A/BITS, A/DOTTED, A/0xHEX or `A mask|netmask M`.
// defBits is the mask when none is written.
func (p *natParser) address() (addr, mask uint32, err error) {
	t := p.next()
	if t.eof || t.quoted {
		return 0, 0, syntaxErr(t)
	}
	if strings.EqualFold(t.text, "any") {
		return 0, 0, nil
	}
	a, m, hasMask := strings.Cut(t.text, "/")
	v, ok := parseIPv4(a)
	if !ok {
		return 0, 0, addrErr(t, a)
	}
	mask = ^uint32(0)
	if hasMask {
		if mask, ok = parseMask(m); !ok {
			return 0, 0, &natError{msg: "invalid mask", tok: m, line: t.line}
		}
	} else if p.is("mask") || p.is("netmask") {
		p.pos++
		mt := p.next()
		if mask, ok = parseMask(mt.text); !ok || mt.eof || !strings.ContainsAny(mt.text, ".xX") {
			return 0, 0, &natError{msg: "invalid mask", tok: mt.text, line: mt.line}
		}
	}
	return v, mask, nil
}

// natServices stands in for /etc/services.
var natServices = map[string]int{"ftp": 21, "ssh": 22, "telnet": 23, "smtp": 25, "domain": 53,
	"http": 80, "www": 80, "pop3": 110, "ntp": 123, "https": 443}

// natProtocols stands in for /etc/protocols.
var natProtocols = map[string]int{"ip": 0, "icmp": 1, "igmp": 2, "ggp": 3, "ipip": 4, "tcp": 6,
	"egp": 8, "pup": 12, "udp": 17, "ipv6": 41, "rsvp": 46, "gre": 47, "esp": 50, "ah": 51,
	"icmpv6": 58, "ospf": 89, "pim": 103, "sctp": 132}

func (p *natParser) portNum(t natToken, s string) (int, error) {
	n, ok := natServices[strings.ToLower(s)]
	if !ok {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > 65535 || s == "" || s[0] == '+' {
			return 0, &natError{msg: "invalid port number", tok: s, line: t.line}
		}
		n = v
	}
	return n, nil
}

// protocol reads an optional PROTO; "" when the next token is none.
func (p *natParser) protocol() string {
	t := p.peek()
	if t.eof || t.quoted {
		return ""
	}
	s := strings.ToLower(t.text)
	switch s {
	case "tcp", "udp", "tcp/udp":
	case "tcpudp":
		s = "tcp/udp"
	default:
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && n <= 255 && s[0] != '+' {
			s = protoName(n)
		} else if _, ok := natProtocols[s]; !ok {
			return ""
		}
	}
	p.pos++
	if s == "ip" {
		s = "" // protocol 0: any, which is what -l prints as "ip"
	}
	return s
}

func protoName(n int) string {
	for name, v := range natProtocols {
		if v == n && name != "ip" {
			return name
		}
	}
	return strconv.Itoa(n)
}

func (p *natParser) rdr(r *NATRule) error {
	if err := p.ifaces(r); err != nil {
		return err
	}
	var err error
	if p.is("from") || p.is("!") {
		if err := p.filter(r); err != nil {
			return err
		}
		// The right-hand `port [=] Q` is required in this form; a
		// `to ... port = N` is what a forwarder listens on.
		f := r.Filter
		r.Addr, r.Mask, r.HasPorts = f.Dst, f.DstMask, true
		if f.DstPort.Op == "=" && !f.NotDst {
			r.PortLo, r.PortHi = f.DstPort.Lo, f.DstPort.Lo
		}
	} else if r.Addr, r.Mask, err = p.address(); err != nil {
		return err
	} else if p.accept("port") {
		r.HasPorts = true
		t := p.next()
		lo, hi, isRange := strings.Cut(t.text, "-")
		if !isRange {
			lo, hi, isRange = strings.Cut(t.text, ":")
		}
		if t.eof {
			return syntaxErr(t)
		}
		if r.PortLo, err = p.portNum(t, lo); err != nil {
			return err
		}
		r.PortHi = r.PortLo
		if isRange {
			if r.PortHi, err = p.portNum(t, hi); err != nil {
				return err
			}
		}
	}
	if err := p.expect("->"); err != nil {
		return err
	}
	for {
		t := p.next()
		if t.eof || t.quoted {
			return syntaxErr(t)
		}
		a, bits, hasBits := strings.Cut(t.text, "/")
		v, ok := parseIPv4(a)
		if !ok {
			return addrErr(t, a)
		}
		if hasBits {
			// Only 0/0 and 0/32 (spec §10.2).
			if v != 0 || (bits != "0" && bits != "32") || len(r.To) > 0 {
				return &natError{msg: "Invalid mask for dip", tok: bits, line: t.line}
			}
			r.ToBits, _ = strconv.Atoi(bits)
		}
		r.To = append(r.To, v)
		if len(r.To) == 2 || !p.accept(",") {
			break
		}
	}
	if r.HasPorts {
		// Ports on the left need `port [=] Q` on the right.
		if err := p.expect("port"); err != nil {
			return err
		}
		r.FixedDst = p.accept("=")
		t := p.next()
		if t.eof {
			return syntaxErr(t)
		}
		if r.ToPort, err = p.portNum(t, t.text); err != nil {
			return err
		}
	}
	r.Proto = p.protocol()
	if r.Proto == "" && r.HasPorts {
		r.Proto = "tcp" // TCP default (spec §10.2)
	}
	if p.accept("round-robin") {
		r.RoundRobin = true
	}
	r.Frag = p.accept("frag")
	if err := p.age(r); err != nil {
		return err
	}
	if p.accept("sticky") {
		if r.RoundRobin || len(r.To) == 2 {
			r.Sticky = true
		} else {
			// Printed, dropped, and the rule still loads (spec §10.2).
			p.warn("'sticky' for use with round-robin/IP splitting only")
		}
	}
	if err := p.mssclamp(r); err != nil {
		return err
	}
	if p.accept("proxy") {
		t := p.next()
		if t.eof || t.quoted {
			return syntaxErr(t)
		}
		r.Proxy = t.text
	}
	return p.tag(r)
}

// filter reads `[!] from SRC [port CMP N] [!] to DST [port CMP N]`.
func (p *natParser) filter(r *NATRule) error {
	f := &natFilter{}
	f.NotSrc = p.accept("!")
	if err := p.expect("from"); err != nil {
		return err
	}
	var err error
	if f.Src, f.SrcMask, err = p.address(); err != nil {
		return err
	}
	if f.SrcPort, err = p.portCmp(); err != nil {
		return err
	}
	f.NotDst = p.accept("!")
	if err := p.expect("to"); err != nil {
		return err
	}
	if f.Dst, f.DstMask, err = p.address(); err != nil {
		return err
	}
	if f.DstPort, err = p.portCmp(); err != nil {
		return err
	}
	r.Filter = f
	return nil
}

// portCmp reads an optional `port CMP N`, `port N <> M`, `port N >< M`
// or `port N:M` (spec §10.2).
func (p *natParser) portCmp() (natPortCmp, error) {
	if !p.accept("port") {
		return natPortCmp{}, nil
	}
	ops := map[string]string{"=": "=", "eq": "=", "!=": "!=", "ne": "!=", "<": "<", "lt": "<",
		">": ">", "gt": ">", "<=": "<=", "le": "<=", ">=": ">=", "ge": ">="}
	t := p.next()
	op := strings.ToLower(t.text)
	// The lexer splits `=` off: `!=`, `<=` and `>=` come as two tokens.
	if (op == "!" || op == "<" || op == ">") && p.is("=") {
		p.pos++
		op += "="
	}
	if norm, ok := ops[op]; ok && !t.quoted {
		n := p.next()
		if n.eof {
			return natPortCmp{}, syntaxErr(n)
		}
		v, err := p.portNum(n, n.text)
		return natPortCmp{Op: norm, Lo: v}, err
	}
	if t.eof || t.quoted {
		return natPortCmp{}, syntaxErr(t)
	}
	if lo, hi, ok := strings.Cut(t.text, ":"); ok {
		a, err := p.portNum(t, lo)
		if err != nil {
			return natPortCmp{}, err
		}
		b, err := p.portNum(t, hi)
		return natPortCmp{Op: ":", Lo: a, Hi: b}, err
	}
	a, err := p.portNum(t, t.text)
	if err != nil {
		return natPortCmp{}, err
	}
	rt := p.next()
	if rt.text != "<>" && rt.text != "><" || rt.quoted {
		return natPortCmp{}, syntaxErr(rt)
	}
	n := p.next()
	if n.eof {
		return natPortCmp{}, syntaxErr(n)
	}
	b, err := p.portNum(n, n.text)
	return natPortCmp{Op: rt.text, Lo: a, Hi: b}, err
}

func (p *natParser) age(r *NATRule) error {
	if !p.accept("age") {
		return nil
	}
	t := p.next()
	a, b, two := strings.Cut(t.text, "/")
	x, err1 := strconv.Atoi(a)
	y := x
	var err2 error
	if two {
		y, err2 = strconv.Atoi(b)
	}
	if t.eof || err1 != nil || err2 != nil || x < 0 || y < 0 || a[0] == '+' || (two && b[0] == '+') {
		return syntaxErr(t)
	}
	r.HasAge, r.Age = true, [2]int{x, y}
	return nil
}

func (p *natParser) mssclamp(r *NATRule) error {
	if !p.accept("mssclamp") {
		return nil
	}
	t := p.next()
	n, err := strconv.Atoi(t.text)
	if t.eof || err != nil || n <= 0 || t.text[0] == '+' {
		return syntaxErr(t)
	}
	r.MSSClamp = n
	return nil
}

func (p *natParser) tag(r *NATRule) error {
	if !p.accept("tag") {
		return nil
	}
	t := p.next()
	if t.eof || t.text == "" || (!t.quoted && (t.text == ";" || t.text == ",")) || strings.ContainsAny(t.text, " \t") {
		return syntaxErr(t)
	}
	r.Tag = t.text
	if len(r.Tag) > tagLen {
		r.Tag = r.Tag[:tagLen]
	}
	return nil
}

func (p *natParser) mapRule(r *NATRule) error {
	if err := p.ifaces(r); err != nil {
		return err
	}
	if r.Kind == "map-block" && len(r.Ifaces) > 1 {
		return syntaxErr(natToken{text: ",", line: p.peek().line})
	}
	var err error
	if r.Kind != "map-block" && (p.is("from") || p.is("!")) {
		if err := p.filter(r); err != nil {
			return err
		}
		r.Addr, r.Mask = r.Filter.Src, r.Filter.SrcMask
	} else if r.Addr, r.Mask, err = p.address(); err != nil {
		return err
	}
	if err := p.expect("->"); err != nil {
		return err
	}
	if r.Kind != "map-block" && p.accept("range") {
		t := p.next()
		a, b, ok := strings.Cut(t.text, "-")
		x, ok1 := parseIPv4(a)
		y, ok2 := parseIPv4(b)
		if t.eof || !ok {
			return syntaxErr(t)
		}
		if !ok1 || !ok2 {
			return addrErr(t, t.text)
		}
		r.IsRange, r.Range = true, [2]uint32{x, y}
	} else {
		to, mask, err := p.address()
		if err != nil {
			return err
		}
		r.To, r.ToMask = []uint32{to}, mask
	}
	switch {
	case r.Kind == "map-block":
		if p.accept("ports") {
			t := p.next()
			if n, err := strconv.Atoi(t.text); !strings.EqualFold(t.text, "auto") && (err != nil || n <= 0 || t.text[0] == '+') {
				return syntaxErr(t)
			}
			r.BlockPorts = strings.ToLower(t.text)
		}
	case p.accept("portmap"):
		proto := p.protocol()
		if proto != "tcp" && proto != "udp" && proto != "tcp/udp" {
			return syntaxErr(p.peek())
		}
		t := p.next()
		if strings.EqualFold(t.text, "auto") {
			r.Portmap = proto + " auto"
		} else {
			lo, hi, ok := strings.Cut(t.text, ":")
			if t.eof || !ok {
				return syntaxErr(t)
			}
			a, err := p.portNum(t, lo)
			if err != nil {
				return err
			}
			b, err := p.portNum(t, hi)
			if err != nil {
				return err
			}
			r.Portmap = fmt.Sprintf("%s %d:%d", proto, a, b)
		}
		r.Proto = proto
		r.Sequential = p.accept("sequential")
	case p.accept("icmpidmap"):
		if err := p.expect("icmp"); err != nil {
			return err
		}
		t := p.next()
		lo, hi, ok := strings.Cut(t.text, ":")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if t.eof || !ok || err1 != nil || err2 != nil || a < 0 || b < a || b > 65535 {
			return syntaxErr(t)
		}
		r.ICMPIDMap = fmt.Sprintf("%d:%d", a, b)
	case p.accept("proxy"):
		if err := p.expect("port"); err != nil {
			return err
		}
		t := p.next()
		port, err := p.portNum(t, t.text)
		if err != nil {
			return err
		}
		nt := p.next()
		name, proto, ok := strings.Cut(nt.text, "/")
		if nt.eof || !ok || name == "" || proto == "" {
			return syntaxErr(nt)
		}
		r.MapProxy = fmt.Sprintf("port %d %s/%s", port, name, strings.ToLower(proto))
		r.Proxy = name
	}
	r.RoundRobin = p.accept("round-robin")
	r.Frag = p.accept("frag")
	if err := p.age(r); err != nil {
		return err
	}
	if err := p.mssclamp(r); err != nil {
		return err
	}
	if err := p.tag(r); err != nil {
		return err
	}
	if t := p.peek(); !t.eof {
		if proto := p.protocol(); proto != "" {
			if r.Proto != "" {
				return &natError{msg: "protocol set twice", tok: t.text, line: t.line}
			}
			r.Proto = proto
		}
	}
	return nil
}

// knownProxies are the application proxies IPFilter has; another name is
// refused by the kernel with ENOENT (spec §10.5).
var knownProxies = map[string]bool{"ftp": true, "irc": true, "rcmd": true, "raudio": true,
	"h323": true, "ipsec": true, "netbios": true, "pptp": true, "rpcbt": true, "rpcbu": true}
