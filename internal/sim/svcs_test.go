package sim_test

import (
	"strings"
	"testing"
)

// The milestones every running zone reports, in svcs' sort order (same
// state and time, so by FMRI).
var milestoneFMRIs = []string{
	"svc:/milestone/multi-user-server:default",
	"svc:/milestone/multi-user:default",
	"svc:/milestone/network:default",
	"svc:/system/svc/restarter:default",
}

// zoneRows renders `svcs -H -o zone,state,fmri` lines of online instances.
func zoneRows(zone string, fmris ...string) string {
	var b strings.Builder
	for _, f := range fmris {
		b.WriteString(padRight(zone, 16) + " " + padRight("online", 14) + " " + f + "\n")
	}
	return b.String()
}

func padRight(s string, w int) string {
	for len(s) < w {
		s += " "
	}
	return s
}

func TestSvcsAllZonesFromTheGlobalZone(t *testing.T) {
	h := newHost(t)
	bootWithService(t, h, "web01", "web", "exec sleep 1000", "")
	bootWithService(t, h, "web02", "api", "exec sleep 1000", "")
	h.zoneSetup("web03", "installed") // not in the kernel: not looked at

	global := []string{
		"svc:/milestone/multi-user-server:default",
		"svc:/milestone/multi-user:default",
		"svc:/milestone/network:default",
		"svc:/network/ipfilter:default",
		"svc:/system/svc/restarter:default",
		"svc:/system/zones:default",
	}
	want := zoneRows("global", global...) +
		zoneRows("web01", append(milestoneFMRIs, "svc:/site/web:default")...) +
		zoneRows("web02", append(milestoneFMRIs, "svc:/site/api:default")...)
	expect(t, h.run("svcs", "-Z", "-H", "-o", "zone,state,fmri"), 0, want, "")

	// The default layout gains a leading ZONE column.
	r := h.run("svcs", "-Z")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || lines[0] != "ZONE             STATE          STIME    FMRI" || len(lines) != 1+6+5+5 {
		t.Fatalf("svcs -Z: %v", r)
	}
	if l := lines[len(lines)-1]; !strings.HasPrefix(l, "web02            online         ") || !strings.HasSuffix(l, " svc:/site/api:default") {
		t.Errorf("last row %q", l)
	}

	// Patterns: a zone without a match is no error, no zone with one is.
	expect(t, h.run("svcs", "-Z", "-H", "-o", "zone,fmri", "site/web"), 0, padRight("web01", 16)+" svc:/site/web:default\n", "")
	expect(t, h.run("svcs", "-Z", "nosuch"), 1, "ZONE             STATE          STIME    FMRI\n", "")
	// Every pattern must match in one zone; here each matches in another.
	expect(t, h.run("svcs", "-Z", "-H", "-o", "zone,fmri", "web", "api"), 1,
		padRight("web01", 16)+" svc:/site/web:default\n"+padRight("web02", 16)+" svc:/site/api:default\n", "")

	// A zone in the kernel without a repository server is reported and skipped.
	h.zoneSetup("web04", "ready")
	expect(t, h.run("svcs", "-Z", "-H", "-o", "zone,fmri", "site/web"), 0, padRight("web01", 16)+" svc:/site/web:default\n",
		"svcs: Could not bind to repository server for zone web04: repository server unavailable\n")
}

func TestSvcsOneZoneFromTheGlobalZone(t *testing.T) {
	h := newHost(t)
	bootWithService(t, h, "web01", "web", "exec sleep 1000", "")
	h.zoneSetup("web02", "installed")

	inside := h.run("zlogin", "web01", "svcs", "-H", "-o", "state,fmri")
	expect(t, h.run("svcs", "-z", "web01", "-H", "-o", "state,fmri"), 0, inside.stdout, "")
	expect(t, h.run("svcs", "-z", "web01", "-H", "-o", "zone,fmri", "web"), 0, padRight("web01", 16)+" svc:/site/web:default\n", "")
	expect(t, h.run("svcs", "-z", "web01", "nosuch"), 1, "STATE          STIME    FMRI\n",
		"svcs: Pattern 'nosuch' doesn't match any instances\n")
	// Log paths are seen from the global zone.
	expect(t, h.run("svcs", "-z", "web01", "-L", "web"), 0, "/zones/web01/root/var/svc/log/site-web:default.log\n", "")
	if out := h.must("svcs", "-z", "web01", "-l", "web"); !strings.Contains(out, "\nzone         web01\n") ||
		!strings.Contains(out, "\nlogfile      /zones/web01/root/var/svc/log/site-web:default.log\n") {
		t.Errorf("svcs -z web01 -l:\n%s", out)
	}
	if out := h.must("svcs", "-z", "global", "-H", "-o", "fmri"); !strings.Contains(out, "svc:/system/zones:default\n") {
		t.Errorf("svcs -z global:\n%s", out)
	}

	expect(t, h.run("svcs", "-z", "web02"), 1, "", "svcs: Could not bind to repository server for zone web02: repository server unavailable\n")
	expect(t, h.run("svcs", "-z", "nosuch"), 1, "", "svcs: invalid zone 'nosuch'\n")
}

func TestSvcsZoneOptionErrors(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("web01", "running")
	expect(t, h.run("zlogin", "web01", "svcs", "-z", "web01"), 1, "", "svcs: svcs -z may only be used from the global zone\n")
	expect(t, h.run("zlogin", "web01", "svcs", "-Z"), 1, "", "svcs: svcs -Z may only be used from the global zone\n")
	for _, args := range [][]string{
		{"-Z", "-z", "web01"},
		{"-z", "web01", "-Z"},
		{"-Z", "-x", "-H"},
		{"-Z", "-l"}, // -l needs operands
		{"-Z", "-l", "-x", "web"},
	} {
		r := h.run("svcs", args...)
		if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, "Usage: svcs ") {
			t.Errorf("svcs %s: %v", strings.Join(args, " "), r)
		}
	}
}
