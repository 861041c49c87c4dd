package host_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// watches records the pods handed to the supervisor.
type watches struct {
	mu   sync.Mutex
	pods []supervisor.Pod
}

func (w *watches) Watch(p supervisor.Pod, _ map[string]supervisor.Initial) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pods = append(w.pods, p)
	return uint64(len(w.pods))
}
func (w *watches) Restarted(string, string) uint64 { return 0 }
func (w *watches) Forget(string)                   {}

func TestProvisionPodBuildsTheZoneAndHandsItOver(t *testing.T) {
	n := newNode(t)
	sup := &watches{}
	n.ops.Supervisor = sup
	s := sandbox("web", "127.10.6.2", hostapi.ContainerSpec{Name: "app", Argv: []string{"sleep", "1000"}})
	in := hostapi.ProvisionInput{Sandbox: s, Probes: []hostapi.ContainerProbes{{Name: "app"}}}
	// Not asked for the steps' times, the result is the bare Seq, as a
	// lifecycle from before reads it.
	var seq uint64
	if err := n.must(t, "ProvisionPod", n.host.ProvisionPod, in).Get(&seq); err != nil {
		t.Fatal(err)
	}
	if seq != 1 {
		t.Fatalf("ProvisionPod answered Seq %d; want the supervisor's 1", seq)
	}
	// A retry finds the work done; asked, it times each step.
	in.Timed = true
	var res hostapi.ProvisionResult
	if err := n.must(t, "ProvisionPod", n.host.ProvisionPod, in).Get(&res); err != nil {
		t.Fatal(err)
	}
	if res.Seq != 2 {
		t.Fatalf("ProvisionPod answered Seq %d; want the supervisor's 2", res.Seq)
	}
	var steps []string
	for _, st := range res.Steps {
		if st.Duration <= 0 {
			t.Errorf("step %s took %v", st.Step, st.Duration)
		}
		steps = append(steps, st.Step)
	}
	if got := strings.Join(steps, " "); got != "CreateDatasets CreateVNIC ConfigureZone InstallZone BootZone ConfigureNetwork StartContainers WaitContainersOnline Supervise" {
		t.Fatalf("timed steps %s", got)
	}
	if obs := n.observe(t, s); obs.ZoneState != "running" || obs.Containers["app"] != "online" {
		t.Fatalf("after ProvisionPod the node shows %+v; want the zone running and app online", obs)
	}
	if len(sup.pods) != 2 || sup.pods[1].Zone != s.ZoneName() || len(sup.pods[1].Containers) != 1 {
		t.Fatalf("supervisor was handed %+v", sup.pods)
	}
	n.deprovision(t, s)
}

// A transient failure is tried again within the step, not by starting
// the provision over.
func TestProvisionPodRetriesATransientStep(t *testing.T) {
	n := newNode(t)
	n.ops.Supervisor = &watches{}
	n.ops.StepRetry = 10 * time.Millisecond
	s := sandbox("web", "127.10.6.4")
	n.sim.Run(t, "fault", "fail-next", "zoneadm boot", "2")
	n.must(t, "ProvisionPod past two failed boots", n.host.ProvisionPod, hostapi.ProvisionInput{Sandbox: s})
	if obs := n.observe(t, s); obs.ZoneState != "running" {
		t.Fatalf("zone is %q after ProvisionPod; want running", obs.ZoneState)
	}
	if !strings.Contains(n.log.String(), "try=2") {
		t.Fatalf("the log does not count the step's tries:\n%s", n.log.String())
	}
	n.deprovision(t, s)
}

// A failed step says which step it was and how many were begun, so the
// workflow undoes exactly those.
func TestProvisionPodFailureCarriesItsProgress(t *testing.T) {
	n := newNode(t)
	n.ops.Supervisor = &watches{}
	s := sandbox("web", "127.10.6.3")
	if err := n.ops.Host.Dladm().CreateVNIC(t.Context(), illumos.VNICSpec{Name: s.VNICName(), Over: "net0"}); err != nil {
		t.Fatal(err)
	}
	_, err := n.run(t, n.host.ProvisionPod, hostapi.ProvisionInput{Sandbox: s})
	ae := appError(t, err)
	var p hostapi.ProvisionProgress
	if derr := ae.Details(&p); derr != nil {
		t.Fatalf("no progress in the failure's details: %v", derr)
	}
	if ae.Type() != "Conflict" || !ae.NonRetryable() || p != (hostapi.ProvisionProgress{Begun: 2, Step: "CreateVNIC"}) {
		t.Fatalf("failure %v (type %s, non-retryable %v, progress %+v); want a Conflict at step 2, CreateVNIC", err, ae.Type(), ae.NonRetryable(), p)
	}
}

// A stopped zone comes back in one call: booted, addressed, its
// containers started (here stopped before the zone halted, as a stop
// under way when its node restarted leaves them) and the pod handed to
// the supervisor; a retry finds the work done.
func TestBootPodAgainBringsAStoppedZoneBackInOneCall(t *testing.T) {
	n := newNode(t)
	sup := &watches{}
	n.ops.Supervisor = sup
	s := sandbox("web", "127.10.6.4", hostapi.ContainerSpec{Name: "app", Argv: []string{"sleep", "1000"}})
	in := hostapi.ProvisionInput{Sandbox: s, Probes: []hostapi.ContainerProbes{{Name: "app"}}}
	n.must(t, "ProvisionPod", n.host.ProvisionPod, in)
	n.must(t, "StopContainers", n.host.StopContainers, s)
	n.must(t, "HaltZone", n.host.HaltZone, s)
	if obs := n.observe(t, s); obs.ZoneState != "installed" {
		t.Fatalf("after HaltZone the zone is %q", obs.ZoneState)
	}
	again := hostapi.SuperviseInput{Sandbox: s, Probes: in.Probes}
	for want := uint64(2); want <= 3; want++ {
		var seq uint64
		if err := n.must(t, "BootPodAgain", n.host.BootPodAgain, again).Get(&seq); err != nil {
			t.Fatal(err)
		}
		if seq != want {
			t.Fatalf("BootPodAgain answered Seq %d; want the supervisor's %d", seq, want)
		}
		obs := n.observe(t, s)
		if obs.ZoneState != "running" || obs.Containers["app"] == "" || obs.Containers["app"] == "disabled" {
			t.Fatalf("after BootPodAgain the node shows %+v; want the zone running and app enabled", obs)
		}
	}
	if len(sup.pods) != 3 || sup.pods[2].Zone != s.ZoneName() {
		t.Fatalf("supervisor was handed %+v", sup.pods)
	}
	n.deprovision(t, s)
}
