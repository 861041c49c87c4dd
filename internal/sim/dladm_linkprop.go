package sim

import (
	"strconv"
	"strings"
)

// Link properties: -p on create-vnic, set-linkprop, reset-linkprop and
// show-linkprop.

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
