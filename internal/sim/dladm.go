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

// parseLinkProps parses "-p mtu=9000,maxbw=100".
func parseLinkProps(inv *invocation, spec string) (map[string]string, bool) {
	out := map[string]string{}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			inv.errf("dladm: invalid property value '%s'", kv)
			return nil, false
		}
		if !knownLinkProps[k] {
			inv.errf("dladm: invalid link property '%s'", k)
			return nil, false
		}
		out[k] = v
	}
	return out, true
}

var knownLinkProps = map[string]bool{
	"mtu": true, "maxbw": true, "priority": true, "allowed-ips": true, "protection": true,
	"cpus": true, "autopush": true, "zone": true, "vlan-announce": true, "allowed-dhcp-cids": true,
}

// applyLinkProps stores props on a link; mtu must fit the link below.
func applyLinkProps(inv *invocation, st *State, l *Link, props map[string]string, verb string) bool {
	for k, v := range props {
		if k == "mtu" {
			n, err := strconv.Atoi(v)
			limit := 9000
			if l.Over != "" {
				if u := st.link(l.Over); u != nil && u.Class != "etherstub" {
					limit = u.MTU
				}
			}
			if err != nil || n < 576 || n > limit {
				inv.errf("dladm: %s: invalid argument", verb)
				return false
			}
			l.MTU = n
			continue
		}
		if l.Props == nil {
			l.Props = map[string]string{}
		}
		l.Props[k] = v
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

var vnicFields = []ofmtField{{"LINK", 13}, {"OVER", 11}, {"SPEED", 6}, {"MACADDRESS", 18}, {"MACADDRTYPE", 12}, {"VID", 5}, {"ZONE", 20}}

// outputSpec handles -p/-o: -p requires -o, "-o all" is invalid with -p,
// field names are case-insensitive and an unknown one is fatal.
func outputSpec(inv *invocation, cmd string, known []ofmtField, parsable bool, fields string) (*ofmtTable, bool) {
	if parsable && fields == "" {
		inv.errf("%s: -p requires -o", cmd)
		return nil, false
	}
	if parsable && strings.EqualFold(fields, "all") {
		inv.errf("%s: \"-o all\" is invalid with -p", cmd)
		return nil, false
	}
	defaults := make([]string, len(known))
	for i, f := range known {
		defaults[i] = f.name
	}
	t, bad := selectFields(known, defaults, fields)
	if t == nil {
		inv.errf("%s: unknown output field: '%s'", cmd, bad)
		return nil, false
	}
	return t, true
}

// dladm show-vnic [-P] [[-p] -o FIELDS] [-l LINK] [VNIC]
func dladmShowVnic(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "pPo:l:s:i:")
	if !ok || len(rest) > 1 {
		return dladmUsage(inv, "show-vnic")
	}
	parsable, persistent := false, false
	var fields, over string
	for _, o := range opts {
		switch o.c {
		case 'p':
			parsable = true
		case 'P':
			persistent = true
		case 'o':
			fields = o.val
		case 'l':
			over = o.val
		}
	}
	t, ok := outputSpec(inv, "dladm", vnicFields, parsable, fields)
	if !ok {
		return 1
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		if len(rest) == 1 {
			if l := st.link(rest[0]); l == nil || l.Class != "vnic" {
				inv.errf("dladm: invalid vnic name '%s': object not found", rest[0])
				code = 1
				return
			}
		}
		if over != "" && st.link(over) == nil {
			inv.errf("dladm: invalid link name '%s'", over)
			code = 1
			return
		}
		owners := linkOwners(st)
		for _, l := range st.Links {
			if l.Class != "vnic" || (len(rest) == 1 && l.Name != rest[0]) || (over != "" && l.Over != over) {
				continue
			}
			if persistent && l.Temporary {
				continue
			}
			zone := owners[l.Name]
			if zone == "" {
				zone = "--"
			}
			rows = append(rows, map[string]string{
				"LINK": l.Name, "OVER": l.Over, "SPEED": strconv.Itoa(l.Speed),
				"MACADDRESS": l.MAC, "MACADDRTYPE": l.MACType, "VID": strconv.Itoa(l.VID), "ZONE": zone,
			})
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

// dladm show-etherstub [NAME]
func dladmShowEtherstub(inv *invocation, args []string) int {
	_, rest, _, ok := getopt(args, "t")
	if !ok || len(rest) > 1 {
		return dladmUsage(inv, "show-etherstub")
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		if len(rest) == 1 && st.link(rest[0]) == nil {
			inv.errf("dladm: invalid etherstub name '%s': object not found", rest[0])
			code = 1
			return
		}
		for _, l := range st.Links {
			if l.Class == "etherstub" && (len(rest) == 0 || l.Name == rest[0]) {
				rows = append(rows, map[string]string{"LINK": l.Name})
			}
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	if code == 0 && len(rows) > 0 {
		(&ofmtTable{fields: []ofmtField{{"LINK", 13}}}).print(inv.stdout, false, rows)
	}
	return code
}

var linkFields = []ofmtField{{"LINK", 12}, {"CLASS", 10}, {"MTU", 7}, {"STATE", 9}, {"BRIDGE", 11}, {"OVER", 32}}

// dladm show-link [-P] [[-p] -o FIELDS] [LINK]
func dladmShowLink(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "pPo:s:i:")
	if !ok || len(rest) > 1 {
		return dladmUsage(inv, "show-link")
	}
	parsable, persistent := false, false
	fields := ""
	for _, o := range opts {
		switch o.c {
		case 'p':
			parsable = true
		case 'P':
			persistent = true
		case 'o':
			fields = o.val
		}
	}
	t, ok := outputSpec(inv, "dladm", linkFields, parsable, fields)
	if !ok {
		return 1
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		if len(rest) == 1 && st.link(rest[0]) == nil {
			inv.errf("dladm: link %s is not valid: object not found", rest[0])
			code = 1
			return
		}
		for _, l := range st.Links {
			if (len(rest) == 1 && l.Name != rest[0]) || (persistent && l.Temporary) {
				continue
			}
			state := "up"
			if l.Class == "etherstub" {
				state = "unknown"
			}
			overVal := l.Over
			if overVal == "" {
				overVal = "--"
			}
			rows = append(rows, map[string]string{
				"LINK": l.Name, "CLASS": l.Class, "MTU": strconv.Itoa(l.MTU), "STATE": state,
				"BRIDGE": "--", "OVER": overVal,
			})
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

var physFields = []ofmtField{{"LINK", 13}, {"MEDIA", 21}, {"STATE", 11}, {"SPEED", 7}, {"DUPLEX", 10}, {"DEVICE", 13}}
var physMacFields = []ofmtField{{"LINK", 13}, {"SLOT", 9}, {"ADDRESS", 19}, {"INUSE", 5}, {"CLIENT", 13}}

// dladm show-phys [-m] [[-p] -o FIELDS] [LINK]
func dladmShowPhys(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "mHPpo:")
	if !ok || len(rest) > 1 {
		return dladmUsage(inv, "show-phys")
	}
	parsable, macMode := false, false
	fields := ""
	for _, o := range opts {
		switch o.c {
		case 'p':
			parsable = true
		case 'm':
			macMode = true
		case 'o':
			fields = o.val
		}
	}
	known := physFields
	if macMode {
		known = physMacFields
	}
	t, ok := outputSpec(inv, "dladm", known, parsable, fields)
	if !ok {
		return 1
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		if len(rest) == 1 {
			if l := st.link(rest[0]); l == nil || l.Class != "phys" {
				inv.errf("dladm: link %s is not valid: object not found", rest[0])
				code = 1
				return
			}
		}
		n := 0
		for _, l := range st.Links {
			if l.Class != "phys" {
				continue
			}
			dev := fmt.Sprintf("vioif%d", n)
			n++
			if len(rest) == 1 && l.Name != rest[0] {
				continue
			}
			rows = append(rows, map[string]string{
				"LINK": l.Name, "MEDIA": "Ethernet", "STATE": "up", "SPEED": strconv.Itoa(l.Speed),
				"DUPLEX": "full", "DEVICE": dev, "SLOT": "primary", "ADDRESS": l.MAC,
				"INUSE": "yes", "CLIENT": l.Name,
			})
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

// dladm set-linkprop [-t] -p prop=val[,...] LINK
func dladmSetLinkprop(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "tR:p:")
	if !ok || len(rest) != 1 {
		return dladmUsage(inv, "set-linkprop")
	}
	spec := ""
	for _, o := range opts {
		if o.c == 'p' {
			spec = o.val
		}
	}
	if spec == "" {
		return dladmUsage(inv, "set-linkprop")
	}
	props, ok := parseLinkProps(inv, spec)
	if !ok {
		return 1
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		l := st.link(rest[0])
		if l == nil {
			inv.errf("dladm: invalid link name '%s'", rest[0])
			code = 1
			return false
		}
		if !applyLinkProps(inv, st, l, props, "warning: cannot set link property 'mtu' on '"+l.Name+"'") {
			code = 1
			return false
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// dladm reset-linkprop [-t] [-p prop,...] LINK
func dladmResetLinkprop(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "tR:p:")
	if !ok || len(rest) != 1 {
		return dladmUsage(inv, "reset-linkprop")
	}
	var names []string
	for _, o := range opts {
		if o.c == 'p' {
			names = strings.Split(o.val, ",")
		}
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		l := st.link(rest[0])
		if l == nil {
			inv.errf("dladm: invalid link name '%s'", rest[0])
			code = 1
			return false
		}
		if len(names) == 0 {
			l.Props = nil
			names = []string{"mtu"}
		}
		for _, n := range names {
			if n == "mtu" {
				l.MTU = 1500
				if u := st.link(l.Over); u != nil && u.Class != "etherstub" {
					l.MTU = u.MTU
				}
				if l.Class == "etherstub" {
					l.MTU = 9000
				}
				continue
			}
			delete(l.Props, n)
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

var linkpropFields = []ofmtField{{"LINK", 13}, {"PROPERTY", 16}, {"PERM", 5}, {"VALUE", 15}, {"DEFAULT", 15}, {"POSSIBLE", 20}}

// dladm show-linkprop [-c] [-o FIELDS] [-p props] [LINK]
func dladmShowLinkprop(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "cPo:p:")
	if !ok || len(rest) > 1 {
		return dladmUsage(inv, "show-linkprop")
	}
	parsable := false
	var fields string
	var props []string
	for _, o := range opts {
		switch o.c {
		case 'c':
			parsable = true
		case 'o':
			fields = o.val
		case 'p':
			props = strings.Split(o.val, ",")
		}
	}
	t, ok := outputSpec(inv, "dladm", linkpropFields, parsable, fields)
	if !ok {
		return 1
	}
	if len(props) == 0 {
		props = []string{"mtu", "maxbw", "priority", "allowed-ips", "protection"}
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		for _, l := range st.Links {
			if len(rest) == 1 && l.Name != rest[0] {
				continue
			}
			for _, p := range props {
				if !knownLinkProps[p] {
					inv.errf("dladm: cannot get link property '%s' for %s: invalid argument", p, l.Name)
					code = 1
					return
				}
				row := map[string]string{"LINK": l.Name, "PROPERTY": p, "PERM": "rw"}
				switch p {
				case "mtu":
					row["VALUE"], row["DEFAULT"], row["POSSIBLE"] = strconv.Itoa(l.MTU), "1500", "576-9000"
				case "priority":
					row["VALUE"], row["DEFAULT"], row["POSSIBLE"] = "high", "high", "low,medium,high"
					if v, ok := l.Props[p]; ok {
						row["VALUE"] = v
					}
				default:
					row["VALUE"] = l.Props[p]
				}
				rows = append(rows, row)
			}
		}
		if len(rest) == 1 && len(rows) == 0 {
			inv.errf("dladm: invalid link name '%s'", rest[0])
			code = 1
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
