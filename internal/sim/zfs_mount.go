package sim

import (
	"os"
	"strings"
)

// Mounts: a mounted filesystem is a directory under the host root.

// mountDir creates the directory a mounted filesystem appears at.
func mountDir(h *host, st *State, d *Dataset) {
	if st.isMounted(d) {
		mp, _ := st.mountpoint(d)
		os.MkdirAll(h.hostPath(mp), 0o755)
	}
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
