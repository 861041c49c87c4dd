package sim

import (
	"fmt"
	"strconv"
	"strings"
)

// zpool: just enough to report capacity (list), which is all the host
// layer asks of it.

var zpoolFields = []string{"name", "size", "allocated", "free", "checkpoint", "expandsize", "fragmentation", "capacity", "dedupratio", "health", "altroot"}

var zpoolAliases = map[string]string{
	"alloc": "allocated", "cap": "capacity", "dedup": "dedupratio", "frag": "fragmentation",
	"ckpoint": "checkpoint", "expandsz": "expandsize",
}

var zpoolColumns = map[string]string{
	"name": "NAME", "size": "SIZE", "allocated": "ALLOC", "free": "FREE", "checkpoint": "CKPOINT",
	"expandsize": "EXPANDSZ", "fragmentation": "FRAG", "capacity": "CAP", "dedupratio": "DEDUP",
	"health": "HEALTH", "altroot": "ALTROOT",
}

func runZpool(inv *invocation) int {
	if len(inv.args) == 0 {
		inv.errf("usage: zpool command args ...")
		return 2
	}
	switch inv.args[0] {
	case "list":
		return zpoolList(inv, inv.args[1:])
	}
	inv.errf("unrecognized command '%s'", inv.args[0])
	inv.errf("usage: zpool command args ...")
	return 2
}

func resolvePoolField(f string) (string, bool) {
	if a, ok := zpoolAliases[f]; ok {
		f = a
	}
	return f, containsStr(zpoolFields, f)
}

// poolValue returns one pool property, exact or human.
func poolValue(inv *invocation, st *State, pool, field string, exact bool) string {
	size := inv.h.facts.poolSize(pool)
	var alloc uint64
	if root := st.dataset(pool); root != nil {
		alloc = st.used(root)
	}
	num := func(n uint64) string {
		if exact {
			return strconv.FormatUint(n, 10)
		}
		return nicenum(n)
	}
	switch field {
	case "name":
		return pool
	case "size":
		return num(size)
	case "allocated":
		return num(alloc)
	case "free":
		return num(size - min(alloc, size))
	case "checkpoint", "expandsize", "altroot":
		return "-"
	case "fragmentation":
		if exact {
			return "0"
		}
		return "0%"
	case "capacity":
		c := uint64(0)
		if size > 0 {
			c = alloc * 100 / size
		}
		if exact {
			return strconv.FormatUint(c, 10)
		}
		return fmt.Sprintf("%d%%", c)
	case "dedupratio":
		return "1.00x"
	case "health":
		return "ONLINE"
	}
	return "-"
}

func poolNames(inv *invocation, operands []string) ([]string, int) {
	if len(operands) == 0 {
		var out []string
		for _, p := range inv.h.facts.Pools {
			out = append(out, p.Name)
		}
		return out, 0
	}
	code := 0
	var out []string
	for _, n := range operands {
		if inv.h.facts.poolSize(n) == 0 {
			inv.errf("cannot open '%s': no such pool", n)
			code = 1
			continue
		}
		out = append(out, n)
	}
	return out, code
}

// zpool list [-Hp] [-o field,...] [pool...]
func zpoolList(inv *invocation, args []string) int {
	opts, rest, bad, ok := getopt(args, "Hpo:vLPT:")
	if !ok {
		inv.errf("invalid option '%c'", bad)
		inv.errf("usage:\n\tlist [-Hp] [-o property[,...]] [-T d|u] [pool] ... [interval [count]]")
		return 2
	}
	scripted, exact := false, false
	fields := []string{"name", "size", "allocated", "free", "checkpoint", "expandsize", "fragmentation", "capacity", "dedupratio", "health", "altroot"}
	for _, o := range opts {
		switch o.c {
		case 'H':
			scripted = true
		case 'p':
			exact = true
		case 'o':
			fields = nil
			for _, f := range strings.Split(o.val, ",") {
				full, ok := resolvePoolField(f)
				if !ok {
					inv.errf("invalid property '%s'", f)
					return 2
				}
				fields = append(fields, full)
			}
		}
	}
	pools, code := poolNames(inv, rest)
	var rows [][]string
	if err := inv.h.view(func(st *State) {
		for _, p := range pools {
			row := make([]string, len(fields))
			for i, f := range fields {
				row[i] = poolValue(inv, st, p, f, exact)
			}
			rows = append(rows, row)
		}
	}); err != nil {
		return inv.stateErr(err)
	}
	header := make([]string, len(fields))
	right := make([]bool, len(fields))
	for i, f := range fields {
		header[i] = zpoolColumns[f]
		right[i] = f != "name" && f != "health" && f != "altroot"
	}
	printTable(inv, header, right, rows, scripted)
	return code
}
