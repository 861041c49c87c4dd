package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// The ipnat rule grammar (spec §10.2, ipnat_y.y) and the `ipnat -l`
// rendering of a rule (spec §10.4, printnat.c). IPv4 only. The spec gives
// no rendering for the from/to form; it prints as written, normalised
// (`any` for 0/0, masks as bits, comparators as symbols), as printnat.c's
// printhostmask and printportcmp do.
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

// tagLen is IPFTAG_LEN: a longer tag is cut (spec §10.2).
const tagLen = 16

// NATRule is one parsed rule.
type NATRule struct {
	Kind     string   // rdr, map, bimap, map-block
	Ifaces   []string // one or two
	Addr     uint32   // rdr: the external address; map: the source
	Mask     uint32
	HasPorts bool // rdr: `port P` on the left (and `port Q` on the right)
	PortLo   int  // rdr: external ports
	PortHi   int
	// rdr: one or two targets (DIP,DIP2); map: one destination.
	To     []uint32
	ToMask uint32
	// ToBits prints the rdr target mask, which is accepted only on 0.
	ToBits   int // -1: none written
	Range    [2]uint32
	IsRange  bool
	ToPort   int // rdr: Q
	FixedDst bool
	Proto    string // "", tcp, udp, tcp/udp, or a protocol name
	// map portmap/icmpidmap/proxy and map-block ports.
	Portmap    string // "PROTO LOW:HIGH" or "PROTO auto"
	Sequential bool
	ICMPIDMap  string
	MapProxy   string // "port P NAME/PROTO"
	BlockPorts string
	RoundRobin bool
	Frag       bool
	Age        [2]int
	HasAge     bool
	Sticky     bool
	MSSClamp   int
	Proxy      string
	Tag        string
	// The from/to form (IPN_FILTER): Filter replaces Addr/Mask and the
	// rdr's left-hand ports when printed.
	Filter *natFilter
}

// natFilter is `[!] from SRC [port CMP N] [!] to DST [port CMP N]`.
type natFilter struct {
	NotSrc, NotDst   bool
	Src, SrcMask     uint32
	Dst, DstMask     uint32
	SrcPort, DstPort natPortCmp
}

// natPortCmp is a port comparison: Op "" for none; "=", "!=", "<", ">",
// "<=", ">=" against Lo; "<>" or "><" between Lo and Hi; ":" for Lo..Hi.
type natPortCmp struct {
	Op     string
	Lo, Hi int
}

// String is printportcmp.c's rendering.
func (c natPortCmp) String() string {
	switch c.Op {
	case "":
		return ""
	case "<>", "><":
		return fmt.Sprintf(" port %d %s %d", c.Lo, c.Op, c.Hi)
	case ":":
		return fmt.Sprintf(" port %d:%d", c.Lo, c.Hi)
	}
	return fmt.Sprintf(" port %s %d", c.Op, c.Lo)
}

// hostMask prints a from/to address as printhostmask.c does: 0/0 is any.
func hostMask(a, m uint32) string {
	if a == 0 && m == 0 {
		return "any"
	}
	return ipString(a) + "/" + maskString(m)
}

func (f *natFilter) String() string {
	var b strings.Builder
	if f.NotSrc {
		b.WriteString(" !")
	}
	b.WriteString(" from " + hostMask(f.Src, f.SrcMask) + f.SrcPort.String())
	if f.NotDst {
		b.WriteString(" !")
	}
	b.WriteString(" to " + hostMask(f.Dst, f.DstMask) + f.DstPort.String())
	return b.String()
}

// TCPUDP reports whether the rule's protocol carries ports.
func (r *NATRule) TCPUDP() bool {
	return r.Proto == "tcp" || r.Proto == "udp" || r.Proto == "tcp/udp"
}

// String is the rule as `ipnat -l` prints it; it is also the rule's
// identity for duplicate adds and -r (the kernel compares the whole rule
// body, spec §10.5).
func (r *NATRule) String() string {
	var b strings.Builder
	b.WriteString(r.Kind + " " + r.Ifaces[0])
	if len(r.Ifaces) == 2 {
		b.WriteString("," + r.Ifaces[1] + " ") // printnat.c: two spaces
	}
	if r.Filter != nil {
		b.WriteString(r.Filter.String())
	} else {
		fmt.Fprintf(&b, " %s/%s", ipString(r.Addr), maskString(r.Mask))
	}
	if r.Kind == "rdr" {
		if r.HasPorts && r.TCPUDP() && r.Filter == nil {
			fmt.Fprintf(&b, " port %d", r.PortLo)
			if r.PortHi != r.PortLo {
				fmt.Fprintf(&b, "-%d", r.PortHi)
			}
		}
		to := make([]string, len(r.To))
		for i, t := range r.To {
			to[i] = ipString(t)
		}
		b.WriteString(" -> " + strings.Join(to, ","))
		if r.ToBits >= 0 {
			fmt.Fprintf(&b, "/%d", r.ToBits)
		}
		if r.HasPorts && r.TCPUDP() {
			if r.FixedDst {
				fmt.Fprintf(&b, " port = %d", r.ToPort)
			} else {
				fmt.Fprintf(&b, " port %d", r.ToPort)
			}
		}
		proto := r.Proto
		if proto == "" {
			proto = "ip"
		}
		b.WriteString(" " + proto)
		r.writeOpts(&b, true)
		return b.String()
	}
	if r.IsRange {
		fmt.Fprintf(&b, " -> range %s-%s", ipString(r.Range[0]), ipString(r.Range[1]))
	} else {
		fmt.Fprintf(&b, " -> %s/%s", ipString(r.To[0]), maskString(r.ToMask))
	}
	switch {
	case r.Portmap != "":
		b.WriteString(" portmap " + r.Portmap)
	case r.ICMPIDMap != "":
		b.WriteString(" icmpidmap icmp " + r.ICMPIDMap)
	case r.MapProxy != "":
		b.WriteString(" proxy " + r.MapProxy)
	case r.BlockPorts != "":
		b.WriteString(" ports " + r.BlockPorts)
	}
	r.writeOpts(&b, false)
	if r.Sequential {
		b.WriteString(" sequential")
	}
	if r.Proto != "" && r.Portmap == "" {
		b.WriteString(" " + r.Proto)
	}
	return b.String()
}

func (r *NATRule) writeOpts(b *strings.Builder, rdr bool) {
	if r.RoundRobin {
		b.WriteString(" round-robin")
	}
	if r.Frag {
		b.WriteString(" frag")
	}
	if r.HasAge {
		fmt.Fprintf(b, " age %d/%d", r.Age[0], r.Age[1])
	}
	if rdr && r.Sticky {
		b.WriteString(" sticky")
	}
	if r.MSSClamp != 0 {
		fmt.Fprintf(b, " mssclamp %d", r.MSSClamp)
	}
	if rdr && r.Proxy != "" {
		b.WriteString(" proxy " + r.Proxy)
	}
	if r.Tag != "" {
		b.WriteString(" tag " + r.Tag)
	}
}

func ipString(a uint32) string {
	return fmt.Sprintf("%d.%d.%d.%d", a>>24, a>>16&0xff, a>>8&0xff, a&0xff)
}

// maskString prints a contiguous mask as bits, any other dotted (§10.4).
func maskString(m uint32) string {
	if bits, ok := maskBitsOf(m); ok {
		return strconv.Itoa(bits)
	}
	return ipString(m)
}

func maskBitsOf(m uint32) (int, bool) {
	n := 0
	for m&0x80000000 != 0 {
		n++
		m <<= 1
	}
	return n, m == 0
}

// natToken is one lexical token with the line it is on.
type natToken struct {
	text   string
	line   int
	quoted bool
	eof    bool
}

// natLex splits a rule file into tokens: `#` comments, `\` line
// continuations, `;` `,` `=` and `->` as tokens of their own.
func natLex(input string) []natToken {
	var toks []natToken
	line := 1
	i := 0
	for i < len(input) {
		c := input[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == '\\' && i+1 < len(input) && input[i+1] == '\n':
			line++
			i += 2
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#':
			for i < len(input) && input[i] != '\n' {
				i++
			}
		case c == ';' || c == ',' || c == '=':
			toks = append(toks, natToken{text: string(c), line: line})
			i++
		case c == '-' && i+1 < len(input) && input[i+1] == '>':
			toks = append(toks, natToken{text: "->", line: line})
			i += 2
		case c == '"':
			j := i + 1
			for j < len(input) && input[j] != '"' && input[j] != '\n' {
				j++
			}
			toks = append(toks, natToken{text: input[i+1 : j], line: line, quoted: true})
			i = j + 1
		default:
			j := i
			for j < len(input) && !strings.ContainsRune(" \t\r\n#;,=\"", rune(input[j])) &&
				!(input[j] == '-' && j+1 < len(input) && input[j+1] == '>') {
				j++
			}
			toks = append(toks, natToken{text: input[i:j], line: line})
			i = j
		}
	}
	return toks
}

// natError is a parse error as ipnat prints it: `MSG error at "TOK", line N`.
type natError struct {
	msg  string
	tok  string
	line int
}

func (e *natError) Error() string {
	return fmt.Sprintf("%s error at \"%s\", line %d", e.msg, e.tok, e.line)
}

// natParser parses rules one at a time, so each can be applied before the
// next is read (spec §10.6).
type natParser struct {
	toks []natToken
	pos  int
	vars map[string]string
	// warn receives non-fatal messages (the sticky guard).
	warn func(string)
}

func newNATParser(input string, warn func(string)) *natParser {
	if warn == nil {
		warn = func(string) {}
	}
	return &natParser{toks: natLex(input), vars: map[string]string{}, warn: warn}
}

func (p *natParser) peek() natToken {
	for p.pos < len(p.toks) {
		t := p.toks[p.pos]
		if t.quoted || !strings.HasPrefix(t.text, "$") {
			return t
		}
		// $NAME expands to the tokens of its value, on the same line.
		v, ok := p.vars[t.text[1:]]
		if !ok {
			return t
		}
		exp := natLex(v)
		for i := range exp {
			exp[i].line = t.line
		}
		p.toks = append(p.toks[:p.pos], append(exp, p.toks[p.pos+1:]...)...)
	}
	// At end of input yacc's line is 1 (the lexer resets it, spec §10.5).
	last := ""
	if len(p.toks) > 0 {
		last = p.toks[len(p.toks)-1].text
	}
	return natToken{text: last, line: 1, eof: true}
}

func (p *natParser) next() natToken {
	t := p.peek()
	if !t.eof {
		p.pos++
	}
	return t
}

// is reports whether the next token is the keyword kw (case-insensitive).
func (p *natParser) is(kw string) bool {
	t := p.peek()
	return !t.eof && !t.quoted && strings.EqualFold(t.text, kw)
}

func (p *natParser) accept(kw string) bool {
	if p.is(kw) {
		p.pos++
		return true
	}
	return false
}

func syntaxErr(t natToken) error { return &natError{msg: "syntax error", tok: t.text, line: t.line} }

func (p *natParser) expect(kw string) error {
	if !p.accept(kw) {
		return syntaxErr(p.peek())
	}
	return nil
}

func isRuleKeyword(s string) bool {
	switch strings.ToLower(s) {
	case "rdr", "map", "bimap", "map-block":
		return true
	}
	return false
}

// Next parses the next rule; it returns nil, 0, nil at the end of input.
// line is the line the rule starts on.
func (p *natParser) Next() (*NATRule, int, error) {
	for {
		t := p.peek()
		if t.eof {
			return nil, 0, nil
		}
		if t.text == ";" && !t.quoted {
			p.pos++
			continue
		}
		// NAME = "value" ;
		if !t.quoted && !isRuleKeyword(t.text) && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "=" {
			p.pos += 2
			v := p.next()
			if v.eof || !v.quoted {
				return nil, 0, syntaxErr(v)
			}
			p.vars[t.text] = v.text
			continue
		}
		if !isRuleKeyword(t.text) || t.quoted {
			return nil, 0, syntaxErr(t)
		}
		p.pos++
		r := &NATRule{Kind: strings.ToLower(t.text), ToBits: -1}
		var err error
		if r.Kind == "rdr" {
			err = p.rdr(r)
		} else {
			err = p.mapRule(r)
		}
		if err != nil {
			return nil, 0, err
		}
		// The rule ends here: `;`, another rule, or the end of input.
		end := p.peek()
		switch {
		case end.eof:
		case end.text == ";" && !end.quoted:
			p.pos++
		case isRuleKeyword(end.text) && !end.quoted:
		case !end.quoted && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "=":
		default:
			return nil, 0, syntaxErr(end)
		}
		return r, t.line, nil
	}
}

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

// natLine is one parsed rule with the line it starts on.
type natLine struct {
	line int
	rule *NATRule
}

// parseNATRules parses a whole rule file (for tests and the forwarder). It
// returns the line of the first error (0 when none).
func parseNATRules(input string) ([]natLine, int) {
	p := newNATParser(input, nil)
	var out []natLine
	for {
		r, line, err := p.Next()
		if err != nil {
			if e, ok := err.(*natError); ok && e.line > 0 {
				return nil, e.line
			}
			return nil, -1
		}
		if r == nil {
			return out, 0
		}
		out = append(out, natLine{line: line, rule: r})
	}
}

// parseNATRule parses one normalised rule, as stored.
func parseNATRule(text string) (*NATRule, bool) {
	rules, bad := parseNATRules(text)
	if bad != 0 || len(rules) != 1 {
		return nil, false
	}
	return rules[0].rule, true
}

// knownProxies are the application proxies IPFilter has; another name is
// refused by the kernel with ENOENT (spec §10.5).
var knownProxies = map[string]bool{"ftp": true, "irc": true, "rcmd": true, "raudio": true,
	"h323": true, "ipsec": true, "netbios": true, "pptp": true, "rpcbt": true, "rpcbu": true}
