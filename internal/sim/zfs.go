package sim

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// zfs: errors are "cannot <verb> '<name>': <reason>" with exit 1; usage
// errors exit 2 (spec §11).

var zfsUsage = map[string]string{
	"create":   "\tcreate [-p] [-o property=value] ... <filesystem>\n\tcreate [-ps] [-b blocksize] [-o property=value] ... -V <size> <volume>",
	"destroy":  "\tdestroy [-fnpRrv] <filesystem|volume>\n\tdestroy [-dnpRrv] <filesystem|volume>@<snap>[%<snap>][,...]",
	"snapshot": "\tsnapshot [-r] [-o property=value] ... <filesystem|volume>@<snap> ...",
	"clone":    "\tclone [-p] [-o property=value] ... <snapshot> <filesystem|volume>",
	"list": "\tlist [-Hp] [-r|-d max] [-o property[,...]] [-s property]...\n" +
		"\t    [-S property]... [-t type[,...]] [filesystem|volume|snapshot] ...",
	"get": "\tget [-rHp] [-d max] [-o \"all\" | field[,...]]\n" +
		"\t    [-t type[,...]] [-s source[,...]]\n\t    <\"all\" | property[,...]> [filesystem|volume|snapshot] ...",
	"set":     "\tset <property=value> ... <filesystem|volume|snapshot> ...",
	"inherit": "\tinherit [-rS] <property> <filesystem|volume|snapshot> ...",
	"mount":   "\tmount\n\tmount [-vO] [-o opts] <-a | filesystem>",
	"unmount": "\tunmount [-f] <-a | filesystem|mountpoint>",
	"rename":  "\trename [-f] <filesystem|volume|snapshot> <filesystem|volume|snapshot>\n\trename [-f] -p <filesystem|volume> <filesystem|volume>\n\trename -r <snapshot> <snapshot>",
	"send":    "\tsend [-DnPpRvLec] [-[iI] snapshot] <snapshot>",
	"receive": "\treceive [-vnsFu] [-o <property>=<value>] ... <filesystem|volume|snapshot>\n\treceive [-vnsFu] [-o <property>=<value>] ... [-d | -e] <filesystem>",
}

func runZfs(inv *invocation) int {
	if len(inv.args) == 0 {
		inv.errf("usage: zfs command args ...\nwhere 'command' is one of the following:\n")
		for _, k := range []string{"create", "destroy", "snapshot", "clone", "list", "get", "set", "inherit", "mount", "unmount", "rename", "send", "receive"} {
			inv.errf("%s", zfsUsage[k])
		}
		return 2
	}
	sub, args := inv.args[0], inv.args[1:]
	handlers := map[string]func(*invocation, []string) int{
		"create": zfsCreate, "destroy": zfsDestroy, "snapshot": zfsSnapshot, "snap": zfsSnapshot,
		"clone": zfsClone, "list": zfsList, "get": zfsGet, "set": zfsSet, "inherit": zfsInherit,
		"mount": zfsMount, "unmount": zfsUnmount, "umount": zfsUnmount, "rename": zfsRename,
		"send": zfsSend, "receive": zfsReceive, "recv": zfsReceive,
	}
	h, ok := handlers[sub]
	if !ok {
		inv.errf("unrecognized command '%s'", sub)
		inv.errf("usage: zfs command args ...")
		return 2
	}
	return h(inv, args)
}

func zfsUsageErr(inv *invocation, sub string, why string) int {
	if why != "" {
		inv.errf("%s", why)
	}
	inv.errf("usage:\n%s", zfsUsage[sub])
	return 2
}

// zfsOperandErr is the usage error of a subcommand that takes exactly one
// operand (what) but was given n.
func zfsOperandErr(inv *invocation, sub, what string, n int) int {
	why := "missing " + what + " argument"
	if n > 1 {
		why = "too many arguments"
	}
	return zfsUsageErr(inv, sub, why)
}

func badOption(inv *invocation, sub string, c byte) int {
	return zfsUsageErr(inv, sub, fmt.Sprintf("invalid option '%c'", c))
}

// parseProps parses -o prop=value options for create, snapshot and clone.
func parseCreateProps(inv *invocation, sub string, opts []opt) (map[string]string, int, bool) {
	props := map[string]string{}
	for _, o := range opts {
		if o.c != 'o' {
			continue
		}
		k, v, ok := strings.Cut(o.val, "=")
		if !ok {
			inv.errf("missing '=' for property=value argument")
			inv.errf("usage:\n%s", zfsUsage[sub])
			return nil, 2, false
		}
		props[k] = v
	}
	return props, 0, true
}

// applyProps validates and stores properties on a new dataset.
func applyProps(inv *invocation, verb, name string, d *Dataset, props map[string]string) bool {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p, ok := lookupZfsProp(k)
		if !ok {
			inv.errf("cannot %s '%s': invalid property '%s'", verb, name, k)
			return false
		}
		if !strings.Contains(p.types, typeLetter(d.Type)) {
			inv.errf("cannot %s '%s': '%s' does not apply to datasets of this type", verb, name, k)
			return false
		}
		v, why := validatePropValue(p, props[k])
		if why != "" {
			inv.errf("cannot %s '%s': %s", verb, name, why)
			return false
		}
		if v == "none" && p.numeric {
			delete(d.Props, p.name)
			continue
		}
		d.Props[p.name] = v
	}
	return true
}

// zfs create [-p] [-o p=v]... FS | create [-ps] [-b bs] [-o p=v]... -V SIZE VOL
func zfsCreate(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "po:V:sb:")
	if !ok {
		return badOption(inv, "create", bad)
	}
	if len(rest) != 1 {
		return zfsOperandErr(inv, "create", "filesystem", len(rest))
	}
	name := rest[0]
	props, code, ok := parseCreateProps(inv, "create", opts)
	if !ok {
		return code
	}
	var parents, sparse bool
	var volSize uint64
	isVol := false
	for _, o := range opts {
		switch o.c {
		case 'p':
			parents = true
		case 's':
			sparse = true
		case 'b':
			props["volblocksize"] = o.val
		case 'V':
			n, ok := parseZfsSize(o.val)
			if !ok {
				inv.errf("bad volume size '%s': bad numeric value '%s'", o.val, o.val)
				return 2
			}
			volSize, isVol = n, true
		}
	}
	if why := datasetNameProblem(name); why != "" || strings.Contains(name, "@") {
		if why == "" {
			why = "snapshot delimiter '@' is not expected here"
		}
		inv.errf("cannot create '%s': %s", name, why)
		return 1
	}
	code = 0
	err := inv.h.update(func(st *State) bool {
		if st.dataset(name) != nil {
			if parents {
				return false
			}
			inv.errf("cannot create '%s': dataset already exists", name)
			code = 1
			return false
		}
		pool := poolOf(name)
		if st.dataset(pool) == nil {
			inv.errf("cannot create '%s': no such pool '%s'", name, pool)
			code = 1
			return false
		}
		parent := st.dataset(parentName(name))
		var missing []string
		if parent == nil {
			if !parents {
				inv.errf("cannot create '%s': parent does not exist", name)
				code = 1
				return false
			}
			for p := parentName(name); st.dataset(p) == nil; p = parentName(p) {
				missing = append([]string{p}, missing...)
			}
			if anc := st.dataset(parentName(missing[0])); anc != nil && anc.Type != "filesystem" {
				inv.errf("cannot create '%s': parent is not a filesystem", name)
				code = 1
				return false
			}
		} else if parent.Type != "filesystem" {
			inv.errf("cannot create '%s': parent is not a filesystem", name)
			code = 1
			return false
		}
		typ := "filesystem"
		if isVol {
			typ = "volume"
		}
		d := newDataset(name, typ)
		if isVol {
			d.VolSize = volSize
			d.Refer = 8192
			if !sparse {
				d.Props["refreservation"] = strconv.FormatUint(volSize, 10)
			}
		}
		if !applyProps(inv, "create", name, d, props) {
			code = 1
			return false
		}
		if isVol && d.VolSize+st.used(st.dataset(pool)) > inv.h.facts.poolSize(pool) && !sparse {
			inv.errf("cannot create '%s': out of space", name)
			code = 1
			return false
		}
		for _, m := range missing {
			st.Datasets = append(st.Datasets, newDataset(m, "filesystem"))
			mountDir(inv.h, st, st.dataset(m))
		}
		if isVol {
			if err := inv.h.makeZvolDevice(name, d.VolSize); err != nil {
				inv.errf("cannot create '%s': %s", name, strerror(err))
				code = 1
				return false
			}
		}
		st.Datasets = append(st.Datasets, d)
		mountDir(inv.h, st, d)
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// mountDir creates the directory a mounted filesystem appears at.
func mountDir(h *host, st *State, d *Dataset) {
	if st.isMounted(d) {
		mp, _ := st.mountpoint(d)
		os.MkdirAll(h.hostPath(mp), 0o755)
	}
}

// zfs destroy [-fnprRv] NAME
func zfsDestroy(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "dfnprRv")
	if !ok {
		return badOption(inv, "destroy", bad)
	}
	if len(rest) != 1 {
		return zfsOperandErr(inv, "destroy", "dataset", len(rest))
	}
	var recursive, clones, dry, verbose bool
	for _, o := range opts {
		switch o.c {
		case 'r':
			recursive = true
		case 'R':
			recursive, clones = true, true
		case 'n':
			dry = true
		case 'v', 'p':
			verbose = true
		}
	}
	name := rest[0]
	code := 0
	err := inv.h.update(func(st *State) bool {
		d := st.dataset(name)
		if d == nil {
			if strings.Contains(name, "@") {
				inv.errf("could not find any snapshots to destroy; check snapshot names.")
			} else {
				inv.errf("cannot open '%s': dataset does not exist", name)
			}
			code = 1
			return false
		}
		if parentName(name) == "" {
			inv.errf("cannot destroy '%s': operation does not apply to pools", name)
			inv.errf("use 'zfs destroy -r %s' to destroy all datasets in the pool", name)
			inv.errf("use 'zpool destroy %s' to destroy the pool itself", name)
			code = 1
			return false
		}
		doomed, ok := destroySet(inv, st, d, recursive, clones)
		if !ok {
			code = 1
			return false
		}
		held := heldDatasets(st)
		for _, x := range doomed {
			if _, busy := held[x.Name]; busy {
				inv.errf("cannot destroy '%s': dataset is busy", x.Name)
				code = 1
				return false
			}
		}
		if verbose {
			verb := "will destroy"
			if dry {
				verb = "would destroy"
			}
			for _, x := range doomed {
				inv.outf("%s %s", verb, x.Name)
			}
		}
		if dry {
			return false
		}
		removeDatasets(inv.h, st, doomed)
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// destroySet computes what a destroy removes, refusing children without
// -r and dependent clones without -R.
func destroySet(inv *invocation, st *State, d *Dataset, recursive, clones bool) ([]*Dataset, bool) {
	set := map[string]*Dataset{d.Name: d}
	var descendants []*Dataset
	for _, x := range st.Datasets {
		if isDescendant(x.Name, d.Name) {
			descendants = append(descendants, x)
		}
	}
	sortDatasets(descendants)
	if len(descendants) > 0 && !recursive {
		kind := "filesystem"
		if d.Type == "volume" {
			kind = "volume"
		}
		inv.errf("cannot destroy '%s': %s has children", d.Name, kind)
		inv.errf("use '-r' to destroy the following datasets:")
		for _, x := range descendants {
			inv.errf("%s", x.Name)
		}
		return nil, false
	}
	for _, x := range descendants {
		set[x.Name] = x
	}
	// Clones of doomed snapshots, transitively.
	for changed := true; changed; {
		changed = false
		for _, x := range st.Datasets {
			if _, in := set[x.Name]; in || x.Origin == "" {
				continue
			}
			if _, originDoomed := set[x.Origin]; !originDoomed {
				continue
			}
			if !clones {
				inv.errf("cannot destroy '%s': snapshot has dependent clones", x.Origin)
				inv.errf("use '-R' to destroy the following datasets:")
				for _, c := range st.Datasets {
					if c.Origin == x.Origin {
						inv.errf("%s", c.Name)
					}
				}
				return nil, false
			}
			for _, y := range st.Datasets {
				if y.Name == x.Name || isDescendant(y.Name, x.Name) {
					set[y.Name] = y
				}
			}
			changed = true
		}
	}
	out := make([]*Dataset, 0, len(set))
	for _, x := range set {
		out = append(out, x)
	}
	sortDatasets(out)
	return out, true
}

// zfs snapshot [-r] [-o p=v] FS@SNAP...
func zfsSnapshot(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "ro:")
	if !ok {
		return badOption(inv, "snapshot", bad)
	}
	if len(rest) == 0 {
		return zfsUsageErr(inv, "snapshot", "missing snapshot argument")
	}
	props, code, ok := parseCreateProps(inv, "snapshot", opts)
	if !ok {
		return code
	}
	recursive := false
	for _, o := range opts {
		if o.c == 'r' {
			recursive = true
		}
	}
	err := inv.h.update(func(st *State) bool {
		for _, name := range rest {
			base, snap, hasAt := strings.Cut(name, "@")
			if why := datasetNameProblem(name); why != "" || !hasAt || snap == "" {
				if why == "" {
					why = "missing '@' delimiter in snapshot name"
				}
				inv.errf("cannot create snapshot '%s': %s", name, why)
				code = 1
				return false
			}
			src := st.dataset(base)
			if src == nil || src.Type == "snapshot" {
				inv.errf("cannot open '%s': dataset does not exist", base)
				inv.errf("usage:\n%s", zfsUsage["snapshot"])
				code = 1
				return false
			}
			targets := []*Dataset{src}
			if recursive {
				for _, d := range st.Datasets {
					if d.Type != "snapshot" && isDescendant(d.Name, base) {
						targets = append(targets, d)
					}
				}
			}
			for _, t := range targets {
				if st.dataset(t.Name+"@"+snap) != nil {
					inv.errf("cannot create snapshot '%s@%s': dataset already exists", t.Name, snap)
					code = 1
					return false
				}
			}
			for _, t := range targets {
				s := takeSnapshot(inv.h, st, t, t.Name+"@"+snap)
				for k, v := range props {
					if isUserProp(k) {
						s.Props[k] = v
					}
				}
			}
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// zfs clone [-p] [-o p=v] SNAP FS
func zfsClone(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "po:")
	if !ok {
		return badOption(inv, "clone", bad)
	}
	if len(rest) != 2 {
		return zfsUsageErr(inv, "clone", "missing source dataset argument")
	}
	props, code, ok := parseCreateProps(inv, "clone", opts)
	if !ok {
		return code
	}
	parents := false
	for _, o := range opts {
		if o.c == 'p' {
			parents = true
		}
	}
	src, dst := rest[0], rest[1]
	err := inv.h.update(func(st *State) bool {
		s := st.dataset(src)
		if s == nil {
			inv.errf("cannot open '%s': dataset does not exist", src)
			code = 1
			return false
		}
		if s.Type != "snapshot" {
			inv.errf("cannot open '%s': operation only applies to snapshots", src)
			code = 1
			return false
		}
		if why := datasetNameProblem(dst); why != "" || strings.Contains(dst, "@") {
			if why == "" {
				why = "snapshot delimiter '@' is not expected here"
			}
			inv.errf("cannot create '%s': %s", dst, why)
			code = 1
			return false
		}
		if st.dataset(dst) != nil {
			inv.errf("cannot create '%s': dataset already exists", dst)
			code = 1
			return false
		}
		if poolOf(dst) != poolOf(src) {
			inv.errf("cannot create '%s': source and target pools differ", dst)
			code = 1
			return false
		}
		if st.dataset(parentName(dst)) == nil {
			if !parents {
				inv.errf("cannot create '%s': parent does not exist", dst)
				code = 1
				return false
			}
			var missing []string
			for p := parentName(dst); st.dataset(p) == nil; p = parentName(p) {
				missing = append([]string{p}, missing...)
			}
			for _, m := range missing {
				st.Datasets = append(st.Datasets, newDataset(m, "filesystem"))
				mountDir(inv.h, st, st.dataset(m))
			}
		}
		typ := "filesystem"
		origin := st.dataset(parentName(src))
		if origin != nil && origin.Type == "volume" {
			typ = "volume"
		}
		d := newDataset(dst, typ)
		d.Origin, d.Refer = src, s.Refer
		if typ == "volume" {
			d.VolSize = origin.VolSize
			if bs, ok := origin.Props["volblocksize"]; ok {
				d.Props["volblocksize"] = bs
			}
		}
		if !applyProps(inv, "create", dst, d, props) {
			code = 1
			return false
		}
		if typ == "volume" {
			err := copySparse(inv.h.snapshotVolData(src), inv.h.zvolPath(dst), d.VolSize)
			if err == nil {
				err = inv.h.makeZvolDevice(dst, d.VolSize)
			}
			if err != nil {
				inv.errf("cannot create '%s': %s", dst, strerror(err))
				code = 1
				return false
			}
		}
		st.Datasets = append(st.Datasets, d)
		if st.isMounted(d) {
			mp, _ := st.mountpoint(d)
			copyTree(inv.h.snapshotDir(src), inv.h.hostPath(mp))
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

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

// zfs set prop=value... NAME...
func zfsSet(inv *invocation, args []string) int {
	var assigns [][2]string
	i := 0
	for ; i < len(args) && strings.Contains(args[i], "="); i++ {
		k, v, _ := strings.Cut(args[i], "=")
		assigns = append(assigns, [2]string{k, v})
	}
	names := args[i:]
	if len(assigns) == 0 {
		return zfsUsageErr(inv, "set", "missing property=value argument(s)")
	}
	if len(names) == 0 {
		return zfsUsageErr(inv, "set", "missing dataset name(s)")
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		changed := false
		for _, name := range names {
			d := st.dataset(name)
			if d == nil {
				inv.errf("cannot open '%s': dataset does not exist", name)
				code = 1
				continue
			}
			if zfsSetOne(inv, st, d, assigns) {
				changed = true
			} else {
				code = 1
			}
		}
		return changed
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

func zfsSetOne(inv *invocation, st *State, d *Dataset, assigns [][2]string) bool {
	fail := func(format string, a ...any) bool {
		inv.errf("cannot set property for '%s': "+format, append([]any{d.Name}, a...)...)
		return false
	}
	for _, kv := range assigns {
		p, ok := lookupZfsProp(kv[0])
		if !ok {
			return fail("invalid property '%s'", kv[0])
		}
		if d.Type == "snapshot" && !isUserProp(p.name) {
			return fail("this property can not be modified for snapshots")
		}
		if !strings.Contains(p.types, typeLetter(d.Type)) {
			return fail("'%s' does not apply to datasets of this type", p.name)
		}
		v, why := validatePropValue(p, kv[1])
		if why != "" {
			return fail("%s", why)
		}
		switch p.name {
		case "quota", "refquota":
			if v != "none" {
				n, _ := strconv.ParseUint(v, 10, 64)
				cur := st.used(d)
				if p.name == "refquota" {
					cur = d.Refer
				}
				if n < cur || (p.name == "quota" && n < propBytes(d, "reservation")) {
					return fail("size is less than current used or reserved space")
				}
			}
		case "reservation", "refreservation":
			if v != "none" {
				n, _ := strconv.ParseUint(v, 10, 64)
				if n > st.available(inv.h, d)+max(st.used(d), propBytes(d, p.name)) {
					return fail("size is greater than available space")
				}
			}
		case "volsize":
			n, _ := strconv.ParseUint(v, 10, 64)
			d.VolSize = n
			if err := inv.h.makeZvolDevice(d.Name, n); err != nil {
				return fail("%s", strerror(err))
			}
			if propBytes(d, "refreservation") > 0 {
				d.Props["refreservation"] = v
			}
			continue
		case "mountpoint":
			moveMount(inv.h, st, d, v)
		}
		if v == "none" && p.numeric {
			delete(d.Props, p.name)
			continue
		}
		d.Props[p.name] = v
	}
	return true
}

// moveMount renames the directory of a remounted filesystem.
func moveMount(h *host, st *State, d *Dataset, newMP string) {
	if !st.isMounted(d) {
		return
	}
	old, _ := st.mountpoint(d)
	if !strings.HasPrefix(newMP, "/") || old == newMP {
		return
	}
	if _, err := os.Stat(h.hostPath(newMP)); err == nil {
		return
	}
	os.MkdirAll(h.hostPath(parentDir(newMP)), 0o755)
	os.Rename(h.hostPath(old), h.hostPath(newMP))
}

func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}

// zfs inherit [-r] prop NAME...
func zfsInherit(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "rS")
	if !ok {
		return badOption(inv, "inherit", bad)
	}
	if len(rest) < 2 {
		return zfsUsageErr(inv, "inherit", "missing property argument")
	}
	recursive := false
	for _, o := range opts {
		if o.c == 'r' {
			recursive = true
		}
	}
	p, ok := lookupZfsProp(rest[0])
	if !ok {
		inv.errf("invalid property '%s'", rest[0])
		return zfsUsageErr(inv, "inherit", "")
	}
	if p.readonly || (!p.inherit && !isUserProp(p.name)) {
		inv.errf("'%s' property cannot be inherited", p.name)
		return 1
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		for _, n := range rest[1:] {
			d := st.dataset(n)
			if d == nil {
				inv.errf("cannot open '%s': dataset does not exist", n)
				code = 1
				continue
			}
			for _, x := range st.Datasets {
				if x == d || (recursive && isDescendant(x.Name, n)) {
					if p.name == "mountpoint" {
						delete(x.Props, "mountpoint")
						continue
					}
					delete(x.Props, p.name)
				}
			}
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// zfs mount [-a | FS]
func zfsMount(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "vOao:")
	if !ok {
		return badOption(inv, "mount", bad)
	}
	all := false
	for _, o := range opts {
		if o.c == 'a' {
			all = true
		}
	}
	code := 0
	err := inv.h.update(func(st *State) bool {
		if !all && len(rest) == 0 {
			for _, d := range st.Datasets {
				if st.isMounted(d) {
					mp, _ := st.mountpoint(d)
					inv.outf("%-30s  %s", d.Name, mp)
				}
			}
			return false
		}
		for _, d := range st.Datasets {
			if d.Type != "filesystem" || (!all && !containsStr(rest, d.Name)) {
				continue
			}
			if !all && st.isMounted(d) {
				inv.errf("cannot mount '%s': filesystem already mounted", d.Name)
				code = 1
				continue
			}
			d.Unmounted = false
			mountDir(inv.h, st, d)
		}
		for _, n := range rest {
			if st.dataset(n) == nil {
				inv.errf("cannot open '%s': dataset does not exist", n)
				code = 1
			}
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// zfs unmount [-f] FS|MOUNTPOINT
func zfsUnmount(inv *invocation, args []string) int {
	_, rest, bad, ok := getopt(args, "fa")
	if !ok {
		return badOption(inv, "unmount", bad)
	}
	if len(rest) != 1 {
		return zfsUsageErr(inv, "unmount", "missing filesystem argument")
	}
	target := rest[0]
	code := 0
	err := inv.h.update(func(st *State) bool {
		d := st.dataset(target)
		if d == nil && strings.HasPrefix(target, "/") {
			d = datasetMountedAt(st, target)
		}
		if d == nil {
			inv.errf("cannot open '%s': dataset does not exist", target)
			code = 1
			return false
		}
		if !st.isMounted(d) {
			inv.errf("cannot unmount '%s': not currently mounted", target)
			code = 1
			return false
		}
		if _, busy := heldDatasets(st)[d.Name]; busy {
			mp, _ := st.mountpoint(d)
			inv.errf("cannot unmount '%s': Device busy", mp)
			code = 1
			return false
		}
		d.Unmounted = true
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}

// zfs rename [-p] OLD NEW
func zfsRename(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "fpr")
	if !ok {
		return badOption(inv, "rename", bad)
	}
	if len(rest) != 2 {
		return zfsUsageErr(inv, "rename", "missing target dataset argument")
	}
	parents := false
	for _, o := range opts {
		if o.c == 'p' {
			parents = true
		}
	}
	from, to := rest[0], rest[1]
	code := 0
	err := inv.h.update(func(st *State) bool {
		d := st.dataset(from)
		if d == nil {
			inv.errf("cannot open '%s': dataset does not exist", from)
			code = 1
			return false
		}
		if why := datasetNameProblem(to); why != "" {
			inv.errf("cannot rename to '%s': %s", to, why)
			code = 1
			return false
		}
		if st.dataset(to) != nil {
			inv.errf("cannot rename to '%s': dataset already exists", to)
			code = 1
			return false
		}
		if _, busy := heldDatasets(st)[from]; busy {
			inv.errf("cannot rename '%s': dataset is busy", from)
			code = 1
			return false
		}
		if st.dataset(parentName(to)) == nil {
			if !parents {
				inv.errf("cannot rename to '%s': parent does not exist", to)
				code = 1
				return false
			}
			for p := parentName(to); st.dataset(p) == nil; p = parentName(p) {
				st.Datasets = append(st.Datasets, newDataset(p, "filesystem"))
			}
		}
		oldMP, _ := st.mountpoint(d)
		wasMounted := st.isMounted(d)
		if d.Type == "volume" {
			inv.h.renameZvolDevice(from, to)
		}
		for _, x := range st.Datasets {
			if x.Type == "snapshot" && (strings.HasPrefix(x.Name, from+"@")) {
				os.Rename(inv.h.snapshotDir(x.Name), inv.h.snapshotDir(to+strings.TrimPrefix(x.Name, from)))
			}
		}
		for _, x := range st.Datasets {
			if x.Name == from || isDescendant(x.Name, from) {
				x.Name = to + strings.TrimPrefix(x.Name, from)
			}
			if x.Origin == from || isDescendant(x.Origin, from) {
				x.Origin = to + strings.TrimPrefix(x.Origin, from)
			}
		}
		if wasMounted && st.isMounted(d) {
			if newMP, _ := st.mountpoint(d); newMP != oldMP {
				os.MkdirAll(inv.h.hostPath(parentDir(newMP)), 0o755)
				os.Rename(inv.h.hostPath(oldMP), inv.h.hostPath(newMP))
			}
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}
