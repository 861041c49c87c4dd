package illumos

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/zonewright/zonewright/internal/illumos/names"
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
	// FixedPort sends every port of a range to IntPort (`port = Q`).
	FixedPort bool
	// RoundRobin rotates the rules with the same external address and
	// port: one rule per backend spreads new connections over them
	// (spec 10.3).
	RoundRobin bool
	// Sticky keeps a client on its backend; only with RoundRobin or two
	// IntAddrs (ipnat drops it otherwise, spec 10.2).
	Sticky bool
	// Tag labels the rule (at most 16 bytes); it is part of the rule's
	// identity, so a removal must repeat it.
	Tag string
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
	// Tag labels the rule, as for RdrRule.
	Tag string
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
	if !names.ValidLinkName(r.Interface) {
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
	if len(r.IntAddrs) == 0 || len(r.IntAddrs) > 2 {
		// IPFilter takes at most two targets a rule (spec 10.2).
		return "", fmt.Errorf("rdr: %d internal addresses, want 1 or 2", len(r.IntAddrs))
	}
	if r.Sticky && !r.RoundRobin && len(r.IntAddrs) != 2 {
		return "", fmt.Errorf("rdr: sticky needs round-robin or two internal addresses")
	}
	if r.Tag != "" && !validNATTag(r.Tag) {
		return "", fmt.Errorf("rdr: invalid tag %q", r.Tag)
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
	eq := ""
	if r.FixedPort {
		eq = "= "
	}
	s := fmt.Sprintf("rdr %s %s port %s -> %s port %s%d %s", r.Interface, r.ExtAddr, ports, strings.Join(ints, ","), eq, r.IntPort, r.Proto)
	// The order ipnat requires and prints (spec 10.2, 10.4).
	if r.RoundRobin {
		s += " round-robin"
	}
	if r.Sticky {
		s += " sticky"
	}
	if r.Tag != "" {
		s += " tag " + r.Tag
	}
	return s, nil
}

// Rule implements NATRule.
func (r *MapRule) Rule() (string, error) {
	if !names.ValidLinkName(r.Interface) {
		return "", fmt.Errorf("map: invalid interface %q", r.Interface)
	}
	if !r.Src.IsValid() || !r.Dst.IsValid() || r.Src.Addr().Is4() != r.Dst.Addr().Is4() {
		return "", fmt.Errorf("map: bad prefixes %v -> %v", r.Src, r.Dst)
	}
	if r.Tag != "" && !validNATTag(r.Tag) {
		return "", fmt.Errorf("map: invalid tag %q", r.Tag)
	}
	tag := ""
	if r.Tag != "" {
		tag = " tag " + r.Tag // after the portmap, as ipnat prints it (spec 10.4)
	}
	s := fmt.Sprintf("map %s %s -> %s", r.Interface, r.Src, r.Dst)
	if r.Portmap == "" {
		return s + tag, nil
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
	return s + " portmap " + r.PortmapProto + " " + r.Portmap + tag, nil
}

func validPort(p int) bool { return p >= 1 && p <= 65535 }

// validNATTag: a tag is one word of at most 16 bytes (IPFTAG_LEN; a longer
// one is cut, and the cut rule would not match the one asked for).
func validNATTag(t string) bool {
	if len(t) == 0 || len(t) > 16 {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

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

// ipnat reports a rule the kernel refused on stderr and still exits 0
// (spec 10.5): `N:ioctl(add/insert nat rule): File exists`.
var ipnatRefusedRe = regexp.MustCompile(`(?m)^([0-9]+):ioctl\((add/insert nat rule|delete nat rule)\): (.*)$`)

// RefusedRule is one rule the kernel did not take.
type RefusedRule struct {
	Line    int    // ipnat's line counter; not reliably the rule's (spec 10.5)
	Op      string // "add/insert nat rule" or "delete nat rule"
	Message string // strerror text: "File exists", "No such process", ...
}

// refusalKind maps the kernel's refusal to a Kind.
func refusalKind(msg string) Kind {
	switch msg {
	case "File exists": // EEXIST: the identical rule is loaded
		return KindAlreadyExists
	case "No such process": // ESRCH: -r of a rule that is not loaded
		return KindNotFound
	case "No such file or directory": // ENOENT: an unknown proxy
		return KindInvalid
	}
	if k := classifyMessage(msg); k != KindUnknown {
		return k
	}
	return KindUnknown
}

// refusals reads the refused rules from ipnat's stderr.
func refusals(stderr []byte) RefusedRules {
	var out RefusedRules
	for _, m := range ipnatRefusedRe.FindAllStringSubmatch(string(stderr), -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, RefusedRule{Line: n, Op: m[2], Message: strings.TrimSpace(m[3])})
	}
	return out
}

// RefusedRules is the Err of the *Error Load and Remove return when the
// kernel refused rules; errors.As gives the list.
type RefusedRules []RefusedRule

func (rr RefusedRules) Error() string {
	msgs := make([]string, len(rr))
	for i, r := range rr {
		msgs[i] = fmt.Sprintf("%d:ioctl(%s): %s", r.Line, r.Op, r.Message)
	}
	return strings.Join(msgs, "; ")
}

// refusalError turns refused rules into an *Error of the first one's Kind.
func refusalError(op string, refused RefusedRules) error {
	if len(refused) == 0 {
		return nil
	}
	return &Error{Op: op, Kind: refusalKind(refused[0].Message), Err: refused}
}

// Load adds rules to the active set (`ipnat -f -`). ipnat applies them one
// by one and exits 0 even when the kernel refuses one, so the refusals are
// read from stderr: a rule that is already loaded gives ErrAlreadyExists,
// and the other rules are loaded all the same.
func (n Ipnat) Load(ctx context.Context, rules []NATRule) error {
	return n.load(ctx, "ipnat load", rules, "-f", "-")
}

// Replace makes rules the whole active rule set (`ipnat -C -f -`: clear the
// rules, then load). Active sessions are kept. There is a window with no
// rules (spec 10.6); prefer Apply and Remove.
func (n Ipnat) Replace(ctx context.Context, rules []NATRule) error {
	return n.load(ctx, "ipnat replace", rules, "-C", "-f", "-")
}

// Remove removes rules from the active set (`ipnat -r -f -`). A rule that
// is not loaded gives ErrNotFound; the others are removed all the same.
// Sessions the rules made live on until they end (spec 10.6).
func (n Ipnat) Remove(ctx context.Context, rules []NATRule) error {
	return n.load(ctx, "ipnat remove", rules, "-r", "-f", "-")
}

func (n Ipnat) load(ctx context.Context, op string, rules []NATRule, args ...string) error {
	conf, err := RenderNATRules(rules)
	if err != nil {
		return &Error{Op: op, Kind: KindInvalid, Err: err}
	}
	// A parse error exits 1 after the rules before it were loaded.
	res, err := run(ctx, n.Runner, op, "", Cmd{Path: ipnatPath, Args: args, Stdin: []byte(conf)})
	if err != nil {
		return err
	}
	return refusalError(op, refusals(res.Stderr))
}

// Apply adds rules and reads the active set back, because ipnat's exit
// status does not say whether the kernel took a rule (spec 10.5). It
// returns the wanted rules that are not active afterwards. A rule that
// was already loaded counts as applied.
func (n Ipnat) Apply(ctx context.Context, rules []NATRule) (missing []NATRule, err error) {
	// Refused rules show up as missing below; anything else is a failure.
	if err := n.Load(ctx, rules); err != nil && !errors.As(err, new(RefusedRules)) {
		return nil, err
	}
	l, err := n.Listing(ctx)
	if err != nil {
		return nil, err
	}
	active := map[string]bool{}
	for _, r := range l.Rules {
		if key, err := natKey(r); err == nil {
			active[key] = true
		}
	}
	for _, r := range rules {
		if key, err := natKey(r); err != nil || !active[key] {
			missing = append(missing, r)
		}
	}
	return missing, nil
}

// natKey is a rule's identity as ipnat -l prints it: rendered, parsed
// back and rendered again, so both sides are in the same normal form.
func natKey(r NATRule) (string, error) {
	line, err := r.Rule()
	if err != nil {
		return "", err
	}
	back, err := ParseNATRule(line)
	if err != nil {
		return "", err
	}
	return back.Rule()
}

// Flush removes every rule and every active session (`ipnat -C -F`; ipnat
// flushes the sessions first).
func (n Ipnat) Flush(ctx context.Context) error {
	_, err := run(ctx, n.Runner, "ipnat flush", "", Cmd{Path: ipnatPath, Args: []string{"-C", "-F"}})
	return err
}

// FlushRules removes every rule (`ipnat -C`); sessions are kept.
func (n Ipnat) FlushRules(ctx context.Context) error {
	_, err := run(ctx, n.Runner, "ipnat flush rules", "", Cmd{Path: ipnatPath, Args: []string{"-C"}})
	return err
}

// FlushSessions removes every active session of the stack (`ipnat -F`)
// and returns how many there were; rules are kept.
func (n Ipnat) FlushSessions(ctx context.Context) (int, error) {
	const op = "ipnat flush sessions"
	res, err := run(ctx, n.Runner, op, "", Cmd{Path: ipnatPath, Args: []string{"-F"}})
	if err != nil {
		return 0, err
	}
	var count int
	if _, err := fmt.Sscanf(string(res.Stdout), "%d entries flushed from NAT table", &count); err != nil {
		return 0, parseError(op, "", fmt.Errorf("%q: %w", res.Stdout, err))
	}
	return count, nil
}

// List returns the active rules (`ipnat -l`).
func (n Ipnat) List(ctx context.Context) ([]NATRule, error) {
	l, err := n.Listing(ctx)
	return l.Rules, err
}

// NATListing is what `ipnat -l` shows: the active rules in the order they
// were loaded, and the active sessions.
type NATListing struct {
	Rules    []NATRule
	Sessions []NATSession
}

// NATSession is one active translation: Remote sent to Out (the rdr's
// external address), which goes to In (the backend). Ports are 0 for
// sessions that are not TCP or UDP.
type NATSession struct {
	Type   string // RDR, MAP, BIMAP, MAP-BLOCK
	In     netip.AddrPort
	Out    netip.AddrPort
	Remote netip.AddrPort
}

// Listing returns the active rules and sessions (`ipnat -l`).
func (n Ipnat) Listing(ctx context.Context) (NATListing, error) {
	const op = "ipnat list"
	res, err := run(ctx, n.Runner, op, "", Cmd{Path: ipnatPath, Args: []string{"-l"}})
	if err != nil {
		return NATListing{}, err
	}
	l, err := ParseIpnatListing(string(res.Stdout))
	if err != nil {
		return NATListing{}, parseError(op, "", err)
	}
	return l, nil
}

// ParseIpnatListing parses `ipnat -l` (spec 10.4).
func ParseIpnatListing(out string) (NATListing, error) {
	rules, err := ParseIpnatList(out)
	if err != nil {
		return NATListing{}, err
	}
	l := NATListing{Rules: rules}
	in := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "List of active sessions"):
			in = true
		case in && line != "":
			s, err := parseNATSession(line)
			if err != nil {
				return NATListing{}, err
			}
			l.Sessions = append(l.Sessions, s)
		}
	}
	return l, nil
}

// parseNATSession reads `TYPE IN [PORT] <- -> OUT [PORT] [REMOTE [PORT]]`
// (printactivenat.c).
func parseNATSession(line string) (NATSession, error) {
	f := strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(line))
	bad := fmt.Errorf("session line %q", line)
	if len(f) < 5 {
		return NATSession{}, bad
	}
	s := NATSession{Type: f[0]}
	ports := f[2] != "<-"
	want := 6
	if ports {
		want = 9
	}
	if len(f) != want {
		return NATSession{}, bad
	}
	addrs := []*netip.AddrPort{&s.In, &s.Out, &s.Remote}
	idx := []int{1, 4, 5}
	if ports {
		idx = []int{1, 5, 7}
		if f[3] != "<-" || f[4] != "->" {
			return NATSession{}, bad
		}
	} else if f[3] != "->" {
		return NATSession{}, bad
	}
	for k, i := range idx {
		a, err := netip.ParseAddr(f[i])
		if err != nil {
			return NATSession{}, bad
		}
		port := 0
		if ports {
			if port, err = strconv.Atoi(f[i+1]); err != nil || port < 0 || port > 65535 {
				return NATSession{}, bad
			}
		}
		*addrs[k] = netip.AddrPortFrom(a, uint16(port))
	}
	return s, nil
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

// parseRdr reads: rdr IF ADDR[/MASK] port P[-P2] -> A[,B] port [=] Q PROTO [round-robin] [sticky] [tag T]
func parseRdr(f []string) (*RdrRule, bool) {
	if len(f) < 9 || f[3] != "port" || f[5] != "->" || f[7] != "port" {
		return nil, false
	}
	fixed := false
	if f[8] == "=" {
		fixed, f = true, append(f[:8:8], f[9:]...)
		if len(f) < 9 {
			return nil, false
		}
	}
	r := &RdrRule{Interface: f[1], FixedPort: fixed}
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
	if len(rest) > 0 && rest[0] == "sticky" {
		r.Sticky, rest = true, rest[1:]
	}
	if len(rest) > 1 && rest[0] == "tag" {
		r.Tag, rest = rest[1], rest[2:]
	}
	if len(rest) > 0 {
		return nil, false // flags this package does not model
	}
	return r, true
}

// parseMap reads: map IF SRC/MASK -> DST/MASK [portmap PROTO auto|LOW:HIGH] [tag T]
func parseMap(f []string) (*MapRule, bool) {
	r := &MapRule{}
	if n := len(f); n >= 7 && f[n-2] == "tag" {
		r.Tag, f = f[n-1], f[:n-2]
	}
	if (len(f) != 5 && len(f) != 8) || f[3] != "->" {
		return nil, false
	}
	r.Interface = f[1]
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
