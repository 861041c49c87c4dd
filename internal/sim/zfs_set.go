package sim

import (
	"strconv"
	"strings"
)

// Changing properties: set and inherit.

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
				if real, ok := inv.h.storageUsed(st, d); ok {
					cur = max(cur, real)
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
			inv.h.releaseStorage(st, d)
			moveMount(inv.h, st, d, v)
		}
		if v == "none" && p.numeric {
			delete(d.Props, p.name)
		} else {
			d.Props[p.name] = v
		}
		if storageProps[p.name] {
			if err := inv.h.realiseStorageTree(st, d); err != nil {
				return fail("%s", storageErrText(err))
			}
		}
	}
	return true
}

// storageProps are the properties the kernel enforces (zfs_backing.go).
var storageProps = map[string]bool{"quota": true, "setuid": true, "devices": true, "exec": true, "mountpoint": true}

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
						inv.h.releaseStorage(st, x)
					}
					delete(x.Props, p.name)
				}
			}
			if storageProps[p.name] {
				if err := inv.h.realiseStorageTree(st, d); err != nil {
					inv.h.storageLog("inherit %s on %s: %v", p.name, n, err)
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
