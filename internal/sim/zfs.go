package sim

import (
	"fmt"
	"sort"
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
