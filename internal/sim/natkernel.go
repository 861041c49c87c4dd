package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Kernel NAT (isolation mode): the global zone's ipnat rules are realised
// in the node's network namespace as one nftables table, `ip ipnat`, the
// way IPFilter realises them in an illumos kernel: an rdr is a DNAT of
// packets arriving on its interface, a map an SNAT of packets leaving by
// its interface, and a session is a connection-tracking entry. So, as on
// a host (spec §10.6), a session outlives the removal of its rule until
// `ipnat -F` flushes it; a backend sees the client's own address; and a
// pod reaching a ClusterIP whose chosen backend is on its own node gets
// an answer only if a map rule brings the reply back through the global
// zone (the hairpin rule, spec §10.9).
//
// Every change of the rule set replaces the whole table in one nft
// transaction; run/nat.kernel records the generation applied and the
// namespace it was applied in, so any later ipnat puts the table back
// after stop-all or a new namespace. Nothing runs in the background.
//
// A rule chain's choice (spec §10.3) is realised as its steady state: a
// chain of round-robin rules becomes one DNAT cycling through the rules in
// turn, each time a rule's next target (roundRobin); a chain whose head is
// not round-robin, or that reaches one that is not, always uses that rule,
// alternating between its two targets. Not realised, and logged to run/net.log: bimap, map-block,
// proxies, icmpidmap, sticky affinity and hit counts.
const natNFTable = "ipnat"

// natKernelPorts bounds the ports of one rdr range mapped offset-wise
// (each port is a rule of its own).
const natKernelPorts = 256

// kernelNAT says whether h's global NAT is realised in the kernel.
func (h *host) kernelNAT() bool { return h.nodeNetns() != "" }

// nftRuleset is the nft script replacing the node's table with t's rules,
// and the rules it cannot realise.
func nftRuleset(t *NATTable) (string, []string) {
	type chain struct {
		match string
		rules [][]string // the round-robin rules' targets, in chain order
		held  []string   // the targets of a rule that never moves, once it reached the head
	}
	var rdr []*chain
	byMatch := map[string]*chain{}
	var maps, unrealised []string
	for _, e := range t.listed() {
		r, ok := parseNATRule(e.Text)
		if !ok {
			unrealised = append(unrealised, e.Text)
			continue
		}
		switch {
		case r.Kind == "rdr" && len(r.To) > 0:
			rules, ok := nftRdr(r)
			if !ok {
				unrealised = append(unrealised, e.Text)
				continue
			}
			if r.Sticky || r.Proxy != "" {
				unrealised = append(unrealised, e.Text+" (realised without its sticky or proxy)")
			}
			for _, nr := range rules {
				c := byMatch[nr.match]
				if c == nil {
					c = &chain{match: nr.match}
					byMatch[nr.match] = c
					rdr = append(rdr, c)
				}
				switch {
				case c.held != nil:
				case !r.RoundRobin:
					// The chain stops here for good: this rule stays first.
					c.held = nr.targets
				default:
					c.rules = append(c.rules, nr.targets)
				}
			}
		case r.Kind == "map" && r.Proxy == "" && r.MapProxy == "" && r.ICMPIDMap == "":
			rules, ok := nftMap(r)
			if !ok {
				unrealised = append(unrealised, e.Text)
				continue
			}
			maps = append(maps, rules...)
		default:
			unrealised = append(unrealised, e.Text)
		}
	}
	var b strings.Builder
	// Declaring the table first lets the delete succeed when it is absent;
	// nft applies the whole script as one transaction.
	fmt.Fprintf(&b, "table ip %s\ndelete table ip %s\ntable ip %s {\n", natNFTable, natNFTable, natNFTable)
	b.WriteString("\tchain rdr_rules {\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n")
	for _, c := range rdr {
		targets := c.held
		if targets == nil {
			targets = roundRobin(c.rules)
		}
		fmt.Fprintf(&b, "\t\t%s %s\n", c.match, dnatTo(targets))
	}
	b.WriteString("\t}\n\tchain map_rules {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n")
	for _, m := range maps {
		fmt.Fprintf(&b, "\t\t%s\n", m)
	}
	b.WriteString("\t}\n}\n")
	return b.String(), unrealised
}

// roundRobin is the order in which a chain of round-robin rules is used:
// each rule in turn, each time its next target (a rule of two alternates),
// until the cycle repeats.
func roundRobin(rules [][]string) []string {
	cycle := 1
	for _, r := range rules {
		cycle = max(cycle, len(r))
	}
	var out []string
	for i := range cycle {
		for _, r := range rules {
			out = append(out, r[i%len(r)])
		}
	}
	return out
}

// dnatTo chooses among targets ("A" or "A . Q") in turn.
func dnatTo(targets []string) string {
	if len(targets) == 1 {
		return "dnat to " + strings.Replace(targets[0], " . ", ":", 1)
	}
	elems := make([]string, len(targets))
	for i, t := range targets {
		elems[i] = fmt.Sprintf("%d : %s", i, t)
	}
	return fmt.Sprintf("dnat ip to numgen inc mod %d map { %s }", len(targets), strings.Join(elems, ", "))
}

// nftRdrRule is one DNAT match and the targets of one choice of its rule.
type nftRdrRule struct {
	match   string
	targets []string
}

// nftRdr is an rdr rule's matches: one, or one per port of a range
// mapped offset-wise.
func nftRdr(r *NATRule) ([]nftRdrRule, bool) {
	iface := fmt.Sprintf("iifname %q", kernelName(r.Ifaces[0]))
	targets := func(port int) []string {
		var out []string
		for _, to := range r.To {
			if port > 0 {
				out = append(out, fmt.Sprintf("%s . %d", ipString(to), port))
			} else {
				out = append(out, ipString(to))
			}
		}
		return out
	}
	if r.Filter != nil {
		m, ok := nftFilter(r.Filter, r.Proto)
		if !ok {
			return nil, false
		}
		port := 0
		if r.HasPorts || r.ToPort > 0 {
			port = r.ToPort
		}
		return []nftRdrRule{{match: join(iface, m), targets: targets(port)}}, true
	}
	dst := ""
	if r.Mask != 0 || r.Addr != 0 {
		dst = "ip daddr " + prefixString(r.Addr, r.Mask)
	}
	if !r.HasPorts || r.PortLo == 0 {
		return []nftRdrRule{{match: join(iface, dst, l4proto(r.Proto)), targets: targets(0)}}, true
	}
	if r.PortHi == r.PortLo || r.FixedDst {
		ports := strconv.Itoa(r.PortLo)
		if r.PortHi > r.PortLo {
			ports += "-" + strconv.Itoa(r.PortHi)
		}
		dport, ok := dportMatch(r.Proto, ports)
		if !ok {
			return nil, false
		}
		return []nftRdrRule{{match: join(iface, dst, dport), targets: targets(r.ToPort)}}, true
	}
	if r.PortHi-r.PortLo >= natKernelPorts {
		return nil, false
	}
	var out []nftRdrRule
	for p := r.PortLo; p <= r.PortHi; p++ {
		dport, ok := dportMatch(r.Proto, strconv.Itoa(p))
		if !ok {
			return nil, false
		}
		out = append(out, nftRdrRule{match: join(iface, dst, dport), targets: targets(r.ToPort + p - r.PortLo)})
	}
	return out, true
}

// nftMap is a map rule's SNAT statement. A portmap limits the rule to its
// protocols (IPFilter's IPN_TCPUDP), and a range of ports picks the source
// port from it.
func nftMap(r *NATRule) ([]string, bool) {
	if r.Kind != "map" || len(r.To) == 0 || r.BlockPorts != "" {
		return nil, false
	}
	m := fmt.Sprintf("oifname %q", kernelName(r.Ifaces[0]))
	if r.Filter != nil {
		f, ok := nftFilter(r.Filter, r.Proto)
		if !ok {
			return nil, false
		}
		m = join(m, f)
	} else {
		if r.Mask != 0 || r.Addr != 0 {
			m = join(m, "ip saddr "+prefixString(r.Addr, r.Mask))
		}
		m = join(m, l4proto(r.Proto))
	}
	to := ""
	switch {
	case r.IsRange:
		to = ipString(r.Range[0]) + "-" + ipString(r.Range[1])
	case r.ToMask == ^uint32(0) && r.To[0] == 0:
		to = "" // 0/32: the interface's own address
	case r.ToMask == ^uint32(0):
		to = ipString(r.To[0])
	default:
		first := r.To[0] & r.ToMask
		to = ipString(first) + "-" + ipString(first|^r.ToMask)
	}
	translate := func(ports string) string {
		if to == "" {
			if ports == "" {
				return "masquerade"
			}
			return "masquerade to :" + ports
		}
		if ports == "" {
			return "snat to " + to
		}
		return "snat to " + to + ":" + ports
	}
	proto, portRange, _ := strings.Cut(r.Portmap, " ")
	if proto != "" && proto != r.Proto {
		m = join(m, l4proto(proto))
	}
	if portRange == "" || portRange == "auto" {
		return []string{m + " " + translate("")}, true
	}
	lo, hi, ok := strings.Cut(portRange, ":")
	if !ok {
		return nil, false
	}
	return []string{m + " " + translate(lo+"-"+hi)}, true
}

// nftFilter is the from/to form's matches.
func nftFilter(f *natFilter, proto string) (string, bool) {
	var parts []string
	addr := func(field string, not bool, a, m uint32) {
		if a == 0 && m == 0 {
			return
		}
		op := ""
		if not {
			op = "!= "
		}
		parts = append(parts, fmt.Sprintf("ip %s %s%s", field, op, prefixString(a, m)))
	}
	addr("saddr", f.NotSrc, f.Src, f.SrcMask)
	addr("daddr", f.NotDst, f.Dst, f.DstMask)
	ports := 0
	for _, pc := range []struct {
		field string
		cmp   natPortCmp
	}{{"sport", f.SrcPort}, {"dport", f.DstPort}} {
		if pc.cmp.Op == "" {
			continue
		}
		expr, ok := portCmp(pc.cmp)
		if !ok {
			return "", false
		}
		m, ok := portMatch(proto, pc.field, expr)
		if !ok {
			return "", false
		}
		parts = append(parts, m)
		ports++
	}
	if ports == 0 {
		parts = append(parts, l4proto(proto))
	}
	return join(parts...), true
}

// portCmp is a port comparison in nft's words.
func portCmp(c natPortCmp) (string, bool) {
	switch c.Op {
	case "=", "!=", "<", ">", "<=", ">=":
		op := c.Op
		if op == "=" {
			op = ""
		} else {
			op += " "
		}
		return op + strconv.Itoa(c.Lo), true
	case ":":
		return fmt.Sprintf("%d-%d", c.Lo, c.Hi), true
	case "<>": // outside Lo..Hi
		return fmt.Sprintf("!= %d-%d", c.Lo, c.Hi), true
	case "><": // strictly between
		if c.Hi-c.Lo < 2 {
			return "", false
		}
		return fmt.Sprintf("%d-%d", c.Lo+1, c.Hi-1), true
	}
	return "", false
}

func dportMatch(proto, ports string) (string, bool) { return portMatch(proto, "dport", ports) }

// portMatch matches a port of proto ("tcp", "udp", "tcp/udp").
func portMatch(proto, field, expr string) (string, bool) {
	switch proto {
	case "tcp", "udp":
		return fmt.Sprintf("%s %s %s", proto, field, expr), true
	case "tcp/udp", "":
		return fmt.Sprintf("meta l4proto { tcp, udp } th %s %s", field, expr), true
	}
	return "", false
}

// l4proto matches a rule's protocol ("" matches all).
func l4proto(proto string) string {
	switch proto {
	case "":
		return ""
	case "tcp/udp":
		return "meta l4proto { tcp, udp }"
	}
	if n, ok := natProtocols[proto]; ok {
		return fmt.Sprintf("meta l4proto %d", n)
	}
	if n, err := strconv.Atoi(proto); err == nil {
		return fmt.Sprintf("meta l4proto %d", n)
	}
	return "meta l4proto " + proto
}

func prefixString(a, m uint32) string {
	bits := 0
	for x := m; x&(1<<31) != 0; x <<= 1 {
		bits++
	}
	return fmt.Sprintf("%s/%d", ipString(a&m), bits)
}

func join(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " ")
}

// natKernelStamp is the file naming the generation in force in the kernel
// and the namespace it was applied in.
func (h *host) natKernelStamp() string { return filepath.Join(h.root, "run", "nat.kernel") }

func netnsID(path string) string {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// syncKernelNAT puts t's rules in force in the node's namespace unless
// they already are. Failures go to run/net.log: ipnat's own result stands.
func (h *host) syncKernelNAT(t *NATTable) {
	ns := h.nodeNetns()
	stamp := fmt.Sprintf("%d %s\n", t.Gen, netnsID(ns))
	if b, err := os.ReadFile(h.natKernelStamp()); err == nil && string(b) == stamp {
		return
	}
	script, unrealised := nftRuleset(t)
	for _, r := range unrealised {
		h.netLog("ipnat: not realised in the kernel: %s", r)
	}
	err := inNetns(ns, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	})
	if err != nil {
		h.netLog("ipnat: %v\n%s", err, script)
		return
	}
	_ = os.MkdirAll(filepath.Dir(h.natKernelStamp()), 0o755)
	if err := writeFileAtomic(h.natKernelStamp(), []byte(stamp)); err != nil {
		h.netLog("ipnat: %v", err)
	}
}

// clearKernelNAT removes the node's table (stop-all): the rules stay in
// the simulated kernel's state, and the next ipnat puts them back.
func (h *host) clearKernelNAT() {
	ns := h.nodeNetns()
	if ns == "" {
		return
	}
	os.Remove(h.natKernelStamp())
	err := inNetns(ns, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(fmt.Sprintf("table ip %s\ndelete table ip %s\n", natNFTable, natNFTable))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	})
	if err != nil {
		h.netLog("stop-all: %v", err)
	}
}

// natSessions is where a stack's sessions are: the table (kept by natd,
// or none) or the node's connection tracking.
type natSessions interface {
	list() []*NATSession
	flush() int
}

type tableSessions struct{ t *NATTable }

func (s tableSessions) list() []*NATSession { return s.t.Sessions }
func (s tableSessions) flush() int          { return s.t.flushSessions() }

// kernelSessions are the node's translated connections.
type kernelSessions struct{ h *host }

func (s kernelSessions) list() []*NATSession {
	var out []*NATSession
	err := inNetns(s.h.nodeNetns(), func() error {
		b, err := exec.Command("conntrack", "-L").Output()
		if err != nil {
			return fmt.Errorf("conntrack -L: %w", err)
		}
		out = parseConntrack(b)
		return nil
	})
	if err != nil {
		s.h.netLog("ipnat: %v", err)
	}
	return out
}

// flush deletes every translated connection: their packets are no longer
// translated, so they stop reaching where they went.
func (s kernelSessions) flush() int {
	n := len(s.list())
	err := inNetns(s.h.nodeNetns(), func() error {
		for _, kind := range []string{"--dst-nat", "--src-nat"} {
			// conntrack exits 1 when nothing matched.
			if out, err := exec.Command("conntrack", "-D", kind).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("0 flow entries")) {
				return fmt.Errorf("conntrack -D %s: %w: %s", kind, err, strings.TrimSpace(string(out)))
			}
		}
		return nil
	})
	if err != nil {
		s.h.netLog("ipnat -F: %v", err)
	}
	return n
}

// parseConntrack reads `conntrack -L` lines into sessions: a connection
// whose reply does not come from where it went is an RDR session, one
// whose reply does not go back where it came from a MAP session (a
// hairpin connection is both, as IPFilter keeps two).
func parseConntrack(b []byte) []*NATSession {
	var out []*NATSession
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		type tuple struct {
			src, dst     string
			sport, dport int
		}
		var tuples []tuple
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			switch k {
			case "src":
				tuples = append(tuples, tuple{src: v})
			case "dst":
				if n := len(tuples); n > 0 {
					tuples[n-1].dst = v
				}
			case "sport", "dport":
				if n := len(tuples); n > 0 {
					p, _ := strconv.Atoi(v)
					if k == "sport" {
						tuples[n-1].sport = p
					} else {
						tuples[n-1].dport = p
					}
				}
			}
		}
		if len(tuples) != 2 {
			continue
		}
		orig, reply := tuples[0], tuples[1]
		if _, err := netip.ParseAddr(orig.src); err != nil {
			continue
		}
		if reply.src != orig.dst || reply.sport != orig.dport {
			out = append(out, &NATSession{Type: "RDR", Proto: f[0], In: reply.src, InPort: reply.sport,
				Out: orig.dst, OutPort: orig.dport, Remote: orig.src, RemotePort: orig.sport})
		}
		if reply.dst != orig.src || reply.dport != orig.sport {
			out = append(out, &NATSession{Type: "MAP", Proto: f[0], In: orig.src, InPort: orig.sport,
				Out: reply.dst, OutPort: reply.dport, Remote: orig.dst, RemotePort: orig.dport})
		}
	}
	return out
}
