package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Reading datasets: list and get, their selection, sorting and tables (spec §11.2).

// typeFilter parses -t.
func typeFilter(spec string) (map[string]bool, string) {
	m := map[string]bool{}
	for _, t := range strings.Split(spec, ",") {
		switch t {
		case "filesystem", "fs":
			m["filesystem"] = true
		case "volume", "vol":
			m["volume"] = true
		case "snapshot", "snap":
			m["snapshot"] = true
		case "bookmark":
			m["bookmark"] = true
		case "all":
			m["filesystem"], m["volume"], m["snapshot"], m["bookmark"] = true, true, true, true
		default:
			return nil, t
		}
	}
	return m, ""
}

// selectDatasets resolves operands with -r/-d and a type filter. Missing
// operands print "cannot open" and make the status 1.
func selectDatasets(inv *invocation, st *State, names []string, recursive bool, depth int, types map[string]bool) ([]*Dataset, int) {
	code := 0
	seen := map[string]bool{}
	var out []*Dataset
	add := func(d *Dataset) {
		if !seen[d.Name] && types[d.Type] {
			seen[d.Name] = true
			out = append(out, d)
		}
	}
	if len(names) == 0 {
		for _, d := range st.Datasets {
			add(d)
		}
		sortDatasets(out)
		return out, 0
	}
	for _, n := range names {
		d := st.dataset(n)
		if d == nil {
			inv.errf("cannot open '%s': dataset does not exist", n)
			code = 1
			continue
		}
		if !recursive {
			// An operand named explicitly is listed whatever its type.
			if !seen[d.Name] {
				seen[d.Name] = true
				out = append(out, d)
			}
			continue
		}
		var group []*Dataset
		for _, x := range st.Datasets {
			if x.Name != n && !isDescendant(x.Name, n) {
				continue
			}
			if depth >= 0 && relDepth(n, x.Name) > depth {
				continue
			}
			group = append(group, x)
		}
		sortDatasets(group)
		for _, x := range group {
			add(x)
		}
	}
	return out, code
}

// relDepth is how far below anc a dataset sits (a snapshot counts one).
func relDepth(anc, name string) int {
	rest := strings.TrimPrefix(name, anc)
	return strings.Count(rest, "/") + strings.Count(rest, "@")
}

// parseFieldList resolves -o for list/get.
func parseFieldList(spec string) ([]zfsProp, string) {
	var out []zfsProp
	for _, f := range strings.Split(spec, ",") {
		p, ok := lookupZfsProp(f)
		if !ok {
			return nil, f
		}
		out = append(out, p)
	}
	return out, ""
}

// zfs list
func zfsList(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "Hpro:d:s:S:t:")
	if !ok {
		return badOption(inv, "list", bad)
	}
	scripted, exact, recursive := false, false, false
	depth := -1
	fieldSpec := "name,used,available,referenced,mountpoint"
	types := map[string]bool{"filesystem": true, "volume": true}
	var sortKeys []opt
	for _, o := range opts {
		switch o.c {
		case 'H':
			scripted = true
		case 'p':
			exact = true
		case 'r':
			recursive = true
		case 'd':
			n, err := strconv.Atoi(o.val)
			if err != nil || n < 0 {
				inv.errf("invalid depth '%s'", o.val)
				return zfsUsageErr(inv, "list", "")
			}
			depth, recursive = n, true
		case 'o':
			fieldSpec = o.val
		case 's', 'S':
			sortKeys = append(sortKeys, o)
		case 't':
			m, badType := typeFilter(o.val)
			if badType != "" {
				inv.errf("invalid type '%s'", badType)
				return zfsUsageErr(inv, "list", "")
			}
			types = m
		}
	}
	fields, badField := parseFieldList(fieldSpec)
	if badField != "" {
		return zfsUsageErr(inv, "list", fmt.Sprintf("bad property list: invalid property '%s'", badField))
	}
	for _, k := range sortKeys {
		if _, ok := lookupZfsProp(k.val); !ok {
			return zfsUsageErr(inv, "list", fmt.Sprintf("invalid property '%s'", k.val))
		}
	}
	var rows [][]string
	code := 0
	err := inv.h.view(func(st *State) {
		ds, c := selectDatasets(inv, st, rest, recursive, depth, types)
		code = c
		sortByKeys(inv.h, st, ds, sortKeys)
		for _, d := range ds {
			row := make([]string, len(fields))
			for i, f := range fields {
				v, _ := st.propValue(inv.h, d, f.name)
				if !exact {
					v = displayValue(f.name, v)
				}
				row[i] = v
			}
			rows = append(rows, row)
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	header := make([]string, len(fields))
	right := make([]bool, len(fields))
	for i, f := range fields {
		header[i] = f.column
		right[i] = f.numeric
	}
	printTable(inv, header, right, rows, scripted)
	return code
}

// sortByKeys applies -s/-S keys (stable, numeric where the property is).
func sortByKeys(h *host, st *State, ds []*Dataset, keys []opt) {
	if len(keys) == 0 {
		return
	}
	sort.SliceStable(ds, func(i, j int) bool {
		for _, k := range keys {
			p, _ := lookupZfsProp(k.val)
			a, _ := st.propValue(h, ds[i], p.name)
			b, _ := st.propValue(h, ds[j], p.name)
			if a == b {
				continue
			}
			var less bool
			an, errA := strconv.ParseUint(a, 10, 64)
			bn, errB := strconv.ParseUint(b, 10, 64)
			if errA == nil && errB == nil {
				less = an < bn
			} else {
				less = a < b
			}
			if k.c == 'S' {
				return !less
			}
			return less
		}
		return false
	})
}

// printTable prints zfs-style output: tabs with -H, else padded columns
// (numbers right-aligned) under a header.
func printTable(inv *invocation, header []string, right []bool, rows [][]string, scripted bool) {
	if scripted {
		for _, r := range rows {
			inv.outf("%s", strings.Join(r, "\t"))
		}
		return
	}
	widths := make([]int, len(header))
	for i, h := range header {
		widths[i] = len(h)
	}
	for _, r := range rows {
		for i, v := range r {
			widths[i] = max(widths[i], len(v))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		for i, v := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			switch {
			case right[i]:
				b.WriteString(fmt.Sprintf("%*s", widths[i], v))
			case i == len(r)-1:
				b.WriteString(v)
			default:
				b.WriteString(fmt.Sprintf("%-*s", widths[i], v))
			}
		}
		inv.outf("%s", strings.TrimRight(b.String(), " "))
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
}

// allPropOrder is what "zfs get all" prints, in order.
var allPropOrder = []string{
	"type", "creation", "used", "available", "referenced", "compressratio", "mounted",
	"origin", "quota", "reservation", "recordsize", "mountpoint", "sharenfs", "checksum",
	"compression", "atime", "devices", "exec", "setuid", "readonly", "zoned", "snapdir",
	"canmount", "xattr", "copies", "version", "volsize", "volblocksize", "sync",
	"logbias", "dedup", "primarycache", "usedbysnapshots", "usedbydataset",
	"usedbychildren", "usedbyrefreservation", "refquota", "refreservation",
	"written", "logicalused", "logicalreferenced", "encryption", "guid",
}

// zfs get
func zfsGet(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "Hprd:o:s:t:")
	if !ok {
		return badOption(inv, "get", bad)
	}
	scripted, exact, recursive := false, false, false
	depth := -1
	columns := []string{"name", "property", "value", "source"}
	types := map[string]bool{"filesystem": true, "volume": true, "snapshot": true}
	var sources map[string]bool
	for _, o := range opts {
		switch o.c {
		case 'H':
			scripted = true
		case 'p':
			exact = true
		case 'r':
			recursive = true
		case 'd':
			n, err := strconv.Atoi(o.val)
			if err != nil || n < 0 {
				return zfsUsageErr(inv, "get", fmt.Sprintf("invalid depth '%s'", o.val))
			}
			depth, recursive = n, true
		case 'o':
			if o.val == "all" {
				columns = []string{"name", "property", "value", "received", "source"}
				continue
			}
			columns = strings.Split(o.val, ",")
			for _, c := range columns {
				if !containsStr([]string{"name", "property", "value", "received", "source"}, c) {
					return zfsUsageErr(inv, "get", fmt.Sprintf("invalid column name '%s'", c))
				}
			}
		case 's':
			sources = map[string]bool{}
			for _, s := range strings.Split(o.val, ",") {
				if !containsStr([]string{"local", "default", "inherited", "temporary", "received", "none"}, s) {
					return zfsUsageErr(inv, "get", fmt.Sprintf("invalid source '%s'", s))
				}
				sources[s] = true
			}
		case 't':
			m, badType := typeFilter(o.val)
			if badType != "" {
				return zfsUsageErr(inv, "get", fmt.Sprintf("invalid type '%s'", badType))
			}
			types = m
		}
	}
	if len(rest) == 0 {
		return zfsUsageErr(inv, "get", "missing property argument")
	}
	propSpec, names := rest[0], rest[1:]
	var props []string
	all := propSpec == "all"
	if !all {
		for _, p := range strings.Split(propSpec, ",") {
			zp, ok := lookupZfsProp(p)
			if !ok {
				return zfsUsageErr(inv, "get", fmt.Sprintf("bad property list: invalid property '%s'", p))
			}
			props = append(props, zp.name)
		}
	}
	var rows [][]string
	code := 0
	err := inv.h.view(func(st *State) {
		ds, c := selectDatasets(inv, st, names, recursive, depth, types)
		code = c
		for _, d := range ds {
			list := props
			if all {
				list = nil
				for _, p := range allPropOrder {
					zp, _ := lookupZfsProp(p)
					if strings.Contains(zp.types, typeLetter(d.Type)) {
						list = append(list, p)
					}
				}
				list = append(list, userPropsOf(st, d)...)
			}
			for _, p := range list {
				v, src := st.propValue(inv.h, d, p)
				if sources != nil && !sourceMatches(sources, src) {
					continue
				}
				if !exact {
					v = displayValue(p, v)
				}
				row := make([]string, len(columns))
				for i, c := range columns {
					switch c {
					case "name":
						row[i] = d.Name
					case "property":
						row[i] = p
					case "value":
						row[i] = v
					case "received":
						row[i] = "-"
					case "source":
						row[i] = src
					}
				}
				rows = append(rows, row)
			}
		}
	})
	if err != nil {
		return inv.stateErr(err)
	}
	header := make([]string, len(columns))
	right := make([]bool, len(columns))
	for i, c := range columns {
		header[i] = strings.ToUpper(c)
	}
	printTable(inv, header, right, rows, scripted)
	return code
}

func sourceMatches(want map[string]bool, src string) bool {
	switch {
	case src == "local", src == "default", src == "temporary", src == "received":
		return want[src]
	case strings.HasPrefix(src, "inherited"):
		return want["inherited"]
	}
	return want["none"]
}

// userPropsOf lists user properties set on the dataset or its ancestors.
func userPropsOf(st *State, d *Dataset) []string {
	seen := map[string]bool{}
	for n := d.Name; n != ""; n = parentName(n) {
		if x := st.dataset(n); x != nil {
			for k := range x.Props {
				if isUserProp(k) {
					seen[k] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
