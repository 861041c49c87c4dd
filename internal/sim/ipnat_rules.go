package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// An ipnat rule as the kernel holds it, and its `ipnat -l` rendering (spec
// §10.4, printnat.c). IPv4 only. The spec gives no rendering for the
// from/to form; it prints as written, normalised (`any` for 0/0, masks as
// bits, comparators as symbols), as printnat.c's printhostmask and
// printportcmp do. The grammar is in ipnat_grammar.go, the lexer and the
// parser's entry points in ipnat_parse.go.

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
