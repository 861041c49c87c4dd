package sim

import (
	"os"
	"strconv"
	"strings"
)

// Making and removing datasets: create, destroy, snapshot, clone, rename.

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
			inv.h.realiseStorage(st, st.dataset(m))
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
		if err := inv.h.realiseStorage(st, d); err != nil {
			inv.errf("cannot create '%s': %s", name, storageErrText(err))
			inv.h.dropStorage(st, d)
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
		if err := inv.h.realiseStorage(st, d); err != nil {
			inv.errf("cannot create '%s': %s", dst, storageErrText(err))
			code = 1
			return true // the clone stands, as zfs leaves it when a property fails
		}
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
		inv.h.releaseStorage(st, d)
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
		if err := inv.h.realiseStorageTree(st, d); err != nil {
			inv.h.storageLog("rename %s to %s: %v", from, to, err)
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	return code
}
