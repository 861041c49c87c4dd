package sim

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
)

// svcs runs inside a zone, or in the global zone for one zone (-z ZONE)
// or for every zone in the kernel (-Z). Every zone has its own repository
// on illumos; the simulator keeps them all in the host state, so one read
// serves all the zones of a -Z run.

const svcsUsage = `Usage: svcs [-aHpv] [-o col[,col ... ]] [-R restarter] [-sS col] [-Z | -z zone ]
            [<service> ...]
       svcs -d | -D [-Hpv] [-o col[,col ... ]] [-sS col] [-Z | -z zone ]
            [<service> ...]
       svcs [-l | -L] [-Z | -z zone] <service> ...
       svcs -x [-v] [-Z | -z zone] [<service> ...]
       svcs -?`

// svcRow is one instance as svcs prints it.
type svcRow struct {
	zone  string
	state string
	stime time.Time
	fmri  string
	pid   int
	svc   *Service
}

var svcsColumns = map[string]struct {
	header string
	width  int
}{
	"state": {"STATE", 14}, "nstate": {"NSTATE", 13}, "stime": {"STIME", 8}, "fmri": {"FMRI", 50},
	"ctid": {"CTID", 6}, "scope": {"SCOPE", 20}, "svc": {"SVC", 20}, "inst": {"INST", 20},
	"sta": {"STA", 4}, "nsta": {"NSTA", 4}, "desc": {"DESC", 100}, "zone": {"ZONE", 16},
}

// stateSortKey is the order svcs sorts states in (sortkey_states).
func stateSortKey(state string) int {
	switch state {
	case "legacy_run":
		return 0
	case "disabled":
		return 1
	case "online":
		return 2
	case "degraded":
		return 3
	case "offline":
		return 4
	case "maintenance":
		return 5
	case "uninitialized":
		return 6
	}
	return 7
}

// svcsArgs is a parsed svcs command line.
type svcsArgs struct {
	all, noHeader, procs bool
	mode                 byte // 0 for the listing, or 'l', 'L', 'x'
	cols                 []string
	zone                 string // -z
	allZones             bool   // -Z
	patterns             []string
}

// svcsZone is what svcs sees of one zone's repository.
type svcsZone struct {
	name string
	// named is set when the zone was addressed with -z or -Z: -l and -x
	// then name it.
	named bool
	// logRoot prefixes log paths: the zone's root seen from the global
	// zone, empty inside the zone.
	logRoot string
	rows    []svcRow
}

// svcs [-aHpv] [-o col,...] [-Z | -z ZONE] [FMRI...] | -l | -L | -x
func runSvcs(inv *invocation) int {
	a, code, ok := parseSvcsArgs(inv)
	if !ok {
		return code
	}
	zones, ok, err := svcsZones(inv, a)
	if err != nil {
		return inv.stateErr(err)
	}
	if !ok {
		return 1
	}
	if a.mode == 'l' && len(a.patterns) == 0 {
		return svcsUsageErr(inv)
	}
	if a.mode == 0 {
		return svcsList(inv, a, zones)
	}
	return svcsEach(inv, a, zones)
}

// parseSvcsArgs checks options the way svcs does: the mode first, then
// the others in order, so that -z inside a zone fails before a usage
// error that follows it. ok false means exit with code.
func parseSvcsArgs(inv *invocation) (a svcsArgs, code int, ok bool) {
	opts, rest, bad, ok := getopt(inv.args, "aHpvo:s:S:lLxZz:")
	if !ok {
		inv.errf("svcs: illegal option -- %c", bad)
		return a, svcsUsageErr(inv), false
	}
	for _, o := range opts {
		if strings.IndexByte("lLx", o.c) < 0 {
			continue
		}
		if a.mode != 0 {
			return a, svcsUsageErr(inv), false
		}
		a.mode = o.c
	}
	verbose := false
	for _, o := range opts {
		usage := false
		switch o.c {
		case 'a':
			usage, a.all = a.mode != 0, true
		case 'H':
			usage, a.noHeader = a.mode == 'l' || a.mode == 'x', true
		case 'p':
			usage, a.procs = a.mode == 'x', true
		case 'v':
			verbose = true
		case 's', 'S':
			usage = a.mode != 0
		case 'o':
			usage = a.mode == 'l' || a.mode == 'x'
			a.cols = strings.Split(strings.ToLower(o.val), ",")
			for _, c := range a.cols {
				if _, known := svcsColumns[c]; !known && !usage {
					inv.errf("svcs: Unrecognized column \"%s\".", c)
					return a, 2, false
				}
			}
		case 'z', 'Z':
			if inv.zone != "global" {
				inv.errf("svcs: svcs -%c may only be used from the global zone", o.c)
				return a, 1, false
			}
			if o.c == 'z' {
				usage, a.zone = a.allZones, o.val
			} else {
				usage, a.allZones = a.zone != "", true
			}
		}
		if usage {
			return a, svcsUsageErr(inv), false
		}
	}
	if a.cols == nil {
		a.cols = []string{"state", "stime", "fmri"}
		if verbose {
			a.cols = []string{"state", "nstate", "stime", "ctid", "fmri"}
		}
		if a.allZones {
			a.cols = append([]string{"zone"}, a.cols...)
		}
	}
	if a.all && len(rest) > 0 {
		inv.errf("svcs: -a ignored when used with arguments.")
	}
	a.patterns = rest
	return a, 0, true
}

func svcsUsageErr(inv *invocation) int {
	inv.errf("%s", svcsUsage)
	return 2
}

// svcsZones loads the zones the command looks at: the one zone's file
// alone, or for -Z every zone's, without locks (svcs never writes). Under
// -Z a zone in the kernel whose repository is not up (ready, shutting
// down) gets a warning and is skipped; zones not in the kernel are not
// looked at.
func svcsZones(inv *invocation, a svcsArgs) ([]svcsZone, bool, error) {
	switch {
	case a.allZones:
		zones, err := inv.h.listZones()
		if err != nil {
			return nil, false, err
		}
		var out []svcsZone
		for _, z := range zonesByID(zones) {
			if z.State != stateRunning {
				if inKernel(z.State) {
					inv.errf("svcs: Could not bind to repository server for zone %s: repository server unavailable", z.Name)
				}
				continue
			}
			out = append(out, svcsZoneOf(z, true))
		}
		return out, true, nil
	case a.zone != "":
		z, err := inv.h.viewZone(a.zone)
		if err != nil {
			return nil, false, err
		}
		if z == nil {
			inv.errf("svcs: invalid zone '%s'", a.zone)
			return nil, false, nil
		}
		if z.State != stateRunning {
			inv.errf("svcs: Could not bind to repository server for zone %s: repository server unavailable", z.Name)
			return nil, false, nil
		}
		return []svcsZone{svcsZoneOf(z, true)}, true, nil
	}
	z, err := inv.h.viewZone(inv.zone)
	if err != nil {
		return nil, false, err
	}
	z, ok := smfZone(inv, z)
	if !ok {
		return nil, false, nil
	}
	return []svcsZone{svcsZoneOf(z, false)}, true, nil
}

// zonesByID puts zones (in index order) in zone id order, the order -Z
// visits them.
func zonesByID(zones []*Zone) []*Zone {
	sort.SliceStable(zones, func(i, j int) bool { return zones[i].ID < zones[j].ID })
	return zones
}

func svcsZoneOf(z *Zone, named bool) svcsZone {
	v := svcsZone{name: z.Name, named: named, rows: svcsRows(z)}
	if named && z.Name != "global" {
		v.logRoot = path.Join(z.Config.Zonepath, "root")
	}
	return v
}

// svcsRows are a zone's instances; the global zone's fixed services have
// been online since the host booted (the global zone's Booted).
func svcsRows(z *Zone) []svcRow {
	var rows []svcRow
	names := builtinServices
	if z.Name == "global" {
		names = globalServices
	}
	for _, f := range names {
		rows = append(rows, svcRow{zone: z.Name, state: "online", stime: z.Booted, fmri: f})
	}
	for _, s := range z.Services {
		rows = append(rows, svcRow{zone: z.Name, state: s.State, stime: s.STime, fmri: s.FMRI, pid: s.PID, svc: s})
	}
	return rows
}

// selectRows picks what svcs reports of one zone: each instance matching
// a pattern once, and the patterns that matched nothing; without patterns
// the enabled instances, or all of them with -a.
func selectRows(rows []svcRow, patterns []string, all bool) (sel []svcRow, missed []string) {
	if len(patterns) == 0 {
		for _, r := range rows {
			if all || r.state != "disabled" {
				sel = append(sel, r)
			}
		}
		return sel, nil
	}
	seen := map[string]bool{}
	for _, p := range patterns {
		n := 0
		for _, r := range rows {
			if matchFMRI(p, r.fmri) {
				n++
				if !seen[r.fmri] {
					seen[r.fmri] = true
					sel = append(sel, r)
				}
			}
		}
		if n == 0 {
			missed = append(missed, p)
		}
	}
	return sel, missed
}

// sortRows applies svcs' default sort: zone (under -Z), state, stime, FMRI.
func sortRows(rows []svcRow, byZone bool) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if byZone && a.zone != b.zone {
			return a.zone < b.zone
		}
		if ka, kb := stateSortKey(a.state), stateSortKey(b.state); ka != kb {
			return ka < kb
		}
		if !a.stime.Equal(b.stime) {
			return a.stime.Before(b.stime)
		}
		return a.fmri < b.fmri
	})
}

func reportMisses(inv *invocation, patterns []string) {
	for _, p := range patterns {
		inv.errf("svcs: Pattern '%s' doesn't match any instances", p)
	}
}

// svcsList prints the table of every zone looked at, header once. Under -Z
// pattern misses are not reported, and the exit status is 1 only when no
// zone matched every pattern.
func svcsList(inv *invocation, a svcsArgs, zones []svcsZone) int {
	var rows []svcRow
	code := 0
	if a.allZones {
		code = 1
	}
	for _, z := range zones {
		sel, missed := selectRows(z.rows, a.patterns, a.all)
		rows = append(rows, sel...)
		switch {
		case a.allZones && len(missed) == 0:
			code = 0
		case !a.allZones && len(missed) > 0:
			reportMisses(inv, missed)
			code = 1
		}
	}
	sortRows(rows, a.allZones)
	svcsTable(inv, rows, a.cols, a.noHeader, a.procs)
	return code
}

// svcsEach prints -l, -L or -x output zone by zone. Under -Z, -l ignores
// misses like the listing; -L and -x report them and stop at that zone,
// as svcs does.
func svcsEach(inv *invocation, a svcsArgs, zones []svcsZone) int {
	ignoreMisses := a.allZones && a.mode == 'l'
	code := 0
	if ignoreMisses {
		code = 1
	}
	first := true
	for _, z := range zones {
		sel, missed := selectRows(z.rows, a.patterns, true)
		sortRows(sel, false)
		switch a.mode {
		case 'l':
			first = svcsLong(inv, z, sel, first)
		case 'L':
			for _, r := range sel {
				inv.outf("%s", z.logRoot+svcLogPath(r.fmri))
			}
		case 'x':
			first = svcsExplain(inv, z, sel, len(a.patterns) > 0, first)
		}
		if ignoreMisses {
			if len(missed) == 0 {
				code = 0
			}
			continue
		}
		if len(missed) > 0 {
			reportMisses(inv, missed)
			return 1
		}
	}
	return code
}

func svcsTable(inv *invocation, rows []svcRow, cols []string, noHeader, procs bool) {
	line := func(vals []string) {
		var b strings.Builder
		for i, v := range vals {
			switch {
			case i == len(vals)-1:
				b.WriteString(v) // trailing blanks trimmed
			case cols[i] == "ctid":
				fmt.Fprintf(&b, "%*s ", svcsColumns[cols[i]].width, v)
			default:
				fmt.Fprintf(&b, "%-*s ", svcsColumns[cols[i]].width, v)
			}
		}
		inv.outf("%s", b.String())
	}
	if !noHeader {
		hdr := make([]string, len(cols))
		for i, c := range cols {
			hdr[i] = svcsColumns[c].header
		}
		line(hdr)
	}
	for _, r := range rows {
		vals := make([]string, len(cols))
		for i, c := range cols {
			vals[i] = svcsValue(r, c)
		}
		line(vals)
		if procs && r.pid > 0 {
			for _, p := range groupMembers(r.pid) {
				inv.outf("               %-8s %8d %s", formatSTime(r.stime), p, procComm(p))
			}
		}
	}
}

func svcsValue(r svcRow, col string) string {
	svc, inst, _ := strings.Cut(strings.TrimPrefix(r.fmri, "svc:/"), ":")
	switch col {
	case "state":
		return r.state
	case "nstate":
		return "-"
	case "stime":
		return formatSTime(r.stime)
	case "fmri":
		return r.fmri
	case "ctid":
		if r.pid > 0 {
			return fmt.Sprint(r.pid)
		}
		return "-"
	case "scope":
		return "localhost"
	case "svc":
		return svc
	case "inst":
		return inst
	case "sta":
		return map[string]string{"online": "ON", "offline": "OFF", "disabled": "DIS", "maintenance": "MNT",
			"uninitialized": "UN", "degraded": "DGD", "legacy_run": "LRC"}[r.state]
	case "nsta", "desc":
		return "-"
	case "zone":
		return r.zone
	}
	return ""
}

// formatSTime is svcs' STIME: the time of day within 24 hours, else
// "Mon_DD".
func formatSTime(t time.Time) string {
	t = t.Local()
	if time.Since(t) < 24*time.Hour {
		return t.Format("15:04:05")
	}
	return t.Format("Jan_02")
}

// svcLogPath is the SMF log of an instance, as seen inside the zone.
func svcLogPath(fmri string) string {
	f := strings.TrimPrefix(fmri, "svc:/")
	return "/var/svc/log/" + strings.ReplaceAll(f, "/", "-") + ".log"
}

// svcsLong prints -l paragraphs, a blank line between them; it returns
// whether nothing has been printed yet.
func svcsLong(inv *invocation, z svcsZone, rows []svcRow, first bool) bool {
	for _, r := range rows {
		if !first {
			inv.outf("")
		}
		first = false
		enabled := "true"
		if r.svc != nil && !r.svc.Enabled {
			enabled = "false"
		}
		inv.outf("fmri         %s", r.fmri)
		if z.named {
			inv.outf("zone         %s", z.name)
		}
		inv.outf("enabled      %s", enabled)
		inv.outf("state        %s", r.state)
		inv.outf("next_state   none")
		inv.outf("state_time   %s", r.stime.Local().Format("Mon Jan _2 15:04:05 2006"))
		inv.outf("logfile      %s", z.logRoot+svcLogPath(r.fmri))
		inv.outf("restarter    svc:/system/svc/restarter:default")
		if r.pid > 0 {
			inv.outf("contract_id  %d", r.pid)
		}
	}
	return first
}

// svcsExplain prints -x blocks, a blank line between them: one per
// matching instance when patterns were given, else one per instance that
// is not running for a reason of its own. It returns whether nothing has
// been printed yet.
func svcsExplain(inv *invocation, z svcsZone, rows []svcRow, operands, first bool) bool {
	for _, r := range rows {
		if !operands && r.state != "maintenance" && r.state != "offline" && r.state != "degraded" {
			continue
		}
		if !first {
			inv.outf("")
		}
		first = false
		inv.outf("%s (?)", r.fmri)
		if z.named {
			inv.outf("  Zone: %s", z.name)
		}
		inv.outf(" State: %s since %s", r.state, r.stime.Local().Format("Mon Jan _2 15:04:05 2006"))
		if reason, code := explainReason(r); reason != "" {
			inv.outf("Reason: %s", reason)
			inv.outf("   See: http://illumos.org/msg/%s", code)
		}
		inv.outf("   See: %s", z.logRoot+svcLogPath(r.fmri))
		if r.state == "online" || r.state == "degraded" {
			inv.outf("Impact: None.")
		} else {
			inv.outf("Impact: This service is not running.")
		}
	}
	return first
}

// explainReason is the Reason line of svcs -x and its message code; an
// online instance has none.
func explainReason(r svcRow) (reason, code string) {
	switch r.state {
	case "online":
		return "", ""
	case "degraded":
		return "Degraded by an administrator.", "SMF-8000-DX"
	case "disabled":
		return "Disabled by an administrator.", "SMF-8000-05"
	case "offline":
		return "Start method is running.", "SMF-8000-C4"
	case "uninitialized":
		return "Restarter svc:/system/svc/restarter:default has not initialized service state.", "SMF-8000-4D"
	}
	var aux, text string
	if r.svc != nil {
		aux, text = r.svc.Aux, r.svc.Reason
	}
	switch {
	case aux == "method_failed":
		return text, "SMF-8000-KS"
	case aux == "restarting_too_quickly":
		return "Restarting too quickly.", "SMF-8000-L5"
	case text != "":
		return text, "SMF-8000-AR"
	}
	return "Unknown.", "SMF-8000-AR"
}
