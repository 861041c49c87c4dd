package sim_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/simtest"
)

// A zone's max-processes and max-lwps hold its processes, as on illumos:
// a zone set to 100 of either cannot fork 150 processes (its own command
// and service count too), whether zlogin forks the command itself or, in
// isolation mode, the zone's init does; another zone without a limit
// can.
//
// Make limitProcesses (internal/sim/runas.go) return nil at once to see
// it fail: the limited zone forks all 150.
func TestZoneProcessLimitsHoldItsProcesses(t *testing.T) {
	if !machineRootHere() {
		t.Skip("zones have uids of their own only under the machine's root")
	}
	forked := func(t *testing.T, h *simHost, zone string) int {
		t.Helper()
		r := h.run("zlogin", zone, `python3 -c "`+simtest.ForkUpTo(150)+`"`)
		n, err := strconv.Atoi(strings.TrimSpace(r.stdout))
		if r.code != 0 || err != nil {
			t.Fatalf("forking in %s: %v", zone, r)
		}
		return n
	}
	t.Run("shared", func(t *testing.T) {
		h := newHost(t)
		h.zoneSetup("limited", "running")
		h.zoneSetup("free", "running")
		h.must("zonecfg", "-z", "limited", "set max-processes=100")
		h.must("zoneadm", "-z", "limited", "reboot")
		if n := forked(t, h, "limited"); n >= 100 {
			t.Errorf("a zone at max-processes 100 forked %d processes", n)
		}
		if n := forked(t, h, "free"); n != 150 {
			t.Errorf("a zone without a limit forked %d of 150", n)
		}
	})
	t.Run("isolated", func(t *testing.T) {
		const network = 207
		fab := isolatedFabric(t, network)
		h, _ := isolatedNode(t, fab, network, 1, "exec sleep 1006")
		if n := forked(t, h, "pod"); n != 150 {
			t.Fatalf("the zone without a limit forked %d of 150", n)
		}
		h.must("zonecfg", "-z", "pod", "set max-lwps=100")
		h.must("zoneadm", "-z", "pod", "reboot")
		if n := forked(t, h, "pod"); n >= 100 {
			t.Errorf("an isolated zone at max-lwps 100 forked %d processes", n)
		}
	})
}

// machineRootHere says whether the test runs as the machine's root.
func machineRootHere() bool {
	b, err := os.ReadFile("/proc/self/uid_map")
	f := strings.Fields(string(b))
	return err == nil && os.Geteuid() == 0 && len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}
