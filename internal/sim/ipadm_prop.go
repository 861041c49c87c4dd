package sim

import (
	"slices"
	"strings"
)

// Interface and protocol properties: set-ifprop, set-prop, set-addrprop
// and show-ifprop.

// ipadm set-ifprop/set-prop/set-addrprop: accepted when the target exists.
// set-ifprop records an interface's protocol properties (show-ifprop reads
// them back; forwarding decides nothing else in the simulation), the
// others have no effect.
func ipadmSetProp(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "tp:m:")
	if !ok || len(rest) != 1 {
		return ipadmUsage(inv)
	}
	prop, value, proto, temporary := "", "", "", false
	for _, o := range opts {
		switch o.c {
		case 'p':
			prop, value, _ = strings.Cut(o.val, "=")
			if !strings.Contains(o.val, "=") {
				prop = ""
			}
		case 'm':
			proto = o.val
		case 't':
			temporary = true
		}
	}
	if prop == "" {
		return ipadmUsage(inv)
	}
	target := rest[0]
	if inv.args[0] != "set-ifprop" || target == "lo0" {
		code := 0
		err := inv.h.view(func(st *State) {
			if _, ok := ipZone(inv, st, "set-prop"); !ok {
				code = 1
			}
		})
		if err != nil {
			return inv.stateErr(err)
		}
		return code
	}
	if proto != "ipv4" && proto != "ipv6" && proto != "ip" {
		return ipadmDie(inv, "set-ifprop: %s: Invalid protocol specified", proto)
	}
	def, known := ifPropDefaults[prop]
	if !known {
		return ipadmDie(inv, "set-ifprop: %s: Unknown property", prop)
	}
	if def.possible != "" && !slices.Contains(strings.Split(def.possible, ","), value) {
		return ipadmDie(inv, "set-ifprop: %s: Invalid argument provided", prop)
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		z, ok := ipZone(inv, st, "set-prop")
		if !ok {
			code = 1
			return false
		}
		ifc := findIface(z, target)
		if ifc == nil {
			code = ipadmDie(inv, "set-ifprop: %s: Interface does not exist", target)
			return false
		}
		protos := []string{proto}
		if proto == "ip" {
			protos = []string{"ipv4", "ipv6"}
		}
		for _, p := range protos {
			key := p + "/" + prop
			ifc.Props = setProp(ifc.Props, key, value)
			if !temporary {
				ifc.PersistentProps = setProp(ifc.PersistentProps, key, value)
			}
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

func setProp(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// ifPropDefaults are the interface properties the simulator knows, with
// their defaults and possible values (ipadm show-ifprop; libipadm's
// ipadm_ip_props table: forwarding is per interface and protocol, off by
// default).
var ifPropDefaults = map[string]struct{ def, possible string }{
	"forwarding":      {"off", "on,off"},
	"metric":          {"0", ""},
	"mtu":             {"1500", ""},
	"exchange_routes": {"on", "on,off"},
	"usesrc":          {"none", ""},
}

var ifPropFields = []ofmtField{{"IFNAME", 12}, {"PROPERTY", 16}, {"PROTO", 6}, {"PERM", 5}, {"CURRENT", 11}, {"PERSISTENT", 11}, {"DEFAULT", 11}, {"POSSIBLE", 15}}

// ipadm show-ifprop [[-c] -o FIELDS] [-p PROP,...] [-m PROTO] [IF]: one row
// per interface, property and protocol (ipv4 before ipv6).
func ipadmShowIfProp(inv *invocation, args []string) int {
	opts, rest, _, ok := getopt(args, "co:p:m:")
	if !ok || len(rest) > 1 {
		return ipadmUsage(inv)
	}
	parsable, fields, props, protos := false, "", []string(nil), []string{"ipv4", "ipv6"}
	for _, o := range opts {
		switch o.c {
		case 'c':
			parsable = true
		case 'o':
			fields = o.val
		case 'p':
			props = strings.Split(o.val, ",")
		case 'm':
			if o.val != "ipv4" && o.val != "ipv6" {
				return ipadmDie(inv, "show-ifprop: %s: Invalid protocol specified", o.val)
			}
			protos = []string{o.val}
		}
	}
	if parsable && fields == "" {
		return ipadmDie(inv, "-c requires -o")
	}
	if props == nil {
		for p := range ifPropDefaults {
			props = append(props, p)
		}
		slices.Sort(props)
	}
	for _, p := range props {
		if _, ok := ifPropDefaults[p]; !ok {
			return ipadmDie(inv, "show-ifprop: %s: Unknown property", p)
		}
	}
	t, bad := selectFields(ifPropFields, []string{"IFNAME", "PROPERTY", "PROTO", "PERM", "CURRENT", "PERSISTENT", "DEFAULT", "POSSIBLE"}, fields)
	if t == nil {
		return ipadmDie(inv, "unknown output field: '%s'", bad)
	}
	var rows []map[string]string
	code := 0
	err := inv.h.view(func(st *State) {
		z, ok := ipZone(inv, st, "show-ifprop")
		if !ok {
			code = 1
			return
		}
		ifaces := z.Interfaces
		if len(rest) == 1 {
			ifc := findIface(z, rest[0])
			if ifc == nil {
				code = ipadmDie(inv, "show-ifprop: %s: Interface does not exist", rest[0])
				return
			}
			ifaces = []*IPInterface{ifc}
		}
		for _, ifc := range ifaces {
			for _, p := range props {
				for _, proto := range protos {
					def := ifPropDefaults[p]
					cur, persistent := def.def, "--"
					if v, ok := ifc.Props[proto+"/"+p]; ok {
						cur = v
					}
					if v, ok := ifc.PersistentProps[proto+"/"+p]; ok {
						persistent = v
					}
					possible := def.possible
					if possible == "" {
						possible = "--"
					}
					rows = append(rows, map[string]string{"IFNAME": ifc.Name, "PROPERTY": p, "PROTO": proto, "PERM": "rw",
						"CURRENT": cur, "PERSISTENT": persistent, "DEFAULT": def.def, "POSSIBLE": possible})
				}
			}
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
