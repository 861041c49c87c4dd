package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// A restart that fails (every attempt of RestartContainer) starts nothing:
// the container stays down, backing off, and is tried again until a
// restart works; only that one counts, and no status in between shows it
// running.
func TestAFailedRestartBacksOffAndIsTriedAgain(t *testing.T) {
	const failedCalls = 10 // two restarts of five attempts each
	var h *harness
	calls := 0
	var restartedAt time.Time
	h = newHarness(t, podSpec(), override{fn: host.RestartContainer, ret: []any{func(context.Context, hostapi.RestartInput) (uint64, error) {
		h.calls.add("RestartContainer")
		if calls++; calls <= failedCalls {
			return 0, errors.New("svcadm clear: exit status 1")
		}
		restartedAt = h.env.Now()
		return uint64(h.env.Now().UnixNano()), nil
	}}})
	start := h.env.Now()
	h.report(time.Minute, "running", exited(1))
	h.report(10*time.Minute, "running", running(true))
	h.run(11*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if calls != failedCalls+1 || restartedAt.IsZero() {
		t.Fatalf("RestartContainer ran %d times; want %d failed attempts, then one that works", calls, failedCalls)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var running, failures int
	for i, s := range h.statuses {
		if s.EventReason == "RestartFailed" {
			failures++
		}
		if len(s.ContainerStatuses) == 0 || h.statusAt[i].Before(start.Add(time.Minute)) {
			continue
		}
		c := s.ContainerStatuses[0]
		if h.statusAt[i].Before(restartedAt) {
			if c.State.Running != nil || c.RestartCount != 0 {
				t.Fatalf("at %s, before any restart worked, the container shows %+v (restarts %d)",
					h.statusAt[i].Sub(start), c.State, c.RestartCount)
			}
			if c.State.Waiting == nil || c.State.Waiting.Reason != "CrashLoopBackOff" {
				t.Fatalf("at %s the container is not backing off: %+v", h.statusAt[i].Sub(start), c.State)
			}
			continue
		}
		if c.State.Running != nil {
			running++
		}
	}
	if failures != 2 || running == 0 {
		t.Fatalf("%d RestartFailed events (want 2), %d statuses running after the restart", failures, running)
	}
	if c := h.lastStatusWithContainersLocked(); c.RestartCount != 1 || !c.Ready || c.State.Running == nil {
		t.Fatalf("after the restart that worked the container is %+v; want running, ready, 1 restart", c)
	}
}

func (h *harness) lastStatusWithContainersLocked() model.ContainerStatus {
	for i := len(h.statuses) - 1; i >= 0; i-- {
		if s := h.statuses[i]; len(s.ContainerStatuses) > 0 && s.Phase == model.PodRunning && s.EventReason != "Killing" {
			return s.ContainerStatuses[0]
		}
	}
	return model.ContainerStatus{}
}

func twoContainers(policy string) model.PodSpec {
	return podSpec(func(s *model.PodSpec) {
		s.RestartPolicy = policy
		s.Containers = append(s.Containers, model.Container{Name: "side", Image: "base", Command: []string{"sleep", "1000"}})
	})
}

func named(name string, c model.ContainerReport) model.ContainerReport {
	c.Name = name
	return c
}

// Under restartPolicy Never a container that fails ends alone: its sibling
// runs on, and the pod ends when every container has (Failed, as one
// failed). Under OnFailure a container that completes waits for its
// sibling, and the pod Succeeds when both have.
func TestAContainerThatEndsLeavesItsSiblingsRunning(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		first        int32
		phase        string
	}{
		{"Never, one fails", model.RestartNever, 3, model.PodFailed},
		{"Never, all complete", model.RestartNever, 0, model.PodSucceeded},
		{"OnFailure, all complete", model.RestartOnFailure, 0, model.PodSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h *harness
			var haltedAt time.Time
			h = newHarness(t, twoContainers(tc.policy), override{fn: host.HaltZone, ret: []any{func(context.Context, hostapi.PodSandbox) error {
				h.calls.add("HaltZone")
				haltedAt = h.env.Now()
				return nil
			}}})
			start := h.env.Now()
			h.report(time.Minute, "running", named("app", exited(tc.first)), named("side", running(true)))
			h.report(3*time.Minute, "running", named("app", exited(tc.first)), named("side", exited(0)))
			h.run(5*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
			if err := h.env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if haltedAt.IsZero() || haltedAt.Before(start.Add(3*time.Minute)) {
				t.Fatalf("the zone was halted at %s, before the sibling ended (3m0s)", haltedAt.Sub(start))
			}
			if h.calls.has("RestartContainer") {
				t.Fatalf("a container was restarted: %s", h.calls)
			}
			var end *controlapi.StatusUpdate
			for i := range h.statuses {
				if p := h.statuses[i].Phase; p == model.PodFailed || p == model.PodSucceeded {
					end = &h.statuses[i]
				}
			}
			if end == nil || end.Phase != tc.phase {
				t.Fatalf("the pod ended %+v; want %s", end, tc.phase)
			}
			for i, want := range []int32{tc.first, 0} {
				c := end.ContainerStatuses[i]
				if c.State.Terminated == nil || c.State.Terminated.ExitCode != want {
					t.Fatalf("container %s ended %+v; want exit code %d", c.Name, c.State, want)
				}
			}
		})
	}
}

// kubelet kills a container that failed its liveness probe and starts it
// again after its back-off: it is not left running through the back-off.
func TestALivenessFailureStopsTheContainerBeforeItsBackOff(t *testing.T) {
	var h *harness
	var stoppedAt, restartedAt []time.Duration
	var start time.Time
	h = newHarness(t, podSpec(),
		override{fn: host.StopContainer, ret: []any{func(context.Context, hostapi.RestartInput) error {
			h.calls.add("StopContainer")
			stoppedAt = append(stoppedAt, h.env.Now().Sub(start))
			return nil
		}}},
		override{fn: host.RestartContainer, ret: []any{func(context.Context, hostapi.RestartInput) (uint64, error) {
			h.calls.add("RestartContainer")
			restartedAt = append(restartedAt, h.env.Now().Sub(start))
			return uint64(h.env.Now().UnixNano()), nil
		}}})
	start = h.env.Now()
	unhealthy := model.ContainerReport{Name: "app", State: model.ContainerRunning, Started: true, Unhealthy: "liveness probe failed 3 times"}
	h.report(time.Minute, "running", unhealthy)
	h.report(2*time.Minute, "running", unhealthy) // the second back-off is 10 s
	h.run(3*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !h.calls.has("StopContainer", "RestartContainer", "StopContainer", "RestartContainer") {
		t.Fatalf("a liveness failure did not stop the container before it restarted: %s", h.calls)
	}
	if len(stoppedAt) != 2 || stoppedAt[1] > 2*time.Minute+time.Second || restartedAt[1]-stoppedAt[1] < 10*time.Second {
		t.Fatalf("stopped at %v, restarted at %v; want the stop at the failure and the restart 10s later", stoppedAt, restartedAt)
	}
}

// Under Never a container that fails its liveness probe is stopped and
// ends; the pod fails once it has.
func TestALivenessFailureUnderNeverStopsTheContainer(t *testing.T) {
	h := newHarness(t, podSpec(func(s *model.PodSpec) { s.RestartPolicy = model.RestartNever }))
	h.report(time.Minute, "running", model.ContainerReport{Name: "app", State: model.ContainerRunning, Started: true, Unhealthy: "liveness probe failed 3 times"})
	h.run(3*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if !h.calls.has("StopContainer") || h.calls.has("RestartContainer") || !h.calls.has("HaltZone") {
		t.Fatalf("activities: %s", h.calls)
	}
	if !h.sawReason("ContainerFailed") {
		t.Fatal("the pod did not fail")
	}
}

// kubelet forgets a container's crashes once it has run 10 minutes: a
// crash after a long run restarts at once, not after the grown back-off.
func TestTheBackOffResetsAfterTenMinutesRunning(t *testing.T) {
	h := newHarness(t, podSpec())
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 15 * time.Minute, 16 * time.Minute} {
		h.report(at, "running", exited(1))
	}
	h.env.SetTestTimeout(5 * time.Minute)
	h.run(17*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var delays []string
	for _, s := range h.statuses {
		if s.EventReason == "BackOff" {
			_, d, _ := strings.Cut(s.EventMessage, " in ")
			d, _, _ = strings.Cut(d, ":")
			delays = append(delays, d)
		}
	}
	if got := strings.Join(delays, ","); got != "0s,10s,20s,0s,10s" {
		t.Fatalf("back-offs %s; want 0s,10s,20s, then after 12 minutes running 0s and 10s again", got)
	}
}

// A pod cancelled while it runs ends Failed with its containers killed
// with the zone: none shows running or ready.
func TestACancelledPodShowsItsContainersTerminated(t *testing.T) {
	h := newHarness(t, podSpec())
	h.report(time.Minute, "running", running(true))
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalCancel, podcontract.CancelSignal{Reason: "wrong image"})
	}, 2*time.Minute)
	h.run(3*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var end *controlapi.StatusUpdate
	for i := range h.statuses {
		if h.statuses[i].Phase == model.PodFailed {
			end = &h.statuses[i]
		}
	}
	if end == nil || end.Reason != "Cancelled" || len(end.ContainerStatuses) != 1 {
		t.Fatalf("the pod did not end Cancelled with its container: %+v", end)
	}
	if c := end.ContainerStatuses[0]; c.Ready || c.State.Running != nil || c.State.Terminated == nil {
		t.Fatalf("a cancelled pod's container shows ready=%t, state %+v; want terminated, not ready", c.Ready, c.State)
	}
}
