package workflows

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	controlacts "github.com/zonewright/zonewright/activities/control"
	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// notTakenUpError is what a host activity's future gives when its node did
// not take the task up within ScheduleToStart. The test environment turns
// an activity's error into the failure the server records and back, so the
// workflow sees what it sees with a real server: an ActivityError wrapping
// a TimeoutError of type SCHEDULE_TO_START, which Temporal never retries.
func notTakenUpError() error {
	return temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
}

// hostStepNotTakenUp is a host step whose node does not take it up the
// first times tries, then does it. Each try is recorded in h.calls,
// "name!" for the ones not taken up.
func hostStepNotTakenUp(h **harness, name string, times int) func(context.Context, hostapi.PodSandbox) error {
	tries := 0
	return func(context.Context, hostapi.PodSandbox) error {
		if tries++; tries <= times {
			(*h).calls.add(name + "!")
			return notTakenUpError()
		}
		(*h).calls.add(name)
		return nil
	}
}

// stepName is a host activity's name, as the harness records it.
func stepName(fn any) string {
	name := fnName(fn)
	return strings.TrimSuffix(name[strings.LastIndex(name, ".")+1:], "-fm")
}

func (c *calls) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.log {
		if s == name {
			n++
		}
	}
	return n
}

// Every step that undoes a provision or removes a pod from its node is
// tried again, for as long as it takes, when its node did not take it up
// (an agent restarting, the node unreachable, its worker's slots held);
// the address is released only once every step is done, so no other pod
// can be given it while the zone may still hold it.
func TestUndoAndTeardownStepsNotTakenUpAreTriedUntilDone(t *testing.T) {
	const times = 3
	failed := func() []override {
		return []override{{fn: host.ProvisionPod, ret: []any{hostapi.ProvisionResult{},
			temporal.NewApplicationErrorWithOptions("start the containers: exit 1", "Invalid",
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{hostapi.ProvisionProgress{Begun: len(provisionSteps), Step: "WaitContainersOnline"}}})}}}
	}
	type scenario struct {
		name  string
		steps []sagaStep
		base  func() []override
	}
	var undos []sagaStep
	for _, st := range slices.Backward(provisionSteps) {
		if st.undo != nil {
			undos = append(undos, sagaStep{name: st.name, do: st.undo})
		}
	}
	for _, sc := range []scenario{{"compensation", undos, failed}, {"teardown", teardownSteps, func() []override { return nil }}} {
		for _, st := range sc.steps {
			name := stepName(st.do)
			t.Run(sc.name+"/"+name, func(t *testing.T) {
				var h *harness
				h = newHarness(t, podSpec(), append(sc.base(), override{fn: st.do, ret: []any{hostStepNotTakenUp(&h, name, times)}})...)
				zero := int64(0)
				if sc.name == "compensation" {
					h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{})
				} else {
					h.run(time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: &zero})
				}
				if err := h.env.GetWorkflowError(); err != nil {
					t.Fatal(err)
				}
				if got := h.calls.count(name + "!"); got != times || h.calls.count(name) != 1 {
					t.Fatalf("%s not taken up %d times, done %d times; want %d, then done once: %s", name, got, h.calls.count(name), times, h.calls)
				}
				log := strings.Fields(h.calls.String())
				release := slices.Index(log, "ReleasePodIP")
				if release < 0 || release < slices.Index(log, name) {
					t.Fatalf("the address was released before %s was done: %s", name, h.calls)
				}
				for _, other := range sc.steps[slices.IndexFunc(sc.steps, func(s sagaStep) bool { return fnName(s.do) == fnName(st.do) }):] {
					n := stepName(other.do)
					if i := slices.Index(log, n); i < 0 || i > release {
						t.Fatalf("%s did not run before the address was released: %s", n, h.calls)
					}
				}
				if !h.calls.has("RemovePod") {
					t.Fatalf("the pod was not removed: %s", h.calls)
				}
			})
		}
	}
}

// A node declared lost ends the tries: its agent removes the leftovers
// before it reports Ready again, so the address is released and the pod
// goes.
func TestNodeLostEndsTheTriesOfATeardown(t *testing.T) {
	var h *harness
	h = newHarness(t, podSpec(), override{fn: host.HaltZone, ret: []any{hostStepNotTakenUp(&h, "HaltZone", 1<<30)}})
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalEvict, podcontract.EvictSignal{Node: "n1", Lost: true, Reason: "NodeLost"})
	}, 30*time.Minute)
	zero := int64(0)
	h.run(time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: &zero})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if n := h.calls.count("HaltZone!"); n < 3 || n > 20 {
		t.Fatalf("HaltZone tried %d times in 30 minutes: %s", n, h.calls)
	}
	if h.calls.has("UninstallZone") || !h.calls.has("ReleasePodIP") || !h.calls.has("RemovePod") {
		t.Fatalf("a lost node's pod is not released and removed without more steps: %s", h.calls)
	}
}

// provisionFailing runs a pod of spec whose ProvisionPod fails with err
// its first times tries, then succeeds, for up to 10 minutes (then the
// pod is deleted). It fails the test if the workflow fails or the pod
// does: none of these failures is the pod's.
func provisionFailing(t *testing.T, spec model.PodSpec, times int, err error) *harness {
	t.Helper()
	var h *harness
	tries := 0
	h = newHarness(t, spec, override{fn: host.ProvisionPod, ret: []any{func(context.Context, hostapi.ProvisionInput) (hostapi.ProvisionResult, error) {
		if tries++; tries <= times {
			h.calls.add("ProvisionPod!")
			return hostapi.ProvisionResult{}, err
		}
		h.calls.add("ProvisionPod")
		return hostapi.ProvisionResult{Seq: supervisedSeq}, nil
	}}})
	h.run(10*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	for _, s := range h.statuses {
		if s.Phase == model.PodFailed {
			t.Fatalf("the pod failed (%s: %s) on a provision that was no fault of its: %s", s.Reason, s.Message, h.calls)
		}
	}
	return h
}

// A provision its node did not take up is no fault of the pod's: it waits
// Pending and runs again, whatever its restartPolicy, and a pod deleted
// meanwhile undoes every step (an earlier attempt may have begun some).
func TestProvisionNotTakenUpWaitsAndRunsAgain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		times int
	}{{"taken up later", 2}, {"deleted meanwhile", 1 << 30}} {
		t.Run(tc.name, func(t *testing.T) {
			h := provisionFailing(t, podSpec(func(s *model.PodSpec) { s.RestartPolicy = model.RestartNever }), tc.times, notTakenUpError())
			if !h.sawReason(ReasonNodeNotResponding) {
				t.Fatalf("the pod did not say why it waits: %s", h.calls)
			}
			if tc.times < 1<<30 {
				if !h.calls.has("ProvisionPod!", "ProvisionPod!", "ProvisionPod") || !h.sawReason("Started") {
					t.Fatalf("the provision did not run again and start the pod: %s", h.calls)
				}
				return
			}
			if n := h.calls.count("ProvisionPod!"); n < 3 {
				t.Fatalf("the provision was tried %d times in 10 minutes", n)
			}
			log := strings.Fields(h.calls.String())
			undone := strings.Join(log[slices.Index(log, "ProvisionPod!")+h.calls.count("ProvisionPod!"):], " ")
			if undone != "StopContainers HaltZone UninstallZone DeleteZoneConfig DeleteVNIC DestroyDatasets ReleasePodIP ReleasePodIP RemovePod" {
				t.Fatalf("a pod deleted while its provision waited did not undo every step before its address was released: %s", undone)
			}
		})
	}
}

// A provision whose answer never reached the server (its heartbeats timed
// out: a Temporal too loaded to record them, as in the isolated 1,000-pod
// scale run, where two pods whose ProvisionPod reached its third attempt
// stayed not Ready), or whose attempts were interrupted (the SDK ends an
// attempt whose heartbeat does not get through: one pod of a later run
// failed "context canceled" three times), is no fault of the pod's
// either: it waits Pending and runs again instead of leaving the pod
// Failed. Drop the interrupted case from provisionAnswerLost to see the
// second fail.
func TestProvisionWhoseAnswerIsLostRunsAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"heartbeat timeout", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)},
		{"interrupted", temporal.NewApplicationError("the provision was interrupted: context canceled", hostacts.ErrTypeInterrupted)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// More than one activity's three attempts.
			h := provisionFailing(t, podSpec(), 4, tc.err)
			if !h.sawReason(ReasonNodeNotResponding) || !h.calls.has("ProvisionPod!", "ProvisionPod") || !h.sawReason("Started") {
				t.Fatalf("the provision did not wait, run again and start the pod: %s", h.calls)
			}
		})
	}
}

// A claim's node steps, in its deletion and its growth, are tried again
// when the node did not take them up; the workflow does not fail.
func TestClaimSyncTriesNodeStepsNotTakenUpAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   controlapi.ClaimState
		step any
		then any // the control step that follows
	}{
		{"delete", controlapi.ClaimState{Found: true, Deleting: true, Node: "a", Volume: hostapi.ClaimVolume{Name: "db", UID: "u1"}},
			host.DestroyClaimVolume, ctl.RemoveClaim},
		{"grow", controlapi.ClaimState{Found: true, Node: "a", Volume: hostapi.ClaimVolume{Name: "db", UID: "u1", Bytes: 2 << 30}, CapacityBytes: 1 << 30},
			host.ResizeClaimVolume, ctl.ClaimResized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
			env := suite.NewTestWorkflowEnvironment()
			env.SetTestTimeout(time.Minute)
			env.RegisterActivity(&controlacts.Control{})
			env.RegisterActivity(&hostacts.Activities{})
			st := tc.st
			var log []string
			tries := 0
			env.OnActivity(ctl.LoadClaim, mock.Anything, mock.Anything).Return(func(context.Context, controlapi.ClaimRef) (controlapi.ClaimState, error) {
				return st, nil
			})
			env.OnActivity(tc.step, mock.Anything, mock.Anything).Return(func(context.Context, hostapi.ClaimVolume) error {
				if tries++; tries <= 3 {
					log = append(log, "not taken up")
					return notTakenUpError()
				}
				log = append(log, "done")
				return nil
			})
			env.OnActivity(tc.then, mock.Anything, mock.Anything).Return(func(context.Context, controlapi.ClaimTarget) error {
				log = append(log, "recorded")
				st = controlapi.ClaimState{} // gone, or as the node has it
				return nil
			})
			env.ExecuteWorkflow(ClaimSync, ClaimInput{Claim: controlapi.ClaimRef{Namespace: "default", Name: "db"}})
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow: completed %v, error %v (%v)", env.IsWorkflowCompleted(), env.GetWorkflowError(), log)
			}
			want := "not taken up, not taken up, not taken up, done, recorded"
			if got := strings.Join(log, ", "); got != want {
				t.Fatalf("steps: %s\nwant: %s", got, want)
			}
		})
	}
}

// The error shape the retries rely on is the one the SDK makes of a
// server's ScheduleToStart timeout, also on a later attempt (where it
// wraps the previous attempt's failure).
func TestNotTakenUpRecognisesTheServersTimeout(t *testing.T) {
	prev := temporal.NewApplicationError("halt the zone, attempt 1: zoneadm: exit 1", "Transient")
	for _, err := range []error{
		notTakenUpError(),
		temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, prev),
		fmt.Errorf("step ProvisionPod on node n1 failed: %w", temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, prev)),
	} {
		if !notTakenUp(err) || !retryableHostFailure(err) {
			t.Errorf("%v: not seen as a task not taken up", err)
		}
	}
	for _, err := range []error{
		temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil),
		temporal.NewNonRetryableApplicationError("invalid", "Invalid", nil),
		temporal.NewCanceledError(),
	} {
		if notTakenUp(err) {
			t.Errorf("%v: seen as a task not taken up", err)
		}
	}
	if retryableHostFailure(temporal.NewNonRetryableApplicationError("invalid", "Invalid", nil)) || retryableHostFailure(temporal.NewCanceledError()) {
		t.Error("a final failure is tried again")
	}
}

// A provision that fails for good after one its node did not take up
// undoes every step, not only those this try begun: the earlier try may
// have run on the node (its task taken up by an agent that then died) and
// built more.
func TestAFailedProvisionAfterAWaitUndoesEveryStep(t *testing.T) {
	var h *harness
	tries := 0
	h = newHarness(t, podSpec(), override{fn: host.ProvisionPod, ret: []any{func(context.Context, hostapi.ProvisionInput) (hostapi.ProvisionResult, error) {
		if tries++; tries == 1 {
			h.calls.add("ProvisionPod!")
			return hostapi.ProvisionResult{}, notTakenUpError()
		}
		h.calls.add("ProvisionPod")
		return hostapi.ProvisionResult{}, temporal.NewApplicationErrorWithOptions("create the VNIC: exit 1", "Invalid",
			temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{hostapi.ProvisionProgress{Begun: 2, Step: "CreateVNIC"}}})
	}}})
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !h.calls.has("ProvisionPod!", "ProvisionPod", "StopContainers", "HaltZone", "UninstallZone", "DeleteZoneConfig", "DeleteVNIC", "DestroyDatasets", "ReleasePodIP") {
		t.Fatalf("not every step was undone: %s", h.calls)
	}
	if !h.sawReason("ProvisionFailed") {
		t.Fatalf("the pod did not fail for its provision: %s", h.calls)
	}
}

// A second DELETE with a shorter grace period shortens a stop already
// under way, as in Kubernetes: the wait for the zone to shut down and the
// wait to leave the endpoints end when the shorter period, counted from
// the second DELETE, ends; a longer one changes nothing.
func TestALaterShorterGracePeriodShortensTheStopUnderWay(t *testing.T) {
	two, zero, hour := int64(2), int64(0), int64(3600)
	for _, tc := range []struct {
		name      string
		overrides []override
		second    podcontract.TerminateSignal
		halt      time.Duration // after the second terminate, at most
		noHalt    time.Duration // after the second terminate, at least
	}{
		{"shutdown shortened", []override{{fn: host.ShutdownZone, after: 25 * time.Second, ret: []any{true, nil}}},
			podcontract.TerminateSignal{GracePeriodSeconds: &two}, 3 * time.Second, 2 * time.Second},
		{"shutdown forced", []override{{fn: host.ShutdownZone, after: 25 * time.Second, ret: []any{true, nil}}},
			podcontract.TerminateSignal{GracePeriodSeconds: &zero}, time.Second, 0},
		{"endpoints wait forced", []override{{fn: ctl.WaitEndpointsLeft, after: time.Hour, ret: []any{controlapi.EndpointsLeftResult{}, nil}}},
			podcontract.TerminateSignal{GracePeriodSeconds: &zero}, time.Second, 0},
		{"endpoints wait shortened", []override{{fn: ctl.WaitEndpointsLeft, after: time.Hour, ret: []any{controlapi.EndpointsLeftResult{}, nil}}},
			podcontract.TerminateSignal{GracePeriodSeconds: &two}, 3 * time.Second, 2 * time.Second},
		{"longer changes nothing", []override{{fn: host.ShutdownZone, after: 25 * time.Second, ret: []any{true, nil}}},
			podcontract.TerminateSignal{GracePeriodSeconds: &hour}, 21 * time.Second, 19 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			var secondAt, haltedAt time.Time
			h = newHarness(t, podSpec(), append(tc.overrides, override{fn: host.HaltZone, ret: []any{func(context.Context, hostapi.PodSandbox) error {
				if haltedAt.IsZero() {
					haltedAt = h.env.Now()
				}
				h.calls.add("HaltZone")
				return nil
			}}})...)
			h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(podcontract.SignalTerminate, podcontract.TerminateSignal{}) }, time.Minute)
			h.env.RegisterDelayedCallback(func() {
				secondAt = h.env.Now()
				h.env.SignalWorkflow(podcontract.SignalTerminate, tc.second)
			}, time.Minute+5*time.Second)
			h.run(0, "", nil)
			if err := h.env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if haltedAt.IsZero() || !h.calls.has("RemovePod") {
				t.Fatalf("the pod was not removed: %s", h.calls)
			}
			if d := haltedAt.Sub(secondAt); d > tc.halt || d < tc.noHalt {
				t.Fatalf("the zone was halted %s after the second delete (grace %ds of the pod's 30s); want between %s and %s: %s",
					d, *tc.second.GracePeriodSeconds, tc.noHalt, tc.halt, h.calls)
			}
		})
	}
}

// A pull its node did not take up fails that node's pull with a message
// that says so (the pods waiting for the image show it), not Temporal's
// wrapping of the timeout.
func TestAPullNotTakenUpSaysSo(t *testing.T) {
	h := newImageHarness(t)
	h.env.OnActivity(img.ImagePullPlan, mock.Anything, mock.Anything).Return(
		controlapi.NodePull{Image: hostapi.NodeImage{Name: "ubuntu", Kind: model.ImageLXTarball}}, nil)
	h.env.OnActivity(host.PullImage, mock.Anything, mock.Anything).Return(hostapi.NodeImageResult{}, notTakenUpError())
	h.env.OnActivity(ctl.WakeImageWaiters, mock.Anything, mock.Anything).Return(nil)
	h.env.RegisterActivity(&controlacts.Control{})
	h.env.ExecuteWorkflow(ImagePull, ImagePullInput{Image: "ubuntu", Node: "n1"})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	u := h.nodes["n1"]
	if u.Phase != model.ImageFailed || u.Message != "node n1 did not take up the pull within 5m0s (its agent down, unreachable or busy)" {
		t.Fatalf("node status %+v", u)
	}
}
