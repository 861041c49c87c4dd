package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/simtest"
)

// TestMain is also the floor modes' main: the scale section runs this
// binary as one, as make bench runs zwbench.
func TestMain(m *testing.M) {
	if asFloor() {
		return
	}
	os.Exit(simtest.Main(m.Run))
}

func TestMachineCeilingIsTheRateOfBothKindsOfWorkSharingTheMachine(t *testing.T) {
	for _, c := range []struct {
		name       string
		a, b, want float64
	}{
		{"equal rates halve", 20, 20, 10},
		{"the slower one dominates", 111, 16, 1 / (1.0/111 + 1.0/16)},
		{"a rate not measured gives none", 111, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := machineCeiling(c.a, c.b); math.Abs(got-c.want) > 1e-9 {
				t.Errorf("machineCeiling(%g, %g) = %g, want %g", c.a, c.b, got, c.want)
			}
		})
	}
}

func TestTheProbeFloorLastsAboutAWindow(t *testing.T) {
	for _, c := range []struct {
		interval, window time.Duration
		want             int
	}{
		{time.Second / 6, time.Minute, floorProbes},     // 60 pods: 360 would fit, 200 are enough
		{100 * time.Millisecond, 10 * time.Second, 100}, // 100 pods, a 10 s window
		{time.Second, 15 * time.Second, minFloorProbes}, // 10 pods: never fewer
	} {
		if got := floorProbeCount(c.interval, c.window); got != c.want {
			t.Errorf("floorProbeCount(%s, %s) = %d, want %d", c.interval, c.window, got, c.want)
		}
	}
}

func TestCommandNameIsTheCommandAndItsSubcommand(t *testing.T) {
	for _, c := range []struct {
		cmd  illumos.Cmd
		want string
	}{
		{illumos.Cmd{Path: "/usr/sbin/zoneadm", Args: []string{"-z", "web", "boot"}}, "zoneadm boot"},
		{illumos.Cmd{Path: "/usr/sbin/zoneadm", Args: []string{"list", "-cp"}}, "zoneadm list"},
		{illumos.Cmd{Path: "/usr/sbin/zlogin", Args: []string{"web", "svcs", "-H"}}, "zlogin svcs"},
		{illumos.Cmd{Path: "/usr/sbin/zonecfg", Args: []string{"-z", "web", "-f", "-"}}, "zonecfg -f"},
		{illumos.Cmd{Path: "/usr/sbin/psrinfo"}, "psrinfo"},
	} {
		if got := commandName(c.cmd); got != c.want {
			t.Errorf("commandName(%v) = %q, want %q", c.cmd.Argv(), got, c.want)
		}
	}
}

// The host floor provisions pods on fresh simulated nodes with the host
// library, counts the commands of a provision and stops the zones it
// booted.
func TestHostFloorProvisionsPodsOnTheSimulator(t *testing.T) {
	dir := t.TempDir()
	req := hostFloorRequest{Sim: simtest.Bin(t), Dir: dir, Nodes: 2, Pods: 4, PerNode: 64, Installs: 4}
	var f HostFloor
	floorMain(t, hostFloorMain, req, &f)
	if f.Pods != 4 || f.PodsPerSecond <= 0 {
		t.Errorf("host floor %+v: want 4 pods at some rate", f)
	}
	if f.CommandsMsPerPod <= 0 || f.CPUMsPerPod <= f.CommandsMsPerPod {
		t.Errorf("host floor CPU %.2f ms a pod, %.2f of it in the commands: want both, the commands a part", f.CPUMsPerPod, f.CommandsMsPerPod)
	}
	// The state is read before the install and the boot, not again after
	// the boot.
	for c, want := range map[string]float64{"zoneadm install": 1, "zoneadm boot": 1, "dladm create-vnic": 1, "zlogin svccfg": 1, "zoneadm list": 2} {
		if f.CommandsByName[c] != want {
			t.Errorf("%s ran %.2f times a pod, want %.0f (all: %v)", c, f.CommandsByName[c], want, f.CommandsByName)
		}
	}
	for n := range 2 {
		bin := filepath.Join(dir, fmt.Sprintf("node-%d", n), "bin")
		out, err := exec.Command(filepath.Join(bin, "zoneadm"), "list", "-p").CombinedOutput()
		if err != nil {
			t.Fatalf("zoneadm list on node %d: %v: %s", n, err, out)
		}
		if strings.Contains(string(out), "floor-") {
			t.Errorf("node %d still runs the floor's zones:\n%s", n, out)
		}
	}
}

// The probe floor runs exec probes through the supervisor's code, and
// counts the process's own side of each besides its command.
func TestProbeFloorCountsTheProcessThatRunsTheProbes(t *testing.T) {
	sim, root := simtest.Bin(t), t.TempDir()
	t.Cleanup(func() { _ = exec.Command(sim, "stop-all", "--root", filepath.Join(root, "state")).Run() })
	h, err := hostFloorNode(t.Context(), hostFloorRequest{Sim: sim, Installs: 1}, root, &commandCounts{counts: map[string]int{}})
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	pod := hostFloorPod(0, 0)
	if _, err := h.ProvisionPod(t.Context(), hostapi.ProvisionInput{Sandbox: pod}); err != nil {
		t.Fatal(err)
	}
	target := ProbeTarget{BinDir: bin, Zone: pod.ZoneName(), IP: pod.IP}
	req := probeFloorRequest{Targets: []ProbeTarget{target}, Command: []string{"true"}, Probes: 10, Interval: 5 * time.Millisecond}
	var f ProbeFloor
	floorMain(t, probeFloorMain, req, &f)
	if f.Probes != 10 || f.Failed != 0 {
		t.Errorf("probe floor %+v: want 10 probes, none failed", f)
	}
	if f.CommandsMs <= 0 || f.ProcessMs <= 0 || math.Abs(f.NodeMs-(f.CommandsMs+f.ProcessMs)) > 0.01 {
		t.Errorf("probe floor %.2f ms a probe = %.2f the command + %.2f the process: want both parts, adding up", f.NodeMs, f.CommandsMs, f.ProcessMs)
	}

	// A zone that is not there fails the floor instead of lowering it.
	req.Targets = append(req.Targets, ProbeTarget{BinDir: bin, Zone: "default-gone-0123456789ab"})
	b, _ := json.Marshal(req)
	if err := probeFloorMain(t.Context(), bytes.NewReader(b), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "default-gone") {
		t.Errorf("probe floor with a missing zone: %v, want an error naming it", err)
	}
}

// floorMain runs a floor mode's main in this process with req and
// decodes its answer into res.
func floorMain(t *testing.T, main func(ctx context.Context, in io.Reader, out io.Writer) error, req, res any) {
	t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := main(t.Context(), bytes.NewReader(b), &out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), res); err != nil {
		t.Fatalf("answer %q: %v", out.String(), err)
	}
}
