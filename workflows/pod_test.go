package workflows

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	controlacts "github.com/zonewright/zonewright/activities/control"
	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// Unit tests of the lifecycle's logic (timers, signals, saga order) with
// the SDK's test suite and mocked activities; the end-to-end tests run the
// real activities on the dev stack's parts.

var testRef = controlapi.PodRef{Namespace: "default", Name: "web", UID: "00000000-0000-4000-8000-000000000001"}

var fastTuning = Tuning{RetryMin: time.Second, RetryMax: 4 * time.Second,
	RestartBackoff: 10 * time.Second, RestartMax: time.Minute, HistoryLimit: 100000}

// supervisedSeq is the Seq ProvisionPod answers in the tests; reports
// must be numbered above it.
const supervisedSeq = 100

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
	statuses []controlapi.StatusUpdate
	// statusAt is when each status was written, on the test clock.
	statusAt []time.Time
	mu       sync.Mutex
	// onStatus, when set, sees every status write as it is made.
	onStatus func(controlapi.StatusUpdate)
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
	h.env.RegisterActivity(&controlacts.Control{})
	h.env.RegisterActivity(&hostacts.Activities{})
	h.env.RegisterActivity(&controlacts.Images{})
	ret := func(m *testsuite.MockCallWrapper, v ...any) {
		if m != nil {
			m.Return(v...)
		}
	}
	ret(on(ctl.LoadPod), controlapi.PodSnapshot{Found: true, Spec: spec, Phase: model.PodPending}, nil)
	ret(on(ctl.SchedulePod), controlapi.ScheduleResult{Node: "n1"}, nil)
	ret(on(ctl.AllocatePodIP), controlapi.AllocateResult{IP: "10.88.1.2", PrefixLen: 24, Gateway: "10.88.1.1"}, nil)
	ret(on(img.ResolvePodImage), controlapi.ResolvedImage{Found: true, Kind: model.ImageZoneTemplate, Present: true}, nil)
	h.env.OnActivity(ctl.UpdatePodStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, u controlapi.StatusUpdate) error {
		h.mu.Lock()
		h.statuses = append(h.statuses, u)
		h.statusAt = append(h.statusAt, h.env.Now())
		h.mu.Unlock()
		if h.onStatus != nil {
			h.onStatus(u)
		}
		return nil
	})
	for name, fn := range map[string]any{"ReleasePodIP": ctl.ReleasePodIP, "RemovePod": ctl.RemovePod} {
		ret(on(fn), h.record(name))
	}
	for name, fn := range map[string]any{"DestroyDatasets": host.DestroyDatasets, "DeleteVNIC": host.DeleteVNIC,
		"DeleteZoneConfig": host.DeleteZoneConfig, "UninstallZone": host.UninstallZone, "HaltZone": host.HaltZone,
		"StopContainers": host.StopContainers} {
		ret(on(fn), h.recordSandbox(name))
	}
	ret(on(host.ProvisionPod), func(ctx context.Context, in hostapi.ProvisionInput) (hostapi.ProvisionResult, error) {
		h.calls.add("ProvisionPod")
		h.queues.add("ProvisionPod@" + activity.GetInfo(ctx).TaskQueue)
		if !in.Timed {
			return hostapi.ProvisionResult{Seq: supervisedSeq}, nil
		}
		return hostapi.ProvisionResult{Seq: supervisedSeq, Steps: provisionTimes}, nil
	})
	ret(on(ctl.WaitEndpointsLeft), func(context.Context, controlapi.EndpointsLeftInput) (controlapi.EndpointsLeftResult, error) {
		h.calls.add("WaitEndpointsLeft")
		return controlapi.EndpointsLeftResult{Left: true, Generation: 7}, nil
	})
	ret(on(host.ShutdownZone), func(_ context.Context, _ hostapi.ShutdownInput) (bool, error) {
		h.calls.add("ShutdownZone")
		return true, nil
	})
	ret(on(host.StopContainer), func(context.Context, hostapi.RestartInput) error {
		h.calls.add("StopContainer")
		return nil
	})
	ret(on(host.RestartContainer), func(context.Context, hostapi.RestartInput) (uint64, error) {
		h.calls.add("RestartContainer")
		return uint64(h.env.Now().UnixNano()), nil
	})
	h.env.OnActivity(ctl.ListNodePods, mock.Anything, mock.Anything).Return([]controlapi.PodRef{testRef}, nil).Maybe()
	return h
}

// report sends the node's report after a delay: container app in state
// with the readiness given (Seq from the test clock, so it is newer than
// any restart before it).
func (h *harness) report(after time.Duration, zone string, containers ...model.ContainerReport) {
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalReport, model.PodReport{UID: testRef.UID, Node: "n1", Seq: uint64(h.env.Now().UnixNano()) + 1,
			Zone: zone, Containers: containers})
	}, after)
}

func running(ready bool) model.ContainerReport {
	return model.ContainerReport{Name: "app", State: model.ContainerRunning, Started: true, Ready: ready}
}

func exited(code int32) model.ContainerReport {
	return model.ContainerReport{Name: "app", State: model.ContainerExited, ExitCode: &code, Started: true}
}

func fnName(fn any) string { return runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name() }

func (h *harness) record(name string) func(context.Context, controlapi.PodRef) error {
	return func(context.Context, controlapi.PodRef) error { h.calls.add(name); return nil }
}

func (h *harness) recordSandbox(name string) func(context.Context, hostapi.PodSandbox) error {
	return func(ctx context.Context, _ hostapi.PodSandbox) error {
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

func (h *harness) lastStatus() controlapi.StatusUpdate {
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
	h.run(time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: &zero})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := []string{"ProvisionPod", "HaltZone", "UninstallZone", "DeleteZoneConfig", "DeleteVNIC",
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
	h := newHarness(t, podSpec(), override{fn: ctl.SchedulePod, ret: []any{func(context.Context, controlapi.PodRef) (controlapi.ScheduleResult, error) {
		tries++
		if tries < 4 {
			return controlapi.ScheduleResult{Message: "0/3 nodes are available: 3 Insufficient cpu."}, nil
		}
		return controlapi.ScheduleResult{Node: "n1"}, nil
	}}})
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{})
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
	h := newHarness(t, podSpec(), override{fn: host.ProvisionPod, ret: []any{hostapi.ProvisionResult{},
		temporal.NewApplicationErrorWithOptions("install the zone: zoneadm -z web install: exit 1: brand install failed", "Invalid",
			temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{hostapi.ProvisionProgress{Begun: 4, Step: "InstallZone"}}})}})
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	// The steps begun, the failed one included, are undone in reverse.
	want := []string{"UninstallZone", "DeleteZoneConfig", "DeleteVNIC", "DestroyDatasets", "ReleasePodIP"}
	if !h.calls.has(want...) {
		t.Fatalf("saga ran as %s\nwant %s", h.calls, strings.Join(want, " "))
	}
	var failed *controlapi.StatusUpdate
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

func TestMissingSecretKeepsThePodWaitingUntilItStarts(t *testing.T) {
	var h *harness
	tries := 0
	h = newHarness(t, podSpec(), override{fn: host.ProvisionPod, ret: []any{func(context.Context, hostapi.ProvisionInput) (hostapi.ProvisionResult, error) {
		h.calls.add("ProvisionPod")
		if tries++; tries <= 2 {
			return hostapi.ProvisionResult{}, temporal.NewApplicationErrorWithOptions(`start the containers, attempt 7: CreateContainerConfigError: container "app": secret "db" not found`,
				hostacts.ErrTypeCreateContainerConfig,
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{hostapi.ProvisionProgress{Begun: 7, Step: "StartContainers"}}})
		}
		return hostapi.ProvisionResult{Seq: supervisedSeq}, nil
	}}})
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if !h.calls.has("ProvisionPod", "ProvisionPod", "ProvisionPod") {
		t.Fatalf("provisioning did not run again after the missing secret, or the zone was undone in between: %s", h.calls)
	}
	waited := 0
	for _, st := range h.statuses {
		if st.Phase == model.PodFailed {
			t.Fatalf("the pod failed while its secret was missing: %+v", st)
		}
		if st.Reason == "CreateContainerConfigError" {
			waited++
			if st.Phase != model.PodPending || st.EventType != model.EventWarning || st.Message != `container "app": secret "db" not found` {
				t.Errorf("waiting status: %+v", st)
			}
		}
	}
	if waited != 1 {
		t.Errorf("%d CreateContainerConfigError statuses (with events), want 1 for one missing secret", waited)
	}
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !h.sawReason("Started") || !h.calls.has("RemovePod") {
		t.Fatalf("the pod did not start once its secret was there, or was not removed: %s", h.calls)
	}
}

func TestMissingSecretWhileDeletedUndoesTheZone(t *testing.T) {
	h := newHarness(t, podSpec(), override{fn: host.ProvisionPod, ret: []any{hostapi.ProvisionResult{},
		temporal.NewApplicationErrorWithOptions(`CreateContainerConfigError: container "app": secret "db" not found`,
			hostacts.ErrTypeCreateContainerConfig,
			temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{hostapi.ProvisionProgress{Begun: 7, Step: "StartContainers"}}})}})
	h.run(30*time.Second, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if !h.calls.has("StopContainers", "HaltZone", "UninstallZone", "DeleteZoneConfig", "DeleteVNIC", "DestroyDatasets", "ReleasePodIP") || !h.calls.has("RemovePod") {
		t.Fatalf("a pod deleted while waiting for its secret is not undone and removed: %s", h.calls)
	}
	if !h.sawReason("CreateContainerConfigError") {
		t.Errorf("the pod never said why it waited")
	}
}

func TestCancelMidInstallRollsBack(t *testing.T) {
	h := newHarness(t, podSpec(), override{fn: host.ProvisionPod, after: 10 * time.Minute, ret: []any{hostapi.ProvisionResult{Seq: supervisedSeq}, nil}})
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalCancel, podcontract.CancelSignal{Reason: "wrong image"})
	}, time.Minute)
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	// How far the node got is unknown: everything is undone (idempotently).
	if !h.calls.has("StopContainers", "HaltZone", "UninstallZone", "DeleteZoneConfig", "DeleteVNIC", "DestroyDatasets", "ReleasePodIP") {
		t.Fatalf("cancel did not roll back: %s", h.calls)
	}
	if h.sawReason("Started") {
		t.Fatalf("provisioning went on after cancel: %+v", h.statuses)
	}
	if !h.sawReason("Cancelled") {
		t.Fatal("pod not marked Cancelled")
	}
}

func TestTemporalCancelBehavesLikeTheCancelSignal(t *testing.T) {
	h := newHarness(t, podSpec(), override{fn: host.ProvisionPod, after: 10 * time.Minute, ret: []any{hostapi.ProvisionResult{Seq: supervisedSeq}, nil}})
	h.env.RegisterDelayedCallback(h.env.CancelWorkflow, time.Minute)
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{})
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
		override{fn: host.HaltZone, ret: []any{func(context.Context, hostapi.PodSandbox) error {
			haltedAt = h.env.Now().Sub(start)
			return nil
		}}})
	start = h.env.Now()
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(podcontract.SignalTerminate, podcontract.TerminateSignal{}) }, time.Minute)
	h.env.RegisterDelayedCallback(func() {
		finalizedAt = h.env.Now().Sub(start)
		h.env.SignalWorkflow(podcontract.SignalFinalize, nil)
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

// A graceful delete stops the containers only once no node sends the pod
// traffic; the wait comes out of the grace period, and finalize ends it.
func TestTerminationLeavesTheEndpointsBeforeStopping(t *testing.T) {
	var grace int64
	h := newHarness(t, podSpec(), override{fn: host.ShutdownZone, ret: []any{func(_ context.Context, in hostapi.ShutdownInput) (bool, error) {
		grace = in.GraceSeconds
		return true, nil
	}}}, override{fn: ctl.WaitEndpointsLeft, after: 10 * time.Second, ret: []any{controlapi.EndpointsLeftResult{Left: true}, nil}})
	h.run(time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !h.calls.has("StopContainers") || grace < 19 || grace > 21 {
		t.Fatalf("after a 10s wait to leave the endpoints the shutdown got %ds of the 30s grace period: %s", grace, h.calls)
	}

	h = newHarness(t, podSpec(), override{fn: ctl.WaitEndpointsLeft, after: time.Hour, ret: []any{controlapi.EndpointsLeftResult{}, nil}})
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(podcontract.SignalFinalize, nil) }, time.Minute+5*time.Second)
	h.run(time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !h.calls.has("RemovePod") {
		t.Fatalf("finalize did not end the wait to leave the endpoints: %s", h.calls)
	}
}

func TestLivenessFailureRestartsWithBackoff(t *testing.T) {
	h := newHarness(t, podSpec())
	unhealthy := model.ContainerReport{Name: "app", State: model.ContainerRunning, Started: true, Unhealthy: "liveness probe failed 3 times"}
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute} {
		h.report(at, "running", unhealthy)
	}
	h.run(4*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if got := strings.Count(h.calls.String(), "RestartContainer"); got != 3 {
		t.Fatalf("%d restarts for 3 liveness failures: %s", got, h.calls)
	}
	var backoffs []string
	for _, s := range h.statuses {
		if s.EventReason == "BackOff" {
			backoffs = append(backoffs, s.EventMessage)
		}
	}
	if len(backoffs) != 3 || !strings.Contains(backoffs[0], " in 0s") || !strings.Contains(backoffs[1], " in 10s") || !strings.Contains(backoffs[2], " in 20s") {
		t.Fatalf("back-off did not grow 0s, 10s, 20s: %q", backoffs)
	}
	last := h.lastStatusWithContainers()
	if c := last.ContainerStatuses[0]; c.RestartCount != 3 || c.LastTerminationState.Terminated == nil || c.LastTerminationState.Terminated.Reason != "Unhealthy" {
		t.Fatalf("container status after 3 restarts: %+v", c)
	}
}

func (h *harness) lastStatusWithContainers() controlapi.StatusUpdate {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.statuses) - 1; i >= 0; i-- {
		if len(h.statuses[i].ContainerStatuses) > 0 {
			return h.statuses[i]
		}
	}
	return controlapi.StatusUpdate{}
}

// readyConditions lists the Ready condition's statuses as written.
func (h *harness) readyConditions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, s := range h.statuses {
		for _, c := range s.Conditions {
			if c.Type == model.PodReady {
				out = append(out, c.Status+"/"+c.Reason)
			}
		}
	}
	return out
}

func TestReportsDriveTheReadyCondition(t *testing.T) {
	spec := podSpec(func(s *model.PodSpec) {
		s.Containers[0].ReadinessProbe = &model.Probe{HTTPGet: &model.HTTPGetAction{Port: model.IntValue(8080)}}
	})
	h := newHarness(t, spec)
	h.report(time.Minute, "running", running(true))
	h.report(2*time.Minute, "running", running(true)) // the same state again: nothing to write
	h.report(3*time.Minute, "running", running(false))
	h.run(4*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	got := strings.Join(h.readyConditions(), ",")
	if !strings.HasPrefix(got, "False/,True/,False/,False/Terminating") {
		t.Fatalf("Ready went %s; want False until ready, True, then False, written once each", got)
	}
}

func TestStaleAndForeignReportsAreIgnored(t *testing.T) {
	h := newHarness(t, podSpec())
	h.env.RegisterDelayedCallback(func() {
		code := int32(1)
		stale := model.PodReport{UID: testRef.UID, Node: "n1", Seq: supervisedSeq, Zone: "running",
			Containers: []model.ContainerReport{{Name: "app", State: model.ContainerExited, ExitCode: &code}}}
		h.env.SignalWorkflow(podcontract.SignalReport, stale)
		other := stale
		other.Seq, other.UID = supervisedSeq+1000, "another-incarnation"
		h.env.SignalWorkflow(podcontract.SignalReport, other)
	}, time.Minute)
	h.run(2*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if h.calls.has("RestartContainer") || h.sawReason("BackOff") {
		t.Fatalf("a stale or foreign report was acted on: %s", h.calls)
	}
}

// A report that arrives after a newer one was applied (its delivery was
// slow, or retried after it landed) describes the past: Ready must not go
// back to what it says.
func TestALateOlderReportDoesNotTurnReadyBack(t *testing.T) {
	spec := podSpec(func(s *model.PodSpec) {
		s.Containers[0].ReadinessProbe = &model.Probe{HTTPGet: &model.HTTPGetAction{Port: model.IntValue(8080)}}
	})
	h := newHarness(t, spec)
	send := func(after time.Duration, seq uint64, ready bool) {
		h.env.RegisterDelayedCallback(func() {
			h.env.SignalWorkflow(podcontract.SignalReport, model.PodReport{UID: testRef.UID, Node: "n1", Seq: seq, Zone: "running",
				Containers: []model.ContainerReport{running(ready)}})
		}, after)
	}
	send(time.Minute, supervisedSeq+5, true)
	send(2*time.Minute, supervisedSeq+4, false) // numbered before the one applied
	h.run(3*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if got := strings.Join(h.readyConditions(), ","); !strings.HasPrefix(got, "False/,True/,False/Terminating") {
		t.Fatalf("Ready went %s; want False until ready, True, then False only when terminating", got)
	}
}

func TestExitCodesFollowRestartPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  string
		code    int32
		restart bool
		phase   string
	}{
		{"Always restarts a clean exit", model.RestartAlways, 0, true, ""},
		{"OnFailure restarts a failed exit", model.RestartOnFailure, 2, true, ""},
		{"OnFailure ends a clean exit as Succeeded", model.RestartOnFailure, 0, false, model.PodSucceeded},
		{"Never fails the pod with the exit code", model.RestartNever, 3, false, model.PodFailed},
		{"Never ends a clean exit as Succeeded", model.RestartNever, 0, false, model.PodSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, podSpec(func(s *model.PodSpec) { s.RestartPolicy = tc.policy }))
			h.report(time.Minute, "running", exited(tc.code))
			h.run(5*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
			if h.calls.has("RestartContainer") != tc.restart {
				t.Fatalf("restarted=%t, want %t: %s", !tc.restart, tc.restart, h.calls)
			}
			if tc.phase == "" {
				return
			}
			var end *controlapi.StatusUpdate
			for i := range h.statuses {
				if h.statuses[i].Phase == tc.phase {
					end = &h.statuses[i]
				}
			}
			if end == nil {
				t.Fatalf("pod never %s: %+v", tc.phase, h.statuses)
			}
			term := end.ContainerStatuses[0].State.Terminated
			if term == nil || term.ExitCode != tc.code {
				t.Fatalf("%s pod's container status lacks exit code %d: %+v", tc.phase, tc.code, end.ContainerStatuses)
			}
			if !h.calls.has("HaltZone", "UninstallZone", "DeleteZoneConfig", "DeleteVNIC", "DestroyDatasets", "ReleasePodIP") {
				t.Fatalf("a finished pod keeps its zone: %s", h.calls)
			}
		})
	}
}

func TestNodeNotReadyMakesThePodNotReadyAndBack(t *testing.T) {
	h := newHarness(t, podSpec())
	h.report(time.Minute, "running", running(true))
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(podcontract.SignalNode, podcontract.NodeSignal{Node: "n1", Ready: false}) }, 2*time.Minute)
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(podcontract.SignalNode, podcontract.NodeSignal{Node: "n1", Ready: true}) }, 3*time.Minute)
	h.run(4*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	got := strings.Join(h.readyConditions(), ",")
	if !strings.Contains(got, "True/,False/NodeNotReady,True/") {
		t.Fatalf("Ready went %s; want False/NodeNotReady while the node is, then True", got)
	}
}

func TestFinalizeOnARunningPodChangesNothing(t *testing.T) {
	h := newHarness(t, podSpec())
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(podcontract.SignalFinalize, nil) }, time.Minute)
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(podcontract.UpdateFinalize, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) {
				if !strings.Contains(err.Error(), "not terminating") {
					t.Errorf("finalize refused with %v", err)
				}
				h.calls.add("FinalizeRefused")
			},
			OnAccept:   func() { t.Error("finalize accepted on a running pod") },
			OnComplete: func(any, error) {},
		})
	}, 90*time.Second)
	h.run(3*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if !h.sawReason("FinalizeIgnored") || !h.calls.has("FinalizeRefused") {
		t.Fatalf("finalize on a running pod: event %t, update refused %t", h.sawReason("FinalizeIgnored"), h.calls.has("FinalizeRefused"))
	}
	if h.calls.has("RemovePod") && strings.Index(h.calls.String(), "RemovePod") < strings.Index(h.calls.String(), "HaltZone") {
		t.Fatalf("finalize removed a running pod: %s", h.calls)
	}
}

// costCounter counts the events a workflow run adds to its history, as
// the server would record them: the start (4: started and the first
// workflow task), each activity 6 (scheduled, started, completed and the
// workflow task its completion brings), each local activity 1 (its
// marker; it runs inside the task that called it), each timer 5 (started,
// fired and a workflow task), each signal 4 (signaled and a workflow
// task), each version marker and search-attribute upsert 1.
type costCounter struct {
	mu                                 sync.Mutex
	activities, local, timers, signals int
	markers, events                    int
	onEvent                            func(events int)
}

func (c *costCounter) add(n int, count *int) {
	c.mu.Lock()
	if count != nil {
		*count++
	}
	c.events += n
	e, on := c.events, c.onEvent
	c.mu.Unlock()
	if on != nil {
		on(e)
	}
}

func (c *costCounter) listen(h *harness, onEvent func(events int)) {
	c.onEvent = onEvent
	h.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&costInterceptor{c: c}}})
	h.env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { c.add(6, &c.activities) })
	h.env.SetOnLocalActivityStartedListener(func(*activity.Info, context.Context, []any) { c.add(1, &c.local) })
	h.env.SetOnTimerScheduledListener(func(string, time.Duration) { c.add(5, &c.timers) })
}

func (c *costCounter) snapshot() costSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return costSnapshot{c.activities, c.local, c.timers, c.signals, c.markers, c.events}
}

type costSnapshot struct{ activities, local, timers, signals, markers, events int }

func (a costSnapshot) minus(b costSnapshot) costSnapshot {
	return costSnapshot{a.activities - b.activities, a.local - b.local, a.timers - b.timers, a.signals - b.signals,
		a.markers - b.markers, a.events - b.events}
}

func (a costSnapshot) String() string {
	return fmt.Sprintf("~%d events: %d activities, %d local activities, %d timers, %d signals, %d markers and upserts",
		a.events, a.activities, a.local, a.timers, a.signals, a.markers)
}

// costInterceptor counts what the listeners do not see: the start,
// signals, version markers and search-attribute upserts.
type costInterceptor struct {
	interceptor.WorkerInterceptorBase
	c *costCounter
}

func (i *costInterceptor) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &costInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, c: i.c}
}

type costInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	c *costCounter
}

func (i *costInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&costOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound},
		c: i.c, versions: map[string]bool{}})
}

func (i *costInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	i.c.add(4, nil)
	return i.Next.ExecuteWorkflow(ctx, in)
}

func (i *costInbound) HandleSignal(ctx workflow.Context, in *interceptor.HandleSignalInput) error {
	i.c.add(4, &i.c.signals)
	return i.Next.HandleSignal(ctx, in)
}

type costOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	c        *costCounter
	versions map[string]bool // a change ID records its marker once a run
}

func (o *costOutbound) GetVersion(ctx workflow.Context, changeID string, minSupported, maxSupported workflow.Version) workflow.Version {
	if !o.versions[changeID] {
		o.versions[changeID] = true
		o.c.add(1, &o.c.markers)
	}
	return o.Next.GetVersion(ctx, changeID, minSupported, maxSupported)
}

func (o *costOutbound) UpsertTypedSearchAttributes(ctx workflow.Context, attrs ...temporal.SearchAttributeUpdate) error {
	o.c.add(1, &o.c.markers)
	return o.Next.UpsertTypedSearchAttributes(ctx, attrs...)
}

// The cost budget: a healthy Running pod with a readiness and a liveness
// probe adds nothing to its history for an hour but the supervisor's
// reports, and a report that changes nothing costs only its signal (no
// status write, no timer). Its supervisor sends the same state again every
// ten minutes here, as it does after each agent restart.
func TestRunningPodCostsNothingWhileHealthy(t *testing.T) {
	spec := podSpec(func(s *model.PodSpec) {
		s.Containers[0].ReadinessProbe = &model.Probe{Exec: &model.ExecAction{Command: []string{"true"}}, PeriodSeconds: 10}
		s.Containers[0].LivenessProbe = &model.Probe{TCPSocket: &model.TCPSocketAction{Port: model.IntValue(80)}, PeriodSeconds: 10}
	})
	h := newHarness(t, spec)
	h.env.SetTestTimeout(5 * time.Minute)
	var cost costCounter
	cost.listen(h, nil)
	h.report(time.Minute, "running", running(true))
	var before, after costSnapshot
	h.env.RegisterDelayedCallback(func() { before = cost.snapshot() }, time.Minute+time.Second)
	const again = 6
	for i := range again {
		h.report(time.Duration(i+1)*10*time.Minute, "running", running(true))
	}
	h.env.RegisterDelayedCallback(func() { after = cost.snapshot() }, 61*time.Minute)
	h.run(62*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if !strings.Contains(strings.Join(h.readyConditions(), ","), "True/") {
		t.Fatal("the pod never became Ready")
	}
	hour := after.minus(before)
	t.Logf("an hour Running and Ready: %s", hour)
	if hour.signals != again || hour.events > 4*again {
		t.Fatalf("an hour Running and Ready with %d unchanged reports added %s; the budget is the reports' own %d events", again, hour, 4*again)
	}
}

// A pod waiting for capacity for ten hours continues as new in its waiting
// phase, no run's history passes 2,000 events, and waiting costs at most
// 75 events an hour: a look every RetryMax (5 minutes) is a timer and a
// local activity, 6 events, 72 an hour, and nothing else.
func TestWaitingPodContinuesAsNewWithinItsBudget(t *testing.T) {
	unschedulable := override{fn: ctl.SchedulePod, ret: []any{controlapi.ScheduleResult{Message: "0/3 nodes are available: 3 Insufficient cpu."}, nil}}
	tuning := DefaultTuning
	tuning.HistoryLimit = 500 // continue as new a few times in ten hours
	in := PodInput{Pod: testRef, Tuning: &tuning}
	waited, runs := time.Duration(0), 0
	var total costSnapshot
	for waited < 10*time.Hour {
		runs++
		h := newHarness(t, podSpec(), unschedulable)
		h.env.SetTestTimeout(time.Minute)
		start := h.env.Now()
		var cost costCounter
		cost.listen(h, func(events int) { h.env.SetCurrentHistoryLength(events) })
		h.env.ExecuteWorkflow(PodLifecycle, in)
		run := cost.snapshot()
		total = costSnapshot{total.activities + run.activities, total.local + run.local, total.timers + run.timers,
			total.signals + run.signals, total.markers + run.markers, total.events + run.events}
		if run.events > 2000 {
			t.Fatalf("run %d reached %s", runs, run)
		}
		var can *workflow.ContinueAsNewError
		if err := h.env.GetWorkflowError(); !errors.As(err, &can) {
			t.Fatalf("run %d ended with %v after %s; want continue-as-new", runs, err, h.env.Now().Sub(start))
		}
		waited += h.env.Now().Sub(start)
		in = PodInput{}
		if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
			t.Fatal(err)
		}
		if in.State == nil || in.State.Phase != PhasePending || in.State.Attempt == 0 || in.Tuning == nil || *in.Tuning != tuning {
			t.Fatalf("continued input lost the waiting state: %+v", in)
		}
	}
	if runs < 2 {
		t.Fatalf("ten hours of waiting fit one run")
	}
	// After the first minute's quick retries, at most 75 events an hour.
	perHour := float64(total.events-100) / waited.Hours()
	t.Logf("%s in %d runs over %s: ~%.0f events an hour", total, runs, waited.Round(time.Minute), perHour)
	if perHour > 75 {
		t.Fatalf("waiting cost ~%.0f events an hour (%s); the budget is 75", perHour, total)
	}
}

func TestContinuedRunningPodProvisionsNothing(t *testing.T) {
	h := newHarness(t, podSpec())
	sb := hostapi.PodSandbox{Namespace: testRef.Namespace, Name: testRef.Name, UID: testRef.UID, IP: "10.88.1.2"}
	st := &PodState{Phase: PhaseRunning, Node: "n1", Sandbox: &sb, Run: &RunState{StartedAt: h.env.Now(), Seq: 500,
		Containers: []ContainerRunState{{Name: "app", State: containerRunning, Ready: true, Started: true, Restarts: 2, Since: 500}}}}
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(podcontract.SignalTerminate, podcontract.TerminateSignal{}) }, time.Minute)
	h.env.ExecuteWorkflow(PodLifecycle, PodInput{Pod: testRef, Tuning: &fastTuning, State: st})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if h.calls.has("ProvisionPod") {
		t.Fatalf("a continued Running pod provisioned again: %s", h.calls)
	}
	if !h.calls.has("HaltZone") || !h.calls.has("RemovePod") {
		t.Fatalf("a continued Running pod was not torn down on delete: %s", h.calls)
	}
}

// A provision's progress counts the node's steps; the workflow undoes
// them by position, so both lists must name the same steps in order.
func TestProvisionStepsMatchTheNodes(t *testing.T) {
	if len(provisionSteps) != len(hostops.ProvisionSteps) {
		t.Fatalf("%d steps here, %d on the node", len(provisionSteps), len(hostops.ProvisionSteps))
	}
	for i, st := range provisionSteps {
		if st.name != hostops.ProvisionSteps[i].Name {
			t.Fatalf("step %d is %s here and %s on the node", i, st.name, hostops.ProvisionSteps[i].Name)
		}
	}
}

// A grace period stored before the API bounded it (9223372036 s makes
// time.Duration overflow) saturates at a day instead of failing every
// workflow task, so the pod can still be deleted.
func TestAnUnboundedGracePeriodSaturates(t *testing.T) {
	var grace int64
	h := newHarness(t, podSpec(func(s *model.PodSpec) { g := int64(9223372036); s.TerminationGracePeriodSeconds = &g }),
		override{fn: host.ShutdownZone, ret: []any{func(_ context.Context, in hostapi.ShutdownInput) (bool, error) {
			grace = in.GraceSeconds
			return true, nil
		}}})
	h.run(time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !h.calls.has("ReleasePodIP", "RemovePod") || grace > model.MaxGracePeriodSeconds || grace < model.MaxGracePeriodSeconds-60 {
		t.Fatalf("the shutdown got %ds (want about %d), activities %s", grace, model.MaxGracePeriodSeconds, h.calls)
	}
}

// A cancel signal has no validator: a reason too long for a status is cut.
func TestACancelSignalsLongReasonIsCut(t *testing.T) {
	h := newHarness(t, podSpec(), override{fn: host.ProvisionPod, after: 10 * time.Minute, ret: []any{hostapi.ProvisionResult{Seq: supervisedSeq}, nil}})
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalCancel, podcontract.CancelSignal{Reason: strings.Repeat("r", 1<<20)})
	}, time.Minute)
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	h.mu.Lock()
	defer h.mu.Unlock()
	cut := false
	for _, s := range h.statuses {
		if len(s.Message) > model.MaxReasonBytes+100 || len(s.EventMessage) > model.MaxReasonBytes+100 {
			t.Fatalf("a status carries %d bytes of message", max(len(s.Message), len(s.EventMessage)))
		}
		cut = cut || s.Reason == "Cancelled" && strings.HasSuffix(s.Message, "…")
	}
	if !cut {
		t.Fatal("no Cancelled status with the cut reason")
	}
}

// An agent killed while it uninstalls a zone (its worker gone, the task
// started) must not hold the pod's removal or rollback for the step's
// 30 minutes: the uninstall, in teardown and in compensation alike, runs
// with a heartbeat timeout, so the attempt fails and is retried on the
// restarted agent within seconds (found by make chaos, seed 51).
func TestUninstallHeartbeatsSoADeadAgentIsNoticed(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail bool
	}{{"teardown", false}, {"compensation", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var heartbeat time.Duration
			uninstall := override{fn: host.UninstallZone, ret: []any{func(ctx context.Context, _ hostapi.PodSandbox) error {
				heartbeat = activity.GetInfo(ctx).HeartbeatTimeout
				return nil
			}}}
			overrides := []override{uninstall}
			if tc.fail {
				overrides = append(overrides, override{fn: host.ProvisionPod, ret: []any{hostapi.ProvisionResult{},
					temporal.NewApplicationErrorWithOptions("install the zone: exit 1", "Invalid",
						temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{hostapi.ProvisionProgress{Begun: 4, Step: "InstallZone"}}})}})
			}
			h := newHarness(t, podSpec(), overrides...)
			zero := int64(0)
			h.run(time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: &zero})
			if heartbeat <= 0 || heartbeat > time.Minute {
				t.Fatalf("UninstallZone ran with heartbeat timeout %s; want one of seconds", heartbeat)
			}
		})
	}
}

// A signal delivered in the very workflow task in which the lifecycle
// decides to continue as new is carried into the next run. Cancel is the
// signal here because nothing else brings it back: a delete would be read
// again from the pod's row by the next run.
func TestSignalAtContinueAsNewIsKept(t *testing.T) {
	unschedulable := override{fn: ctl.SchedulePod, ret: []any{controlapi.ScheduleResult{Message: "0/3 nodes are available: 3 Insufficient cpu."}, nil}}
	h := newHarness(t, podSpec(), unschedulable)
	tuning := fastTuning
	tuning.RetryMin, tuning.RetryMax, tuning.HistoryLimit = time.Minute, time.Minute, 1000
	// While the pod waits for its next look, its history passes the limit
	// and a cancel arrives without a workflow task of its own: the task in
	// which the wait ends, and the run may continue as new, delivers it.
	h.env.RegisterDelayedCallback(func() {
		h.env.SetCurrentHistoryLength(5000)
		h.env.SignalWorkflowSkippingWorkflowTask(podcontract.SignalCancel, podcontract.CancelSignal{Reason: "not needed any more"})
	}, 30*time.Second)
	h.env.ExecuteWorkflow(PodLifecycle, PodInput{Pod: testRef, Tuning: &tuning})
	var can *workflow.ContinueAsNewError
	if err := h.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("the run ended with %v; want continue-as-new", err)
	}
	var next PodInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || next.State.Cancel == nil || next.State.Cancel.Reason != "not needed any more" {
		t.Fatalf("the cancel that arrived as the run continued as new was lost: next run's state %+v", next.State)
	}
}
