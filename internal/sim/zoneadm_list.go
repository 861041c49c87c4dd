package sim

import (
	"fmt"
	"sort"
	"strings"
)

// zoneadm list: the 7-field parsable lines and the human columns (spec §2.2).

// list [-cipv]
func (c *zoneadmCall) list() int {
	var all, installed, parsable, verbose bool
	for _, a := range c.args {
		if !strings.HasPrefix(a, "-") || len(a) < 2 {
			c.subUsage("list [-cipv]")
			return 2
		}
		for _, ch := range a[1:] {
			switch ch {
			case 'c':
				all = true
			case 'i':
				installed = true
			case 'p':
				parsable = true
			case 'v':
				verbose = true
			default:
				c.subUsage("list [-cipv]")
				return 2
			}
		}
	}
	if c.zone != "" && (all || installed) {
		c.subUsage("list [-cipv]")
		return 2
	}
	if parsable && verbose {
		c.zerror("%s -p and -v are mutually exclusive.", "list")
		return 1
	}
	// Listing one zone reads that zone's file alone; listing all reads
	// every zone file and rewrites none.
	var candidates []*Zone
	if c.zone != "" {
		z, err := c.h.viewZone(c.zone)
		if err != nil {
			return c.stateErr(err)
		}
		if z != nil {
			candidates = []*Zone{z}
		}
	} else {
		all, err := c.h.listZones()
		if err != nil {
			return c.stateErr(err)
		}
		candidates = listOrder(all)
	}
	var zones []*Zone
	for _, z := range candidates {
		switch {
		case c.zone != "":
		case all:
		case installed:
			if stateRank(z.State) < stateRank(stateInstalled) {
				continue
			}
		default:
			if !inKernel(z.State) {
				continue
			}
		}
		zones = append(zones, z)
	}
	if verbose {
		c.outf("%*s %-16s %-10s %-30s %-8s %-6s", 4, "ID", "NAME", "STATUS", "PATH", "BRAND", "IP")
	}
	for _, z := range zones {
		id := "-"
		if z.ID >= 0 {
			id = fmt.Sprint(z.ID)
		}
		ip := "shared"
		if z.Config.exclusive() {
			ip = "excl"
		}
		switch {
		case parsable:
			c.outf("%s:%s:%s:%s:%s:%s:%s", id, z.Name, z.State,
				strings.ReplaceAll(z.Config.Zonepath, ":", `\:`), z.UUID, z.Config.Brand, ip)
		case verbose:
			c.outf("%*s %-16s %-10s %-30s %-8s %-6s", 4, id, z.Name, z.State, z.Config.Zonepath, z.Config.Brand, ip)
		default:
			c.outf("%s", z.Name)
		}
	}
	return 0
}

// listOrder is zoneadm's order: zones in the kernel by id, then the rest in
// index order (the order zones come in).
func listOrder(zones []*Zone) []*Zone {
	var kernel, rest []*Zone
	for _, z := range zones {
		if z.ID >= 0 {
			kernel = append(kernel, z)
		} else {
			rest = append(rest, z)
		}
	}
	sort.SliceStable(kernel, func(i, j int) bool { return kernel[i].ID < kernel[j].ID })
	return append(kernel, rest...)
}
