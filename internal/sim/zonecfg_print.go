package sim

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// info and export layouts of spec §4.7 and §4.8.

// infoValue quotes a value containing whitespace, as zonecfg's info does.
func infoValue(v string) string {
	if strings.ContainsAny(v, " \t") {
		return `"` + v + `"`
	}
	return v
}

func globalPropValue(name string, c *ZoneConfig, prop string) (string, bool) {
	switch prop {
	case "zonename":
		return name, true
	case "zonepath":
		return c.Zonepath, true
	case "brand":
		return c.Brand, true
	case "autoboot":
		return strconv.FormatBool(c.Autoboot), true
	case "bootargs":
		return c.Bootargs, true
	case "pool":
		return c.Pool, true
	case "limitpriv":
		return c.Limitpriv, true
	case "scheduling-class":
		return c.SchedulingClass, true
	case "ip-type":
		return c.IPType, true
	case "hostid":
		return c.Hostid, true
	case "fs-allowed":
		return c.FSAllowed, true
	}
	return "", false
}

// writeGlobalProp prints one global property (info PROP).
func writeGlobalProp(w io.Writer, name string, c *ZoneConfig, prop string) bool {
	if v, ok := globalPropValue(name, c, prop); ok {
		fmt.Fprintf(w, "%s: %s\n", prop, infoValue(v))
		return true
	}
	if rctl, _, ok := aliasFor(prop); ok {
		if v, set := c.rctlLimit(rctl); set {
			fmt.Fprintf(w, "[%s: %s]\n", prop, v)
		}
		return true
	}
	return false
}

// writeInfo prints the whole configuration.
func writeInfo(w io.Writer, name string, c *ZoneConfig) {
	for _, p := range globalProps {
		writeGlobalProp(w, name, c, p)
	}
	for _, a := range rctlAliases {
		if v, set := c.rctlLimit(a.rctl); set {
			fmt.Fprintf(w, "[%s: %s]\n", a.prop, v)
		}
	}
	for _, rt := range resourceOrder {
		writeResourcesOf(w, c, rt, nil)
	}
}

// writeResourcesOf prints every resource of one type matching m.
func writeResourcesOf(w io.Writer, c *ZoneConfig, rt string, m map[string]string) {
	switch rt {
	case "capped-cpu":
		if lim, ok := c.rctlLimit("zone.cpu-cap"); ok {
			n, _ := strconv.ParseFloat(lim, 64)
			fmt.Fprintf(w, "capped-cpu:\n\t[ncpus: %.2f]\n", n/100)
		}
	case "capped-memory":
		if !c.singletonExists(rt) {
			return
		}
		fmt.Fprintln(w, "capped-memory:")
		if c.CappedMemory > 0 {
			fmt.Fprintf(w, "\tphysical: %s\n", bytesToUnits(c.CappedMemory))
		}
		for _, x := range []struct{ prop, rctl string }{{"swap", "zone.max-swap"}, {"locked", "zone.max-locked-memory"}} {
			if v, ok := c.rctlLimit(x.rctl); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				fmt.Fprintf(w, "\t[%s: %s]\n", x.prop, bytesToUnits(n))
			}
		}
	case "rctl":
		for _, r := range c.findRctls(m) {
			fmt.Fprintf(w, "rctl:\n\tname: %s\n", r.Name)
			for _, v := range r.Values {
				fmt.Fprintf(w, "\tvalue: %s\n", v)
			}
		}
	default:
		for _, r := range c.findResources(rt, m) {
			writeResource(w, &zcRes{rt: rt, props: r.Props, options: r.Options})
		}
	}
}

// writeResource prints one resource with "<prop> not specified" for unset
// properties, TAB-indented under its header.
func writeResource(w io.Writer, r *zcRes) {
	fmt.Fprintf(w, "%s:\n", r.rt)
	for _, p := range resourceProps[r.rt] {
		switch {
		case r.rt == "fs" && p == "options":
			fmt.Fprintf(w, "\toptions: [%s]\n", strings.Join(r.options, ","))
		case r.rt == "rctl" && p == "value":
			for _, v := range r.values {
				fmt.Fprintf(w, "\tvalue: %s\n", v)
			}
		case r.rt == "dedicated-cpu" && p == "importance":
			if v := r.props[p]; v != "" {
				fmt.Fprintf(w, "\t[importance: %s]\n", v)
			}
		case r.rt == "capped-cpu":
			if v := r.props[p]; v != "" {
				n, _ := strconv.ParseFloat(v, 64)
				fmt.Fprintf(w, "\t[ncpus: %.2f]\n", n)
			} else {
				fmt.Fprintf(w, "\tncpus not specified\n")
			}
		case r.rt == "capped-memory":
			if v := r.props[p]; v != "" {
				n, _ := strconv.ParseUint(v, 10, 64)
				if p == "physical" {
					fmt.Fprintf(w, "\tphysical: %s\n", bytesToUnits(n))
				} else {
					fmt.Fprintf(w, "\t[%s: %s]\n", p, bytesToUnits(n))
				}
			}
		default:
			if v := r.props[p]; v != "" {
				fmt.Fprintf(w, "\t%s: %s\n", p, infoValue(v))
			} else if !optionalInfoProps[p] {
				fmt.Fprintf(w, "\t%s not specified\n", p)
			}
		}
	}
}

// writeExport prints a command file that recreates the configuration.
// Resource order follows the spec's example: fs, net, device,
// dedicated-cpu, capped-memory (physical), rctl, attr, dataset, admin.
// capped-cpu and the swap/locked caps are exported as the rctls they are.
func writeExport(w io.Writer, c *ZoneConfig, nativeBrand string) {
	q := quoteZonecfg
	fmt.Fprintln(w, "create -b")
	fmt.Fprintf(w, "set zonepath=%s\n", q(c.Zonepath))
	if c.Brand != nativeBrand {
		fmt.Fprintf(w, "set brand=%s\n", q(c.Brand))
	}
	fmt.Fprintf(w, "set autoboot=%t\n", c.Autoboot)
	for _, kv := range [][2]string{
		{"bootargs", c.Bootargs}, {"pool", c.Pool}, {"limitpriv", c.Limitpriv},
		{"scheduling-class", c.SchedulingClass},
	} {
		if kv[1] != "" {
			fmt.Fprintf(w, "set %s=%s\n", kv[0], q(kv[1]))
		}
	}
	fmt.Fprintf(w, "set ip-type=%s\n", c.IPType)
	for _, kv := range [][2]string{{"hostid", c.Hostid}, {"fs-allowed", c.FSAllowed}} {
		if kv[1] != "" {
			fmt.Fprintf(w, "set %s=%s\n", kv[0], q(kv[1]))
		}
	}
	exportGeneric := func(rt string) {
		for _, r := range c.resources(rt) {
			fmt.Fprintf(w, "add %s\n", rt)
			for _, p := range resourceProps[rt] {
				if rt == "fs" && p == "options" {
					if len(r.Options) > 0 {
						items := make([]string, len(r.Options))
						for i, o := range r.Options {
							items[i] = q(o)
						}
						fmt.Fprintf(w, "add options [%s]\n", strings.Join(items, ","))
					}
					continue
				}
				if v := r.Props[p]; v != "" {
					fmt.Fprintf(w, "set %s=%s\n", p, q(v))
				}
			}
			fmt.Fprintln(w, "end")
		}
	}
	exportGeneric("fs")
	exportGeneric("net")
	exportGeneric("device")
	exportGeneric("dedicated-cpu")
	if c.CappedMemory > 0 {
		fmt.Fprintf(w, "add capped-memory\nset physical=%s\nend\n", bytesToUnits(c.CappedMemory))
	}
	for _, r := range c.Rctls {
		fmt.Fprintf(w, "add rctl\nset name=%s\n", q(r.Name))
		for _, v := range r.Values {
			fmt.Fprintf(w, "add value %s\n", v)
		}
		fmt.Fprintln(w, "end")
	}
	exportGeneric("attr")
	exportGeneric("dataset")
	exportGeneric("admin")
}
