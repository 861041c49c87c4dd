package sim_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A zone's capped-memory and capped-cpu hold its processes in isolation
// mode: a zone capped at 64M cannot hold 200 MiB (Linux kills the
// allocating process; the zone and the host carry on), a busy loop in a
// zone capped at 0.2 CPU gets about that, the zone's service is in its
// cgroup as much as zlogin's commands, and the cgroup goes with the halt;
// a boot that finds the cgroup a crashed boot left takes it again.
//
// Make makeZoneCgroup (internal/sim/zone_cgroup.go) return nil, nil at
// once to see it fail: the 200 MiB are allocated, the loop gets a whole
// CPU, and the zone has no cgroup. Drop releaseCgroups from leaveKernel
// (zoneadm_boot.go) to see the halted zone's cgroup stay.
func TestZoneMemoryAndCPUCapsHoldItsProcesses(t *testing.T) {
	if !machineRootHere() {
		t.Skip("zones get cgroups only under the machine's root")
	}
	const network = 208
	fab := isolatedFabric(t, network)
	h, _ := isolatedNode(t, fab, network, 1, "exec sleep 1006")
	h.must("zonecfg", "-z", "pod", "add capped-memory; set physical=64M; set swap=64M; end; add capped-cpu; set ncpus=0.2; end")
	h.must("zoneadm", "-z", "pod", "reboot")
	if b, _ := os.ReadFile(filepath.Join(h.root, "run", "pod", "zoneadmd.log")); strings.Contains(string(b), "caps not enforced") {
		t.Skip(regexp.MustCompile(`memory and CPU caps not enforced.*`).FindString(string(b)))
	}
	waitFor(t, 10*time.Second, "the zone's service online", func() bool {
		state, _, _ := h.service("pod", "svc:/site/server:default")
		return state == "online"
	})

	r := h.run("zlogin", "pod", `python3 -c "b = bytearray(200 << 20); print('allocated')"`)
	if r.code == 0 || strings.Contains(r.stdout, "allocated") {
		t.Errorf("a zone capped at 64M allocated 200 MiB: %v", r)
	}
	t.Logf("allocating 200 MiB in a zone capped at 64M: %v", r)
	if r := h.run("zlogin", "pod", "echo", "alive"); r.code != 0 || r.stdout != "alive\n" {
		t.Errorf("the zone after its process was refused memory: %v", r)
	}

	r = h.run("zlogin", "pod", `python3 -c "import time
t0, c0 = time.monotonic(), time.process_time()
while time.monotonic() - t0 < 3: pass
print((time.process_time() - c0) / (time.monotonic() - t0))"`)
	share, err := strconv.ParseFloat(strings.TrimSpace(r.stdout), 64)
	if r.code != 0 || err != nil {
		t.Fatalf("busy loop: %v", r)
	}
	t.Logf("a busy loop capped at 0.2 CPU ran at %.2f CPU", share)
	if share >= 0.5 {
		t.Errorf("a zone capped at 0.2 CPU ran a busy loop at %.2f CPU", share)
	}

	var dirs []string
	for _, z := range h.state().Zones {
		if z.Name == "pod" {
			dirs = z.Cgroups
		}
	}
	if len(dirs) == 0 {
		t.Fatal("the capped zone has no cgroup in its state")
	}
	_, pid, _ := h.service("pod", "svc:/site/server:default")
	procs, err := os.ReadFile(filepath.Join(dirs[0], "cgroup.procs"))
	if err != nil || !strings.Contains("\n"+string(procs), "\n"+strconv.Itoa(pid)+"\n") {
		t.Errorf("the zone's service (pid %d) is not in its cgroup %s: %q %v", pid, dirs[0], procs, err)
	}

	halt := func() {
		t.Helper()
		h.must("zoneadm", "-z", "pod", "halt")
		for _, d := range dirs {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("the halted zone's cgroup %s is still there (%v)", d, err)
			}
		}
	}
	halt()

	// A boot that died after making the cgroup left it: the next boot
	// takes it again, and its halt removes it.
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.must("zoneadm", "-z", "pod", "boot")
	for _, z := range h.state().Zones {
		if z.Name == "pod" && !slices.Equal(z.Cgroups, dirs) {
			t.Errorf("booted again over a crashed boot's cgroup, the zone has %q, want %q", z.Cgroups, dirs)
		}
	}
	halt()
}
