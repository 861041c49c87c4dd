package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// dladm: errors are "dladm: <message>" and every failure, usage included,
// exits 1 (spec §7).

var dladmUsages = map[string]string{
	"create-vnic":      "create-vnic      [-t] -l <link> [-m <value> | auto |\n\t\t {factory [-n <slot-id>]} | {random [-r <prefix>]}]\n\t\t [-v <vid> [-f]] [-p <prop>=<value>[,...]] <vnic-link>",
	"delete-vnic":      "delete-vnic      [-t] <vnic-link>",
	"show-vnic":        "show-vnic        [-P] [[-p] -o <field>,...] [-l <link>] [<link>]",
	"create-etherstub": "create-etherstub [-t] <link>",
	"delete-etherstub": "delete-etherstub [-t] <link>",
	"show-etherstub":   "show-etherstub   [-t] [<link>]",
	"show-link":        "show-link        [-P] [[-p] -o <field>,...] [<link>]",
	"show-phys":        "show-phys        [-m | -H | -P] [[-p] -o <field>,...] [<link>]",
	"set-linkprop":     "set-linkprop     [-t] -p <prop>=<value>[,...] <name>",
	"reset-linkprop":   "reset-linkprop   [-t] [-p <prop>,...] <name>",
	"show-linkprop":    "show-linkprop    [-c] [-o <field>,...] [-p <prop>,...] <name>",
}

func dladmUsage(inv *invocation, sub string) int {
	if u, ok := dladmUsages[sub]; ok {
		inv.errf("usage: dladm %s", u)
		return 1
	}
	inv.errf("usage: dladm <subcommand> <args> ...")
	keys := make([]string, 0, len(dladmUsages))
	for k := range dladmUsages {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		inv.errf("    %s", dladmUsages[k])
	}
	return 1
}

func runDladm(inv *invocation) int {
	if len(inv.args) == 0 {
		return dladmUsage(inv, "")
	}
	sub, args := inv.args[0], inv.args[1:]
	handlers := map[string]func(*invocation, []string) int{
		"create-vnic": dladmCreateVnic, "delete-vnic": dladmDeleteVnic, "show-vnic": dladmShowVnic,
		"create-etherstub": dladmCreateEtherstub, "delete-etherstub": dladmDeleteEtherstub,
		"show-etherstub": dladmShowEtherstub, "show-link": dladmShowLink, "show-phys": dladmShowPhys,
		"set-linkprop": dladmSetLinkprop, "reset-linkprop": dladmResetLinkprop, "show-linkprop": dladmShowLinkprop,
	}
	h, ok := handlers[sub]
	if !ok {
		inv.errf("dladm: unknown subcommand '%s'", sub)
		return dladmUsage(inv, "")
	}
	return h(inv, args)
}

// checkLinkName prints the dladm complaint about a bad link name.
func checkLinkName(inv *invocation, name string) bool {
	switch linkNameProblem(name) {
	case "too long":
		inv.errf("dladm: link name too long '%s'", name)
		return false
	case "invalid":
		inv.errf("dladm: invalid link name '%s'", name)
		return false
	}
	return true
}

// randomMAC returns a MAC with the given prefix (default 2:8:20) that no
// link on the host uses.
func randomMAC(st *State, prefix []byte) string {
	for {
		b := append([]byte(nil), prefix...)
		b = append(b, randomBytes(6-len(prefix))...)
		m := formatMAC(b)
		if !macInUse(st, m) {
			return m
		}
	}
}

func macInUse(st *State, m string) bool {
	for _, l := range st.Links {
		if l.MAC == m {
			return true
		}
	}
	return false
}

// dladm create-vnic [-t] -l LINK [-m MAC|auto|random|factory] [-r prefix] [-v VID] [-p props] VNIC
func dladmCreateVnic(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "tR:l:m:n:r:v:p:fH")
	if !ok || len(rest) != 1 {
		return dladmUsage(inv, "create-vnic")
	}
	name := rest[0]
	var over, macSpec, prefixSpec, propSpec string
	vid := 0
	temp := false
	for _, o := range opts {
		switch o.c {
		case 't':
			temp = true
		case 'l':
			over = o.val
		case 'm':
			macSpec = o.val
		case 'r':
			prefixSpec = o.val
		case 'p':
			propSpec = o.val
		case 'v':
			n, err := strconv.Atoi(o.val)
			if err != nil || n < 1 || n > 4094 {
				inv.errf("dladm: invalid VLAN identifier '%s'", o.val)
				return 1
			}
			vid = n
		}
	}
	if over == "" {
		return dladmUsage(inv, "create-vnic")
	}
	if !checkLinkName(inv, name) {
		return 1
	}
	var props map[string]string
	if propSpec != "" {
		if props, ok = parseLinkProps(inv, propSpec); !ok {
			return 1
		}
	}
	var fixed []byte
	macType := "random"
	prefix := []byte{0x2, 0x8, 0x20}
	switch macSpec {
	case "", "auto", "random":
		if prefixSpec != "" {
			p, ok := parseMACPrefix(prefixSpec)
			if !ok {
				inv.errf("dladm: invalid MAC address prefix '%s'", prefixSpec)
				return 1
			}
			prefix = p
		}
	case "factory":
		inv.errf("dladm: vnic creation over %s failed: operation not supported", over)
		return 1
	default:
		m, ok := parseMAC(macSpec)
		if !ok || m[0]&1 == 1 {
			inv.errf("dladm: invalid MAC address")
			return 1
		}
		fixed, macType = m, "fixed"
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		under := st.link(over)
		if under == nil {
			inv.errf("dladm: invalid link name '%s'", over)
			code = 1
			return false
		}
		if under.Class == "vnic" {
			inv.errf("dladm: vnic creation over %s failed: invalid argument", over)
			code = 1
			return false
		}
		if st.link(name) != nil {
			inv.errf("dladm: vnic creation over %s failed: object already exists", over)
			code = 1
			return false
		}
		mac := ""
		if fixed != nil {
			mac = formatMAC(fixed)
			if macInUse(st, mac) {
				inv.errf("dladm: vnic creation over %s failed: MAC address is already in use", over)
				code = 1
				return false
			}
		} else {
			mac = randomMAC(st, prefix)
		}
		speed := under.Speed
		if under.Class == "etherstub" {
			speed = 0
		}
		l := &Link{Name: name, Class: "vnic", Over: over, MAC: mac, MACType: macType,
			VID: vid, MTU: under.MTU, Speed: speed, Temporary: temp}
		if !applyLinkProps(inv, st, l, props, fmt.Sprintf("vnic creation over %s failed", over)) {
			code = 1
			return false
		}
		st.Links = append(st.Links, l)
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

func parseMACPrefix(s string) ([]byte, bool) {
	parts := strings.Split(s, ":")
	if len(parts) == 0 || len(parts) > 5 {
		return nil, false
	}
	full, ok := parseMAC(strings.Join(append(parts, strings.Split(strings.Repeat("0:", 6-len(parts)), ":")[:6-len(parts)]...), ":"))
	if !ok || full[0]&1 == 1 {
		return nil, false
	}
	return full[:len(parts)], true
}

// linkBusy reports why a link cannot be removed: an in-kernel zone owns
// it, or the global zone plumbed IP on it.
func linkBusy(st *State, name string) bool {
	if linkOwners(st)[name] != "" {
		return true
	}
	if g := st.zone("global"); g != nil && findIface(g, name) != nil {
		return true
	}
	return false
}

// dladm delete-vnic [-t] VNIC
func dladmDeleteVnic(inv *invocation, args []string) int {
	return dladmDeleteLink(inv, args, "vnic", linkBusy)
}

// dladmDeleteLink deletes a link of one class, refusing while busy says
// something still uses it.
func dladmDeleteLink(inv *invocation, args []string, class string, busy func(*State, string) bool) int {
	_, rest, _, ok := getopt(args, "tR:")
	if !ok || len(rest) != 1 {
		return dladmUsage(inv, "delete-"+class)
	}
	name := rest[0]
	code := 0
	err := inv.h.update(func(st *State) bool {
		l := st.link(name)
		switch {
		case l == nil:
			inv.errf("dladm: invalid link name '%s'", name)
		case l.Class != class:
			inv.errf("dladm: '%s' is not a%s %s", name, article(class), class)
		case busy(st, name):
			inv.errf("dladm: %s deletion failed: link busy", class)
		default:
			removeLink(st, name)
			return true
		}
		code = 1
		return false
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// article is "n" before a vowel ("an etherstub"), "" otherwise ("a vnic").
func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "n"
	}
	return ""
}

func removeLink(st *State, name string) {
	out := st.Links[:0]
	for _, l := range st.Links {
		if l.Name != name {
			out = append(out, l)
		}
	}
	st.Links = out
}

// dladm create-etherstub [-t] NAME
func dladmCreateEtherstub(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "tR:")
	if !ok || len(rest) != 1 {
		return dladmUsage(inv, "create-etherstub")
	}
	name := rest[0]
	if !checkLinkName(inv, name) {
		return 1
	}
	temp := len(opts) > 0 && opts[0].c == 't'
	code := 0
	err := inv.h.update(func(st *State) bool {
		if st.link(name) != nil {
			inv.errf("dladm: etherstub creation failed: object already exists")
			code = 1
			return false
		}
		st.Links = append(st.Links, &Link{Name: name, Class: "etherstub", MAC: randomMAC(st, []byte{0x2, 0x8, 0x20}),
			MACType: "random", MTU: 9000, Temporary: temp})
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// dladm delete-etherstub [-t] NAME
func dladmDeleteEtherstub(inv *invocation, args []string) int {
	return dladmDeleteLink(inv, args, "etherstub", hasLinksOver)
}

func hasLinksOver(st *State, name string) bool {
	for _, l := range st.Links {
		if l.Over == name {
			return true
		}
	}
	return false
}
