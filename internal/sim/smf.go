package sim

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"
)

// SMF inside zones: svccfg imports service manifests, svcadm records what
// the administrator wants (enabled, restart and clear requests), and the
// zone's supervisor makes it so and reports the state that svcs prints.

// builtinServices are the milestones every running zone reports online:
// provisioners wait for multi-user-server before using a zone.
var builtinServices = []string{
	"svc:/system/svc/restarter:default",
	"svc:/milestone/network:default",
	"svc:/milestone/multi-user:default",
	"svc:/milestone/multi-user-server:default",
}

// globalServices are what svcs shows in the simulated global zone.
var globalServices = append(append([]string(nil), builtinServices...),
	"svc:/network/ipfilter:default", "svc:/system/zones:default")

// smfZone checks the zone the SMF command runs in (z, nil if it does not
// exist). Services exist only in running non-global zones; the global zone
// has the fixed list above.
func smfZone(inv *invocation, z *Zone) (*Zone, bool) {
	if z == nil {
		inv.errf("%s: zone %s does not exist", inv.name, inv.zone)
		return nil, false
	}
	if z.Name != "global" && z.State != stateRunning {
		inv.errf("%s: Could not bind to repository server: repository server unavailable.  Exiting.", inv.name)
		return nil, false
	}
	return z, true
}

// matchFMRI reports whether an FMRI pattern (full, without "svc:/", a
// trailing part of the service name, with or without ":instance") names
// the instance.
func matchFMRI(pattern, fmri string) bool {
	if pattern == fmri {
		return true
	}
	p := strings.TrimPrefix(pattern, "svc:")
	p = strings.TrimPrefix(p, "/")
	f := strings.TrimPrefix(fmri, "svc:/")
	svc, _, _ := strings.Cut(f, ":")
	for _, cand := range []string{f, svc} {
		if p == cand || strings.HasSuffix(cand, "/"+p) {
			return true
		}
	}
	return false
}

// resolvePatterns maps operands to service instances the way svcadm does:
// a pattern must match exactly one instance.
func resolvePatterns(inv *invocation, z *Zone, patterns []string) ([]*Service, bool) {
	var out []*Service
	for _, p := range patterns {
		var hits []*Service
		for _, s := range z.Services {
			if matchFMRI(p, s.FMRI) {
				hits = append(hits, s)
			}
		}
		switch {
		case len(hits) == 0:
			inv.errf("%s: Pattern '%s' doesn't match any instances", inv.name, p)
			return nil, false
		case len(hits) > 1:
			inv.errf("%s: Pattern '%s' matches multiple instances:", inv.name, p)
			for _, h := range hits {
				inv.errf("\t%s", h.FMRI)
			}
			return nil, false
		}
		out = append(out, hits[0])
	}
	return out, true
}

// signalSupervisor asks the zone's supervisor to act on new requests now.
func signalSupervisor(pid int) {
	if pid > 0 {
		syscall.Kill(pid, syscall.SIGUSR1)
	}
}

// svccfg import FILE | validate FILE | delete [-f] FMRI
func runSvccfg(inv *invocation) int {
	args := inv.args
	if len(args) >= 2 && args[0] == "-s" {
		inv.errf("svccfg: -s is not supported by illumos-sim; import a manifest instead")
		return 1
	}
	if len(args) == 0 {
		inv.errf("Usage: svccfg [-v] [-s FMRI] [-f file] [command [args...]]")
		return 2
	}
	switch args[0] {
	case "import", "validate":
		if len(args) < 2 {
			inv.errf("Usage: svccfg %s [-V] file", args[0])
			return 2
		}
		file := args[len(args)-1]
		data, err := readManifest(inv, file)
		if err != nil {
			inv.errf("svccfg: %v", err)
			return 1
		}
		insts, err := parseManifest(data)
		if err != nil {
			inv.errf("svccfg: %v", err)
			inv.errf("svccfg: Import of %s failed.", file)
			return 1
		}
		if args[0] == "validate" {
			return 0
		}
		return svccfgImport(inv, insts)
	case "delete":
		rest := args[1:]
		if len(rest) > 0 && rest[0] == "-f" {
			rest = rest[1:]
		}
		if len(rest) != 1 {
			inv.errf("Usage: svccfg delete [-f] {entity | FMRI}")
			return 2
		}
		return svccfgDelete(inv, rest[0])
	}
	inv.errf("svccfg: unknown or unsupported command '%s'", args[0])
	return 1
}

// readManifest reads the manifest file svccfg names: stdin for "-" and
// /dev/stdin, the zone's file with the zone's rights inside a zone. A
// file it cannot reach fails as svccfg's stat of it does.
func readManifest(inv *invocation, file string) ([]byte, error) {
	if file == "-" || file == "/dev/stdin" {
		return io.ReadAll(inv.stdin)
	}
	var b []byte
	var err error
	if inv.zone != "global" {
		b, err = inv.readZoneFile(file)
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("Unable to stat file %s.  %s", file, strerror(err))
	}
	return b, nil
}

func svccfgImport(inv *invocation, insts []importedInstance) int {
	if inv.zone == "global" {
		inv.errf("svccfg: the simulator runs SMF services only inside non-global zones")
		return 1
	}
	pid, code := 0, 0
	err := inv.h.updateZone(inv.zone, func(z *Zone) bool {
		z, ok := smfZone(inv, z)
		if !ok {
			code = 1
			return false
		}
		pid = z.SupervisorPID
		for _, in := range insts {
			var cur *Service
			for _, s := range z.Services {
				if s.FMRI == in.fmri {
					cur = s
				}
			}
			if cur != nil {
				// Re-import refreshes the definition; the administrative
				// enabled state stays as it is, as with SMF.
				cur.Manifest = in.def
				continue
			}
			z.Services = append(z.Services, &Service{
				FMRI: in.fmri, Enabled: in.enabled, State: "uninitialized",
				STime: time.Now().UTC(), Manifest: in.def,
			})
		}
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	signalSupervisor(pid)
	return code
}

func svccfgDelete(inv *invocation, pattern string) int {
	pid, code := 0, 0
	err := inv.h.updateZone(inv.zone, func(z *Zone) bool {
		z, ok := smfZone(inv, z)
		if !ok {
			code = 1
			return false
		}
		hits, ok := resolvePatterns(inv, z, []string{pattern})
		if !ok {
			code = 1
			return false
		}
		var keep []*Service
		for _, s := range z.Services {
			if s != hits[0] {
				keep = append(keep, s)
			}
		}
		z.Services = keep
		pid = z.SupervisorPID
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	signalSupervisor(pid)
	return code
}

// svcadm [-v] enable [-rst] | disable [-st] | restart | refresh | clear FMRI...
func runSvcadm(inv *invocation) int {
	args := inv.args
	verbose := false
	if len(args) > 0 && args[0] == "-v" {
		verbose, args = true, args[1:]
	}
	if len(args) < 1 {
		return svcadmUsage(inv)
	}
	sub := args[0]
	opts, rest, _, ok := getopt(args[1:], "rstI")
	if !ok || len(rest) == 0 {
		return svcadmUsage(inv)
	}
	sync := false
	for _, o := range opts {
		if o.c == 's' {
			sync = true
		}
	}
	switch sub {
	case "enable", "disable", "restart", "refresh", "clear":
	default:
		return svcadmUsage(inv)
	}
	if inv.zone == "global" && (sub == "refresh" || sub == "restart") && allIpfilter(rest) {
		// The ipfilter method reloads NAT: ipnat -CF, then the files
		// (spec §10.7).
		if err := ipfilterReload(inv.h); err != nil {
			return inv.stateErr(err)
		}
		if verbose {
			inv.outf("svc:/network/ipfilter:default %s.", map[string]string{"refresh": "refreshed", "restart": "restarted"}[sub])
		}
		return 0
	}
	if inv.zone == "global" {
		inv.errf("svcadm: the simulator runs SMF services only inside non-global zones")
		return 1
	}
	pid, code := 0, 0
	var fmris []string
	err := inv.h.updateZone(inv.zone, func(z *Zone) bool {
		z, ok := smfZone(inv, z)
		if !ok {
			code = 1
			return false
		}
		svcs, ok := resolvePatterns(inv, z, rest)
		if !ok {
			code = 1
			return false
		}
		for _, s := range svcs {
			switch sub {
			case "enable":
				s.Enabled = true
			case "disable":
				s.Enabled = false
			case "restart":
				if s.State == "online" || s.State == "degraded" {
					s.RestartReq++
				}
			case "clear":
				if s.State == "maintenance" {
					s.ClearReq++
				}
			}
			fmris = append(fmris, s.FMRI)
			if verbose {
				inv.outf("%s %s.", s.FMRI, map[string]string{"enable": "enabled", "disable": "disabled",
					"restart": "restarted", "refresh": "refreshed", "clear": "cleared"}[sub])
			}
		}
		pid = z.SupervisorPID
		return true
	})
	if err != nil {
		return inv.stateErr(err)
	}
	signalSupervisor(pid)
	if code != 0 || !sync {
		return code
	}
	return svcadmWait(inv, sub, fmris)
}

// allIpfilter reports whether every pattern names the ipfilter service.
func allIpfilter(patterns []string) bool {
	for _, p := range patterns {
		if !matchFMRI(p, "svc:/network/ipfilter:default") {
			return false
		}
	}
	return len(patterns) > 0
}

func svcadmUsage(inv *invocation) int {
	inv.errf(`Usage: svcadm [-v] [cmd [args ... ]]

	svcadm enable [-rst] <service> ...	- enable and online service(s)
	svcadm disable [-st] <service> ...	- disable and offline service(s)
	svcadm restart <service> ...		- restart specified service(s)
	svcadm refresh <service> ...		- re-read service configuration
	svcadm clear <service> ...		- clear maintenance state`)
	return 2
}

// svcadmWait implements -s: wait until each instance reaches the wanted
// state; maintenance is exit 3 like svcadm's "needs administrator".
func svcadmWait(inv *invocation, sub string, fmris []string) int {
	want := "online"
	if sub == "disable" {
		want = "disabled"
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		done, maint := 0, ""
		z, err := inv.h.viewZone(inv.zone)
		if err != nil {
			return inv.stateErr(err)
		}
		for _, s := range zoneServices(z) {
			if !containsStr(fmris, s.FMRI) {
				continue
			}
			switch {
			case s.State == want && (want != "online" || s.Manifest.Duration == "transient"):
				done++
			case s.State == want && s.PID > 0 && groupAlive(s.PID):
				// Online with a live process group: a start method that
				// has already failed (its exit not yet recorded) is not.
				done++
			case s.State == "maintenance" && want == "online":
				maint = s.FMRI
			}
		}
		if maint != "" {
			inv.errf("svcadm: Instance \"%s\" has entered maintenance state.", maint)
			return 3
		}
		if done == len(fmris) {
			return 0
		}
		time.Sleep(50 * time.Millisecond)
	}
	inv.errf("svcadm: timed out waiting for %s", strings.Join(fmris, " "))
	return 1
}

// zoneServices is a zone's services; none for a zone that does not exist.
func zoneServices(z *Zone) []*Service {
	if z == nil {
		return nil
	}
	return z.Services
}

// groupMembers lists the processes of a process group.
func groupMembers(pgid int) []int {
	entries, err := fs.ReadDir(hostProc, ".")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.pgid == pgid && st.state != 'Z' {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

func procComm(pid int) string {
	b, err := fs.ReadFile(hostProc, fmt.Sprintf("%d/comm", pid))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}
