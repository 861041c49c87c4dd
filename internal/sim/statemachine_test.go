package sim_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestZoneStateMachine runs every zoneadm/zonecfg lifecycle subcommand from
// every reachable state and checks stdout, stderr, exit status and the
// resulting state against spec §2.4, §2.5, §3, §4.4 and §12.1.
func TestZoneStateMachine(t *testing.T) {
	h := newHost(t)
	h.withZonesDataset()
	h.zoneSetup("src", "installed")

	type want struct {
		code   int
		stdout string // a regexp, anchored
		stderr string // exact; {Z} stands for the zone name
		state  string // "" = the zone no longer exists
	}
	pfx := "zoneadm: zone '{Z}': "
	installOut := `A ZFS file system has been created for this zone\.\n       Image: Preparing at /zones/{Z}/root\.\n        Done: Installation completed in 0\.0 seconds\.\n`
	cloneOut := `Cloning snapshot tank/zones/src@SUNWzone\d+\n        Done: Installation completed in 0\.0 seconds\.\n`
	notRunning := pfx + "not running\n"
	callFailed := pfx + "call to zoneadmd failed\n"
	noTTYUninstall := pfx + "Input not from terminal and -F not specified: uninstall not done.\n"
	notConfigured := "Zone {Z} not in configured state; delete not allowed.  Use -F to force delete.\n"
	badState := "{Z}: Zone state is invalid for the requested operation\n"

	ops := []struct {
		name string
		cmd  []string
	}{
		{"boot", []string{"zoneadm", "-z", "{Z}", "boot"}},
		{"halt", []string{"zoneadm", "-z", "{Z}", "halt"}},
		{"ready", []string{"zoneadm", "-z", "{Z}", "ready"}},
		{"shutdown", []string{"zoneadm", "-z", "{Z}", "shutdown"}},
		{"reboot", []string{"zoneadm", "-z", "{Z}", "reboot"}},
		{"install", []string{"zoneadm", "-z", "{Z}", "install"}},
		{"uninstall -F", []string{"zoneadm", "-z", "{Z}", "uninstall", "-F"}},
		{"uninstall", []string{"zoneadm", "-z", "{Z}", "uninstall"}},
		{"zonecfg delete", []string{"zonecfg", "-z", "{Z}", "delete"}},
		{"zonecfg delete -F", []string{"zonecfg", "-z", "{Z}", "delete", "-F"}},
		{"clone", []string{"zoneadm", "-z", "{Z}", "clone", "src"}},
	}
	table := map[string]map[string]want{
		"configured": {
			"boot":              {1, "", pfx + "must be installed before boot.\n", "configured"},
			"halt":              {1, "", pfx + "cannot manage a zone which is in state 'configured'\n" + callFailed, "configured"},
			"ready":             {1, "", pfx + "must be installed before ready.\n", "configured"},
			"shutdown":          {1, "", notRunning, "configured"},
			"reboot":            {1, "", notRunning, "configured"},
			"install":           {0, installOut, "", "installed"},
			"uninstall -F":      {1, "", pfx + "is already in state 'configured'.\n", "configured"},
			"uninstall":         {1, "", pfx + "is already in state 'configured'.\n", "configured"},
			"zonecfg delete":    {1, "", "Input not from terminal and -F not specified:\ndelete command ignored, exiting.\n", "configured"},
			"zonecfg delete -F": {0, "", "", ""},
			"clone":             {0, cloneOut, "", "installed"},
		},
		"incomplete": {
			"boot":              {1, "", pfx + "must be installed before boot.\n", "incomplete"},
			"halt":              {1, "", pfx + "halt operation is invalid for zones in state 'incomplete'\n" + callFailed, "incomplete"},
			"ready":             {1, "", pfx + "must be installed before ready.\n", "incomplete"},
			"shutdown":          {1, "", notRunning, "incomplete"},
			"reboot":            {1, "", notRunning, "incomplete"},
			"install":           {1, "", pfx + "zone is incomplete; uninstall required.\n", "incomplete"},
			"uninstall -F":      {0, "", "", "configured"},
			"uninstall":         {1, "", noTTYUninstall, "incomplete"},
			"zonecfg delete":    {1, "", notConfigured, "incomplete"},
			"zonecfg delete -F": {0, "", "", ""},
			"clone":             {1, "", pfx + "zone is incomplete; uninstall required.\n", "incomplete"},
		},
		"installed": {
			"boot":              {0, "", "", "running"},
			"halt":              {0, "", pfx + "zone is already halted\n", "installed"},
			"ready":             {0, "", "", "ready"},
			"shutdown":          {1, "", notRunning, "installed"},
			"reboot":            {1, "", notRunning, "installed"},
			"install":           {1, "", pfx + "is already installed.\n", "installed"},
			"uninstall -F":      {0, "", "", "configured"},
			"uninstall":         {1, "", noTTYUninstall, "installed"},
			"zonecfg delete":    {1, "", notConfigured, "installed"},
			"zonecfg delete -F": {0, "", "", ""},
			"clone":             {1, "", pfx + "is already installed.\n", "installed"},
		},
		"ready": {
			"boot":              {0, "", "", "running"},
			"halt":              {0, "", "", "installed"},
			"ready":             {0, "", pfx + "zone is already ready\n", "ready"},
			"shutdown":          {1, "", pfx + "shutdown operation is invalid for zones in state 'ready'\n" + callFailed, "ready"},
			"reboot":            {1, "", pfx + "reboot operation is invalid for zones in state 'ready'\n" + callFailed, "ready"},
			"install":           {1, "", pfx + "install operation is invalid for ready zones.\n", "ready"},
			"uninstall -F":      {1, "", pfx + "uninstall operation is invalid for ready zones.\n", "ready"},
			"uninstall":         {1, "", pfx + "uninstall operation is invalid for ready zones.\n", "ready"},
			"zonecfg delete":    {1, "", notConfigured, "ready"},
			"zonecfg delete -F": {1, "", badState, "ready"},
			"clone":             {1, "", pfx + "clone operation is invalid for ready zones.\n", "ready"},
		},
		"running": {
			"boot":              {0, "", pfx + "zone is already booted\n", "running"},
			"halt":              {0, "", "", "installed"},
			"ready":             {0, "", "", "ready"},
			"shutdown":          {0, "", "", "installed"},
			"reboot":            {0, "", "", "running"},
			"install":           {1, "", pfx + "install operation is invalid for running zones.\n", "running"},
			"uninstall -F":      {1, "", pfx + "uninstall operation is invalid for running zones.\n", "running"},
			"uninstall":         {1, "", pfx + "uninstall operation is invalid for running zones.\n", "running"},
			"zonecfg delete":    {1, "", notConfigured, "running"},
			"zonecfg delete -F": {1, "", badState, "running"},
			"clone":             {1, "", pfx + "clone operation is invalid for running zones.\n", "running"},
		},
	}
	states := []string{"configured", "incomplete", "installed", "ready", "running"}
	n := 0
	for _, from := range states {
		for _, op := range ops {
			n++
			zone := fmt.Sprintf("z%02d", n)
			w := table[from][op.name]
			t.Run(fmt.Sprintf("%s from %s", op.name, from), func(t *testing.T) {
				defer func(parent testing.TB) { h.t = parent }(h.t)
				h.t = t
				h.zoneSetup(zone, from)
				args := make([]string, len(op.cmd)-1)
				for i, a := range op.cmd[1:] {
					args[i] = strings.ReplaceAll(a, "{Z}", zone)
				}
				r := h.run(op.cmd[0], args...)
				wantErr := strings.ReplaceAll(w.stderr, "{Z}", zone)
				wantOut := regexp.MustCompile("^" + strings.ReplaceAll(w.stdout, "{Z}", zone) + "$")
				if r.code != w.code || r.stderr != wantErr || !wantOut.MatchString(r.stdout) {
					t.Errorf("got %v\nwant exit %d\nstdout ~ %s\nstderr:\n%s", r, w.code, wantOut, wantErr)
				}
				if got := h.zoneState(zone); got != w.state {
					t.Errorf("state after: %q, want %q", got, w.state)
				}
				// Free the zone's resources so later subtests stay cheap.
				h.run("zoneadm", "-z", zone, "halt")
			})
		}
	}
}
