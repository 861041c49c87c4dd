package workflows

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/model"
)

// Unit tests of the lifecycle's logic (timers, signals, saga order) with
// the SDK's test suite and mocked activities; the end-to-end tests run the
// real activities on the dev stack's parts.

var testRef = activities.PodRef{Namespace: "default", Name: "web", UID: "00000000-0000-4000-8000-000000000001"}

var fastTuning = Tuning{MonitorEvery: 5 * time.Second, RetryMin: time.Second, RetryMax: 4 * time.Second,
	RestartBackoff: 10 * time.Second, RestartMax: time.Minute, HistoryLimit: 100000}

func podSpec(mut ...func(*model.PodSpec)) model.PodSpec {
	p := &model.Pod{Spec: model.PodSpec{Containers: []model.Container{{Name: "app", Image: "base", Command: []string{"sleep", "1000"}}}}}
	model.DefaultPod(p)
	for _, m := range mut {
		m(&p.Spec)
	}
	return p.Spec
}

// calls records the activities a test run made, in order.
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, name)
}

func (c *calls) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.log, " ")
}

func (c *calls) has(seq ...string) bool {
	return strings.Contains(" "+c.String()+" ", " "+strings.Join(seq, " ")+" ")
}

type harness struct {
	testsuite.WorkflowTestSuite
	env      *testsuite.TestWorkflowEnvironment
	calls    *calls
	queues   *calls // host activities as name@taskqueue
	statuses []activities.StatusUpdate
	mu       sync.Mutex
}

// override replaces the default mock of one activity.
type override struct {
	fn    any
	after time.Duration
	ret   []any
}

func newHarness(t *testing.T, spec model.PodSpec, overrides ...override) *harness {
	h := &harness{calls: &calls{}, queues: &calls{}}
	h.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	h.env = h.NewTestWorkflowEnvironment()
	h.env.SetTestTimeout(time.Minute)
	overridden := map[string]bool{}
	for _, o := range overrides {
		m := h.env.OnActivity(o.fn, mock.Anything, mock.Anything)
		if o.after > 0 {
			m = m.After(o.after)
		}
		m.Return(o.ret...)
		overridden[fnName(o.fn)] = true
	}
	on := func(fn any) *testsuite.MockCallWrapper {
		if overridden[fnName(fn)] {
			return nil
		}
		return h.env.OnActivity(fn, mock.Anything, mock.Anything)
	}
	h.env.RegisterActivity(&activities.Control{})
	h.env.RegisterActivity(&activities.Host{})
	h.env.RegisterActivity(&activities.Images{})
	ret := func(m *testsuite.MockCallWrapper, v ...any) {
		if m != nil {
			m.Return(v...)
		}
	}
	ret(on(ctl.LoadPod), activities.PodSnapshot{Found: true, Spec: spec, Phase: model.PodPending}, nil)
	ret(on(ctl.SchedulePod), activities.ScheduleResult{Node: "n1"}, nil)
	ret(on(ctl.AllocatePodIP), activities.AllocateResult{IP: "10.88.1.2", PrefixLen: 24, Gateway: "10.88.1.1"}, nil)
	ret(on(img.ResolvePodImage), activities.ResolvedImage{Found: true, Kind: model.ImageZoneTemplate, Present: true}, nil)
	h.env.OnActivity(ctl.UpdatePodStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, u activities.StatusUpdate) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.statuses = append(h.statuses, u)
		return nil
	})
	for name, fn := range map[string]any{"ReleasePodIP": ctl.ReleasePodIP, "RemovePod": ctl.RemovePod} {
		h.env.OnActivity(fn, mock.Anything, mock.Anything).Return(h.record(name))
	}
	for _, st := range provisionSteps {
		ret(on(st.do), h.recordSandbox(st.name))
	}
	for name, fn := range map[string]any{"DestroyDatasets": host.DestroyDatasets, "DeleteVNIC": host.DeleteVNIC,
		"DeleteZoneConfig": host.DeleteZoneConfig, "UninstallZone": host.UninstallZone, "HaltZone": host.HaltZone,
		"StopContainers": host.StopContainers} {
		ret(on(fn), h.recordSandbox(name))
	}
	ret(on(host.ObservePod), activities.PodObservation{ZoneState: "running", Containers: map[string]string{"app": "online"}}, nil)
	ret(on(host.ShutdownZone), func(_ context.Context, _ activities.ShutdownInput) (bool, error) {
		h.calls.add("ShutdownZone")
		return true, nil
	})
	ret(on(host.Probe), activities.ProbeResult{Success: true}, nil)
	ret(on(host.RestartContainer), nil)
	return h
}

func fnName(fn any) string { return runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name() }

func (h *harness) record(name string) func(context.Context, activities.PodRef) error {
	return func(context.Context, activities.PodRef) error { h.calls.add(name); return nil }
}

func (h *harness) recordSandbox(name string) func(context.Context, activities.PodSandbox) error {
	return func(ctx context.Context, _ activities.PodSandbox) error {
		h.calls.add(name)
		h.queues.add(name + "@" + activity.GetInfo(ctx).TaskQueue)
		return nil
	}
}

func (h *harness) run(after time.Duration, signal string, arg any) {
	if signal != "" {
		h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(signal, arg) }, after)
	}
	h.env.ExecuteWorkflow(PodLifecycle, PodInput{Pod: testRef, Tuning: &fastTuning})
}

func (h *harness) lastStatus() activities.StatusUpdate {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.statuses[len(h.statuses)-1]
}

func (h *harness) sawReason(reason string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.statuses {
		if s.Reason == reason || s.EventReason == reason {
			return true
		}
	}
	return false
}

func TestHappyPathProvisionsRunsAndRemoves(t *testing.T) {
	h := newHarness(t, podSpec())
	zero := int64(0)
	h.run(time.Minute, SignalTerminate, TerminateSignal{GracePeriodSeconds: &zero})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := []string{"CreateDatasets", "CreateVNIC", "ConfigureZone", "InstallZone", "BootZone", "ConfigureNetwork",
		"StartContainers", "WaitContainersOnline", "HaltZone", "UninstallZone", "DeleteZoneConfig", "DeleteVNIC",
		"DestroyDatasets", "ReleasePodIP", "ReleasePodIP", "RemovePod"}
	if !h.calls.has(want...) {
		t.Fatalf("activities ran as\n  %s\nwant\n  %s", h.calls, strings.Join(want, " "))
	}
	if h.calls.has("ShutdownZone") {
		t.Fatal("a forced delete (grace 0) must not wait for a graceful shutdown")
	}
	if !h.sawReason("Started") || !h.sawReason("Killing") {
		t.Fatalf("status updates lack Started or Killing: %+v", h.statuses)
	}
}

func TestUnschedulableWaitsAndRetries(t *testing.T) {
	tries := 0
	h := newHarness(t, podSpec(), override{fn: ctl.SchedulePod, ret: []any{func(context.Context, activities.PodRef) (activities.ScheduleResult, error) {
		tries++
		if tries < 4 {
			return activities.ScheduleResult{Message: "0/3 nodes are available: 3 Insufficient cpu."}, nil
		}
		return activities.ScheduleResult{Node: "n1"}, nil
	}}})
	h.run(time.Hour, SignalTerminate, TerminateSignal{})
	if tries != 4 {
		t.Fatalf("scheduled %d times, want 4", tries)
	}
	unschedulable := 0
	for _, s := range h.statuses {
		if s.Reason == "Unschedulable" {
			unschedulable++
		}
	}
	if unschedulable != 1 {
		t.Fatalf("the same reason was written %d times; want once (no churn)", unschedulable)
	}
	if !h.calls.has("RemovePod") {
		t.Fatalf("pod not removed: %s", h.calls)
	}
}

func TestPermanentFailureCompensatesInReverse(t *testing.T) {
	h := newHarness(t, podSpec(), override{fn: host.InstallZone, ret: []any{
		temporal.NewNonRetryableApplicationError("InstallZone: zoneadm -z web install: exit 1: brand install failed", "Invalid", nil)}})
	h.run(time.Hour, SignalTerminate, TerminateSignal{})
	want := []string{"CreateDatasets", "CreateVNIC", "ConfigureZone", "UninstallZone", "DeleteZoneConfig", "DeleteVNIC", "DestroyDatasets", "ReleasePodIP"}
	if !h.calls.has(want...) {
		t.Fatalf("saga ran as %s\nwant %s", h.calls, strings.Join(want, " "))
	}
	var failed *activities.StatusUpdate
	for i := range h.statuses {
		if h.statuses[i].Phase == model.PodFailed {
			failed = &h.statuses[i]
		}
	}
	if failed == nil || failed.Reason != "ProvisionFailed" || !strings.Contains(failed.Message, "brand install failed") || !strings.Contains(failed.Message, "InstallZone") {
		t.Fatalf("pod not Failed with the step and stderr: %+v", failed)
	}
	if !h.calls.has("RemovePod") || h.calls.has("HaltZone", "UninstallZone", "DeleteZoneConfig", "DeleteVNIC", "DestroyDatasets", "ReleasePodIP", "RemovePod") {
		t.Fatalf("a failed pod is removed on delete without a second teardown: %s", h.calls)
	}
}

func TestCancelMidInstallRollsBack(t *testing.T) {
	h := newHarness(t, podSpec(), override{fn: host.InstallZone, after: 10 * time.Minute, ret: []any{nil}})
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(SignalCancel, CancelSignal{Reason: "wrong image"})
	}, time.Minute)
	h.run(time.Hour, SignalTerminate, TerminateSignal{})
	if !h.calls.has("UninstallZone", "DeleteZoneConfig", "DeleteVNIC", "DestroyDatasets", "ReleasePodIP") {
		t.Fatalf("cancel did not roll back: %s", h.calls)
	}
	if h.calls.has("BootZone") {
		t.Fatalf("provisioning went on after cancel: %s", h.calls)
	}
	if !h.sawReason("Cancelled") {
		t.Fatal("pod not marked Cancelled")
	}
}

func TestTemporalCancelBehavesLikeTheCancelSignal(t *testing.T) {
	h := newHarness(t, podSpec(), override{fn: host.InstallZone, after: 10 * time.Minute, ret: []any{nil}})
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Minute)
	h.run(time.Hour, SignalTerminate, TerminateSignal{})
	if !h.calls.has("UninstallZone", "DeleteZoneConfig", "DeleteVNIC", "DestroyDatasets", "ReleasePodIP") || !h.sawReason("Cancelled") {
		t.Fatalf("a Temporal cancel request did not roll back: %s", h.calls)
	}
}

func TestFinalizeEndsTheGracePeriod(t *testing.T) {
	var finalizedAt, haltedAt time.Duration
	var h *harness
	var start time.Time
	h = newHarness(t, podSpec(),
		override{fn: host.ShutdownZone, after: 25 * time.Second, ret: []any{true, nil}},
		override{fn: host.HaltZone, ret: []any{func(context.Context, activities.PodSandbox) error {
			haltedAt = h.env.Now().Sub(start)
			return nil
		}}})
	start = h.env.Now()
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(SignalTerminate, TerminateSignal{}) }, time.Minute)
	h.env.RegisterDelayedCallback(func() {
		finalizedAt = h.env.Now().Sub(start)
		h.env.SignalWorkflow(SignalFinalize, nil)
	}, time.Minute+5*time.Second)
	h.run(0, "", nil)
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if haltedAt == 0 || haltedAt-finalizedAt > 2*time.Second {
		t.Fatalf("finalize at %s, halt at %s: finalize must end the 30s grace period at once", finalizedAt, haltedAt)
	}
	if !h.sawReason("Finalized") {
		t.Fatal("no Finalized event")
	}
}

func TestLivenessFailureRestartsWithBackoff(t *testing.T) {
	spec := podSpec(func(s *model.PodSpec) {
		s.Containers[0].LivenessProbe = &model.Probe{Exec: &model.ExecAction{Command: []string{"false"}}}
		model.DefaultPod(&model.Pod{Spec: *s})
	})
	var restarts []time.Time
	var h *harness
	h = newHarness(t, spec,
		override{fn: host.Probe, ret: []any{activities.ProbeResult{Message: "exit status 1"}, nil}},
		override{fn: host.RestartContainer, ret: []any{func(context.Context, activities.RestartInput) error {
			restarts = append(restarts, h.env.Now())
			return nil
		}}})
	h.run(3*time.Minute, SignalTerminate, TerminateSignal{})
	if len(restarts) < 3 {
		t.Fatalf("%d restarts in 3 minutes of failing liveness", len(restarts))
	}
	// Each restart waits for 3 failures 10s apart; the back-off grows 10s, 20s…
	gap1, gap2 := restarts[1].Sub(restarts[0]), restarts[2].Sub(restarts[1])
	if gap1 < 30*time.Second || gap2 < gap1+5*time.Second {
		t.Fatalf("restart gaps %s then %s: want at least 30s and growing (back-off)", gap1, gap2)
	}
	last := h.lastStatusWithContainers()
	if last.ContainerStatuses[0].RestartCount < 3 {
		t.Fatalf("restartCount %d not reported", last.ContainerStatuses[0].RestartCount)
	}
}

func (h *harness) lastStatusWithContainers() activities.StatusUpdate {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.statuses) - 1; i >= 0; i-- {
		if len(h.statuses[i].ContainerStatuses) > 0 {
			return h.statuses[i]
		}
	}
	return activities.StatusUpdate{}
}

func TestReadinessDrivesTheReadyCondition(t *testing.T) {
	spec := podSpec(func(s *model.PodSpec) {
		s.Containers[0].ReadinessProbe = &model.Probe{HTTPGet: &model.HTTPGetAction{Port: 8080}, InitialDelaySeconds: 5}
		model.DefaultPod(&model.Pod{Spec: *s})
	})
	probes := 0
	h := newHarness(t, spec, override{fn: host.Probe, ret: []any{func(context.Context, activities.ProbeInput) (activities.ProbeResult, error) {
		probes++
		return activities.ProbeResult{Success: probes >= 3}, nil
	}}})
	h.run(time.Minute, SignalTerminate, TerminateSignal{})
	var ready []string
	for _, s := range h.statuses {
		for _, c := range s.Conditions {
			if c.Type == model.PodReady {
				ready = append(ready, c.Status)
			}
		}
	}
	if len(ready) < 2 || ready[0] != model.ConditionFalse || !strings.Contains(strings.Join(ready, ","), "False,True") {
		t.Fatalf("Ready went %v; want False until the readiness probe passes, then True", ready)
	}
}

func TestContinuesAsNewBeforeHistoryGrowsLarge(t *testing.T) {
	h := newHarness(t, podSpec())
	tuning := fastTuning
	tuning.HistoryLimit = 60
	h.env.ExecuteWorkflow(PodLifecycle, PodInput{Pod: testRef, Tuning: &tuning})
	err := h.env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v; want continue-as-new once the history passed 60 events", err)
	}
}
