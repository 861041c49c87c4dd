package host_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/model"
)

// alive reports a live (not zombie) process.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z'
}

// An exec probe that times out leaves nothing running in the zone: its
// command ignores SIGINT (what interrupting zlogin would send it) and has
// a child, both of which must be gone once the probe has returned.
func TestAnExecProbesTimeoutKillsItsCommandInTheZone(t *testing.T) {
	n := newNode(t)
	s := sandbox("prober", "127.10.3.2", hostapi.ContainerSpec{Name: "app", Argv: []string{"sleep", "1000"}})
	n.provision(t, s)
	z := n.ops.Host.Zone(s.ZoneName())

	stubborn := model.Probe{TimeoutSeconds: 1, Exec: &model.ExecAction{Command: []string{"sh", "-c",
		"trap '' INT; echo $$ > probe.pids; sleep 120 & echo $! >> probe.pids; wait"}}}
	start := time.Now()
	res := n.probe(t, s, stubborn)
	if res.Success || !strings.Contains(res.Message, "timed out after 1s") {
		t.Fatalf("probe past its timeout: %+v", res)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the probe returned %s after its 1s timeout", took)
	}
	out, err := z.Exec(t.Context(), []string{"cat", "probe.pids"}, nil)
	if err != nil || out.ExitCode != 0 {
		t.Fatalf("reading the probe's pids in the zone: %+v, %v", out, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out.Stdout)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid %q: %v", f, err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 2 {
		t.Fatalf("the probe recorded pids %v, want its shell's and its child's", pids)
	}
	for _, pid := range pids {
		for deadline := time.Now().Add(3 * time.Second); alive(pid); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the timed-out probe still runs in the zone", pid)
			}
		}
	}
}

// A container stopped after a failed liveness probe gets the probe's
// terminationGracePeriodSeconds (its service's stop timeout), not SMF's
// 60 seconds: a command that ignores SIGTERM is killed when it is over.
func TestAContainersStopIsBoundedByItsKillGrace(t *testing.T) {
	n := newNode(t)
	probeGrace := int64(2)
	spec := model.PodSpec{Containers: []model.Container{{Name: "app",
		LivenessProbe: &model.Probe{Exec: &model.ExecAction{Command: []string{"true"}}, TerminationGracePeriodSeconds: &probeGrace}}}}
	grace := spec.Containers[0].KillGraceSeconds(&spec)
	s := sandbox("stubborn", "127.10.4.2", hostapi.ContainerSpec{Name: "app", KillGraceSeconds: grace,
		Argv: []string{"sh", "-c", "trap '' TERM; while :; do sleep 1; done"}})
	n.provision(t, s)
	fmri := hostops.ContainerFMRI("app")
	pid := func() int {
		for _, z := range n.sim.State(t).Zones {
			for _, sv := range z.Services {
				if z.Name == s.ZoneName() && sv.FMRI == fmri && sv.State == "online" {
					return sv.PID
				}
			}
		}
		return 0
	}
	before := pid()
	if before == 0 {
		t.Fatal("the container is not online")
	}
	start := time.Now()
	n.must(t, "RestartContainer", n.host.RestartContainer, hostapi.RestartInput{Sandbox: s, Container: "app"})
	for now := pid(); now == 0 || now == before; now = pid() {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("the container that ignores SIGTERM still runs %s after a restart with a grace of %ds", time.Since(start), grace)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(start); took < time.Duration(grace)*time.Second {
		t.Errorf("the container was restarted after %s, before its grace of %ds", took, grace)
	}
}
