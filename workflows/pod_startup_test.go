package workflows

import (
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// provisionTimes are the step times the tests' node answers a timed
// provision with.
var provisionTimes = []hostapi.StepTime{
	{Step: "CreateDatasets", Duration: time.Second}, {Step: "InstallZone", Duration: 5 * time.Second},
	{Step: "BootZone", Duration: 3 * time.Second}, {Step: "ConfigureNetwork", Duration: 2 * time.Second},
	{Step: "StartContainers", Duration: time.Second}, {Step: "WaitContainersOnline", Duration: 4 * time.Second},
	{Step: "Supervise", Duration: time.Second},
}

// startups are the status updates that carry a start to measure.
func (h *harness) startups() []controlapi.StatusUpdate {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []controlapi.StatusUpdate
	for _, s := range h.statuses {
		if s.Startup != nil {
			out = append(out, s)
		}
	}
	return out
}

func TestTheFirstReadyCarriesThePodsStartOnce(t *testing.T) {
	spec := podSpec(func(s *model.PodSpec) {
		s.Containers[0].ReadinessProbe = &model.Probe{HTTPGet: &model.HTTPGetAction{Port: model.IntValue(8080)}}
	})
	h := newHarness(t, spec)
	h.report(time.Minute, "running", running(true))
	h.report(2*time.Minute, "running", running(false))
	h.report(3*time.Minute, "running", running(true)) // Ready again: not a start
	h.run(4*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	got := h.startups()
	if len(got) != 1 {
		t.Fatalf("%d status writes carry the start; want exactly the first Ready's", len(got))
	}
	u := got[0]
	if len(u.Conditions) != 1 || u.Conditions[0].Status != model.ConditionTrue {
		t.Fatalf("the start rides on %+v; want the write that makes the pod Ready", u.Conditions)
	}
	s := u.Startup
	if s.Scheduled.IsZero() || s.ImageReady.Before(s.Scheduled) || s.Provisioned.Before(s.ImageReady) {
		t.Fatalf("steps out of order: %+v", s)
	}
	if s.Boot != 3*time.Second || s.Network != 2*time.Second || s.Containers != 6*time.Second {
		t.Fatalf("node's times %v/%v/%v; want boot 3s, network 2s, containers 6s (start, online, supervise)", s.Boot, s.Network, s.Containers)
	}
	ready := u.Conditions[0].LastTransitionTime
	if ready == nil || ready.Sub(s.Provisioned) < time.Minute {
		t.Fatalf("Ready at %v, provisioned at %v: the readiness report came a minute later", ready, s.Provisioned)
	}
}

func TestStartupPhasesAddUpToTheStart(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := controlapi.PodStartup{Scheduled: created.Add(time.Second), ImageReady: created.Add(3 * time.Second),
		Provisioned: created.Add(20 * time.Second), Boot: 4 * time.Second, Network: time.Second, Containers: 2 * time.Second}
	total, phases := s.Phases(created, created.Add(25*time.Second))
	want := map[string]time.Duration{controlapi.StartupScheduling: time.Second, controlapi.StartupImage: 2 * time.Second,
		controlapi.StartupInstall: 10 * time.Second, controlapi.StartupBoot: 4 * time.Second, controlapi.StartupNetwork: time.Second,
		controlapi.StartupContainers: 2 * time.Second, controlapi.StartupReady: 5 * time.Second}
	var sum time.Duration
	for p, d := range phases {
		sum += d
		if want[p] != d {
			t.Errorf("phase %s took %v; want %v", p, d, want[p])
		}
	}
	if total != 25*time.Second || sum != total || len(phases) != len(want) {
		t.Fatalf("total %v, phases add up to %v over %d phases", total, sum, len(phases))
	}
	// Node times longer than the provision around them are scaled into it.
	s.Boot = time.Minute
	total, phases = s.Phases(created, created.Add(25*time.Second))
	sum = 0
	for _, d := range phases {
		if d < 0 {
			t.Fatalf("a negative phase: %v", phases)
		}
		sum += d
	}
	if sum != total {
		t.Fatalf("with a node clock off, phases add up to %v, not %v", sum, total)
	}
}
