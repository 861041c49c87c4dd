package workflows

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	controlacts "github.com/zonewright/zonewright/activities/control"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// fakeNode plays the node's row: an agent heartbeating every 10 s while
// alive, as seen by ObserveNode at the test clock's time.
type fakeNode struct {
	env      *testsuite.TestWorkflowEnvironment
	start    time.Time
	mu       sync.Mutex
	alive    bool
	lastHB   time.Time
	deleted  bool
	tainted  bool
	observed int

	notReadyAt []time.Duration // when MarkNodeNotReady marked it
	readyAt    []time.Duration // when MarkNodeReady ran
	evictedAt  []time.Duration // when each pod was told to leave
	signals    []string        // every signal sent to a pod: "name workflowID"
	// failSignals fails that many signals first (a frontend hiccup).
	failSignals int
	// grace is the grace period the control plane is configured with now.
	grace time.Duration
	// notReadyNodes of nodes are NotReady with this one while it is
	// (0: it alone).
	notReadyNodes, nodes int
	heldAt               []time.Duration // when HoldNodeEvictions ran
	// inputGrace is the grace period the workflow was started with; the
	// sweep judges by grace when set, else by this.
	inputGrace time.Duration
	swept      int // check signals the sweep sent
}

// sweepEvery plays the control plane's sweep (controlops' NodeSweep):
// every d it tells the workflow to look when the node's recorded
// readiness no longer matches its heartbeat.
func (f *fakeNode) sweepEvery(d time.Duration) {
	var tick func()
	tick = func() {
		f.mu.Lock()
		grace := cmp.Or(f.grace, f.inputGrace)
		fresh := f.now().Sub(f.heartbeat()) < grace
		due := !f.deleted && fresh == f.tainted
		if due {
			f.swept++
		}
		f.mu.Unlock()
		if due {
			f.env.SignalWorkflow(SignalNodeCheck, nil)
		}
		f.env.RegisterDelayedCallback(tick, d)
	}
	f.env.RegisterDelayedCallback(tick, d)
}

func (f *fakeNode) now() time.Time { return f.env.Now() }

// deleteAt deletes the node's row at d and tells the workflow to look.
func (f *fakeNode) deleteAt(d time.Duration) {
	f.env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.deleted = true
		f.mu.Unlock()
		f.env.SignalWorkflow(SignalNodeCheck, nil)
	}, d)
}

func (f *fakeNode) heartbeat() time.Time {
	if f.alive {
		// The agent posts every 10 s.
		f.lastHB = f.start.Add(f.now().Sub(f.start).Truncate(10 * time.Second))
	}
	return f.lastHB
}

func (f *fakeNode) setAlive(alive bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeat()
	f.alive = alive
	if alive {
		f.lastHB = f.now()
	}
}

func newNodeEnv(t *testing.T) (*testsuite.TestWorkflowEnvironment, *fakeNode) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	env.RegisterActivity(&controlacts.Control{})
	f := &fakeNode{env: env, alive: true, inputGrace: 40 * time.Second}
	f.start = env.Now()
	f.lastHB = f.start
	f.sweepEvery(5 * time.Second)
	env.OnActivity(ctl.ObserveNode, mock.Anything, mock.Anything).Return(func(context.Context, string) (controlapi.NodeObservation, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.observed++
		if f.deleted {
			return controlapi.NodeObservation{}, nil
		}
		obs := controlapi.NodeObservation{Found: true, HeartbeatAge: f.now().Sub(f.heartbeat()), Tainted: f.tainted, GracePeriod: f.grace}
		if f.tainted {
			obs.NodesNotReady, obs.Nodes = max(f.notReadyNodes, 1), max(f.nodes, 3)
		}
		return obs, nil
	})
	env.OnActivity(ctl.HoldNodeEvictions, mock.Anything, mock.Anything).Return(func(_ context.Context, in controlapi.HoldEvictionsInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.heldAt = append(f.heldAt, f.now().Sub(f.start))
		return nil
	})
	env.OnActivity(ctl.MarkNodeNotReady, mock.Anything, mock.Anything).Return(func(_ context.Context, in controlapi.MarkNotReadyInput) (controlapi.MarkNotReadyResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.now().Sub(f.heartbeat()) < in.GracePeriod {
			return controlapi.MarkNotReadyResult{}, nil
		}
		f.tainted = true
		f.notReadyAt = append(f.notReadyAt, f.now().Sub(f.start))
		return controlapi.MarkNotReadyResult{Marked: true, Changed: true}, nil
	})
	env.OnActivity(ctl.MarkNodeReady, mock.Anything, mock.Anything).Return(func(context.Context, string) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.tainted = false
		f.readyAt = append(f.readyAt, f.now().Sub(f.start))
		return true, nil
	})
	env.OnActivity(ctl.ListNodePods, mock.Anything, mock.Anything).Return(
		[]controlapi.PodRef{{Namespace: "default", Name: "a", UID: "1"}, {Namespace: "default", Name: "b", UID: "2"}}, nil)
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_, id, _, signal string, arg any) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.signals = append(f.signals, signal+" "+id)
			if f.failSignals > 0 {
				f.failSignals--
				return errors.New("transient: frontend unavailable")
			}
			if signal == podcontract.SignalEvict {
				if ev, ok := arg.(podcontract.EvictSignal); !ok || !ev.Lost || ev.Node != "n1" {
					t.Errorf("NodeHealth evicted with %+v", arg)
				}
				f.evictedAt = append(f.evictedAt, f.now().Sub(f.start))
			}
			return nil
		})
	return env, f
}

func within(got, want, slack time.Duration) bool { return got >= want && got <= want+slack }

// The agent dies at 60 s (last heartbeat 60 s): NotReady at 100 s, pods
// evicted once at 400 s, Ready again when it returns at 500 s; the node's
// deletion at 600 s ends the workflow.
func TestNodeHealthNotReadyEvictsOnceAndRecovers(t *testing.T) {
	env, f := newNodeEnv(t)
	env.RegisterDelayedCallback(func() { f.setAlive(false) }, 65*time.Second)
	env.RegisterDelayedCallback(func() { f.setAlive(true) }, 500*time.Second)
	f.deleteAt(600 * time.Second)
	env.ExecuteWorkflow(NodeHealth, NodeHealthInput{Node: "n1", GracePeriod: 40 * time.Second, EvictionTimeout: 5 * time.Minute})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not end cleanly on the node's deletion: completed=%t err=%v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	if len(f.notReadyAt) != 1 || !within(f.notReadyAt[0], 100*time.Second, 2*time.Second) {
		t.Fatalf("NotReady marked at %v; want once, at 100s (last heartbeat 60s + grace 40s)", f.notReadyAt)
	}
	if len(f.evictedAt) != 2 || !within(f.evictedAt[0], f.notReadyAt[0]+5*time.Minute, 2*time.Second) {
		t.Fatalf("pods evicted at %v; want both pods once, eviction timeout after NotReady (%v)", f.evictedAt, f.notReadyAt[0]+5*time.Minute)
	}
	if len(f.readyAt) != 1 || !within(f.readyAt[0], 500*time.Second, 11*time.Second) {
		t.Fatalf("Ready again at %v; want once, soon after 500s", f.readyAt)
	}
	var st NodeHealthState
	if v, err := env.QueryWorkflow(QueryNodeHealth); err != nil || v.Get(&st) != nil {
		t.Fatalf("status query: %v", err)
	}
	if st.NotReady || st.Transitions != 2 || st.Evictions != 2 {
		t.Fatalf("state after recovery: %+v; want Ready, 2 transitions, 2 pods evicted", st)
	}
}

// Most nodes NotReady at once (here 4 of 5, as when the control plane
// itself is overloaded): the eviction due at 400 s is held, said once,
// and made when fewer are NotReady (at 700 s). (Make act ignore
// obs.Disrupted to see the pods evicted at 400 s.)
func TestNodeHealthHoldsEvictionsWhileMostNodesAreNotReady(t *testing.T) {
	env, f := newNodeEnv(t)
	f.notReadyNodes, f.nodes = 4, 5
	env.RegisterDelayedCallback(func() { f.setAlive(false) }, 65*time.Second)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.notReadyNodes = 1
		f.mu.Unlock()
	}, 700*time.Second)
	f.deleteAt(900 * time.Second)
	env.ExecuteWorkflow(NodeHealth, NodeHealthInput{Node: "n1", GracePeriod: 40 * time.Second, EvictionTimeout: 5 * time.Minute})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.heldAt) != 1 || !within(f.heldAt[0], 400*time.Second, 2*time.Second) {
		t.Errorf("evictions held at %v; want once, when due at 400s", f.heldAt)
	}
	if len(f.evictedAt) != 2 || !within(f.evictedAt[0], 700*time.Second, 11*time.Second) {
		t.Errorf("pods evicted at %v; want both once, soon after 700s when 1 of 5 nodes is NotReady", f.evictedAt)
	}
}

// Kubernetes' disruption rule: every node NotReady, or more than two and
// at least 55% of them.
func TestDisruptedIsMostNodesNotReady(t *testing.T) {
	for _, tc := range []struct {
		notReady, nodes int
		want            bool
	}{{0, 0, false}, {1, 1, true}, {2, 2, true}, {1, 2, false}, {2, 3, false}, {3, 5, true}, {3, 6, false}, {11, 20, true}, {10, 20, false}} {
		if got := (controlapi.NodeObservation{NodesNotReady: tc.notReady, Nodes: tc.nodes}).Disrupted(); got != tc.want {
			t.Errorf("%d of %d NotReady: disrupted %t; want %t", tc.notReady, tc.nodes, got, tc.want)
		}
	}
}

// Heartbeats back before the eviction timeout: NotReady and Ready again,
// nothing evicted.
func TestNodeHealthShortOutageEvictsNothing(t *testing.T) {
	env, f := newNodeEnv(t)
	env.RegisterDelayedCallback(func() { f.setAlive(false) }, 5*time.Second)
	env.RegisterDelayedCallback(func() { f.setAlive(true) }, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.deleted = true
		f.mu.Unlock()
	}, 20*time.Minute)
	env.ExecuteWorkflow(NodeHealth, NodeHealthInput{Node: "n1", GracePeriod: 40 * time.Second, EvictionTimeout: 5 * time.Minute})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.notReadyAt) != 1 || len(f.readyAt) != 1 || len(f.evictedAt) != 0 {
		t.Fatalf("notReady=%v ready=%v evicted=%v; want one NotReady, one Ready, no eviction", f.notReadyAt, f.readyAt, f.evictedAt)
	}
}

// A healthy node costs no look of its own: the workflow sleeps until the
// sweep says its heartbeat went stale, looking by itself only once per
// NodeSafetyLook. (Return the stale-by time in act's fresh branch, as
// before versionSweptNodes, to see about 90 looks an hour.)
func TestNodeHealthLeavesAHealthyNodeToTheSweep(t *testing.T) {
	env, f := newNodeEnv(t)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.deleted = true
		f.mu.Unlock()
	}, time.Hour)
	env.ExecuteWorkflow(NodeHealth, NodeHealthInput{Node: "n1", GracePeriod: 40 * time.Second, EvictionTimeout: 5 * time.Minute})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.notReadyAt) != 0 || f.swept != 0 {
		t.Fatalf("a heartbeating node was marked NotReady at %v, swept %d times", f.notReadyAt, f.swept)
	}
	// The first look, then one per safety look until the deletion is seen.
	if want := 1 + int(time.Hour/NodeSafetyLook); f.observed > want {
		t.Fatalf("looked at a healthy node %d times in an hour; want at most %d", f.observed, want)
	}
}

// Past its history limit the workflow continues as new with its state.
func TestNodeHealthContinuesAsNew(t *testing.T) {
	env, f := newNodeEnv(t)
	env.RegisterDelayedCallback(func() { f.setAlive(false) }, time.Second)
	env.ExecuteWorkflow(NodeHealth, NodeHealthInput{Node: "n1", GracePeriod: 5 * time.Second, EvictionTimeout: time.Hour, HistoryLimit: 60})
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	var in NodeHealthInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
		t.Fatal(err)
	}
	if in.Node != "n1" || in.State == nil || !in.State.NotReady || in.State.NotReadySince.IsZero() || in.GracePeriod != 5*time.Second {
		t.Fatalf("continued with %+v (state %+v); want the node NotReady carried over", in, in.State)
	}
}

// A pod on a lost node (restartPolicy Always) is not asked anything more
// of that node: its address is released, it is unbound, scheduled on
// another node, provisioned there, and says where it moved.
func TestPodOnLostNodeMovesToAnotherNode(t *testing.T) {
	h, schedules := evictHarness(t, podSpec())
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalEvict, podcontract.EvictSignal{Node: "n1", Lost: true, Reason: podcontract.ReasonNodeLost})
	}, time.Minute)
	zero := int64(0)
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: &zero})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if *schedules != 2 {
		t.Fatalf("scheduled %d times; want 2 (first placement, then the move)", *schedules)
	}
	q := h.queues.String()
	for _, step := range []string{"HaltZone", "UninstallZone", "StopContainers", "DestroyDatasets"} {
		if strings.Contains(q, step+"@node/n1") {
			t.Fatalf("%s was sent to the lost node: %s", step, q)
		}
	}
	if !strings.Contains(q, "ProvisionPod@node/n1") || !strings.Contains(q, "ProvisionPod@node/n2") || !strings.Contains(q, "DestroyDatasets@node/n2") {
		t.Fatalf("want a zone installed on n1, then on n2, and removed from n2 on delete: %s", q)
	}
	if !h.calls.has("ReleasePodIP", "UnbindPod") {
		t.Fatalf("the address on the lost node was not released before unbinding: %s", h.calls)
	}
	if !h.sawEvent("Rescheduled", "from n1 to n2") {
		t.Fatalf("no Rescheduled event naming both nodes: %+v", h.statuses)
	}
	if !h.calls.has("RemovePod") {
		t.Fatalf("pod not removed on delete: %s", h.calls)
	}
}

// Drain: the live node stops the pod gracefully and removes its zone
// before the pod moves.
func TestDrainedPodStopsGracefullyThenMoves(t *testing.T) {
	h, _ := evictHarness(t, podSpec())
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalEvict, podcontract.EvictSignal{Node: "n1", Reason: podcontract.ReasonEvicted})
	}, time.Minute)
	zero := int64(0)
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: &zero})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	q := h.queues.String()
	want := "StopContainers@node/n1 HaltZone@node/n1 UninstallZone@node/n1 DeleteZoneConfig@node/n1 DeleteVNIC@node/n1 DestroyDatasets@node/n1 ProvisionPod@node/n2"
	if !strings.Contains(q, want) {
		t.Fatalf("host activities ran as\n  %s\nwant in order\n  %s", q, want)
	}
	if !h.calls.has("ShutdownZone") || !h.sawReason("Evicting") {
		t.Fatalf("drain did not shut the zone down gracefully: %s", h.calls)
	}
}

// Under restartPolicy Never a pod on a lost node stays Failed (node health
// marked it NodeLost) and is removed on delete without touching the host.
func TestPodOnLostNodeNeverStaysFailed(t *testing.T) {
	h, schedules := evictHarness(t, podSpec(func(s *model.PodSpec) { s.RestartPolicy = model.RestartNever }))
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalEvict, podcontract.EvictSignal{Node: "n1", Lost: true, Reason: podcontract.ReasonNodeLost})
	}, time.Minute)
	h.run(time.Hour, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if *schedules != 1 || h.calls.has("UnbindPod") {
		t.Fatalf("a Never pod was rescheduled: %s", h.calls)
	}
	if q := h.queues.String(); strings.Contains(q, "Halt") || strings.Contains(q, "Destroy") || strings.Contains(q, "StopContainers") {
		t.Fatalf("host work sent to a lost node: %s", q)
	}
	if !h.calls.has("ReleasePodIP", "RemovePod") {
		t.Fatalf("not removed on delete: %s", h.calls)
	}
}

// A pod deleted while its node is unreachable waits (its stop cannot run)
// until the node is declared lost, then goes away without the host.
func TestPodDeletedOnUnreachableNodeGoesOnceEvicted(t *testing.T) {
	h, _ := evictHarness(t, podSpec(), override{fn: host.StopContainers, after: 24 * time.Hour, ret: []any{nil}})
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalEvict, podcontract.EvictSignal{Node: "n1", Lost: true, Reason: podcontract.ReasonNodeLost})
	}, 10*time.Minute)
	start := h.env.Now()
	h.run(time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !h.calls.has("RemovePod") {
		t.Fatalf("pod not removed: %s", h.calls)
	}
	if ended := h.env.Now().Sub(start); ended < 10*time.Minute || ended > 11*time.Minute {
		t.Fatalf("lifecycle ended at %v; want right after the eviction at 10m", ended)
	}
	if q := h.queues.String(); strings.Contains(q, "HaltZone") {
		t.Fatalf("teardown sent to the lost node: %s", q)
	}
}

// evictHarness is the pod harness with two nodes: the first placement goes
// to n1, later ones to n2.
func evictHarness(t *testing.T, spec model.PodSpec, overrides ...override) (*harness, *int) {
	schedules := 0
	overrides = append(overrides, override{fn: ctl.SchedulePod, ret: []any{func(context.Context, controlapi.PodRef) (controlapi.ScheduleResult, error) {
		schedules++
		if schedules == 1 {
			return controlapi.ScheduleResult{Node: "n1"}, nil
		}
		return controlapi.ScheduleResult{Node: "n2"}, nil
	}}})
	h := newHarness(t, spec, overrides...)
	h.env.OnActivity(ctl.UnbindPod, mock.Anything, mock.Anything).Return(func(context.Context, controlapi.UnbindInput) error {
		h.calls.add("UnbindPod")
		return nil
	})
	return h, &schedules
}

func (h *harness) sawEvent(reason, contains string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.statuses {
		if s.EventReason == reason && strings.Contains(s.EventMessage, contains) {
			return true
		}
	}
	return false
}

// An eviction from a node the pod already left changes nothing.
func TestEvictionFromANodeLeftBeforeIsIgnored(t *testing.T) {
	h, schedules := evictHarness(t, podSpec())
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalEvict, podcontract.EvictSignal{Node: "n1", Reason: podcontract.ReasonEvicted})
	}, time.Minute)
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(podcontract.SignalEvict, podcontract.EvictSignal{Node: "n1", Lost: true, Reason: podcontract.ReasonNodeLost})
	}, 10*time.Minute)
	zero := int64(0)
	h.run(20*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: &zero})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if *schedules != 2 || strings.Count(h.calls.String(), "UnbindPod") != 1 {
		t.Fatalf("scheduled %d times (%s); want one move only", *schedules, h.calls)
	}
	if q := h.queues.String(); !strings.Contains(q, "DestroyDatasets@node/n2") {
		t.Fatalf("the pod was not removed from n2 on delete: %s", q)
	}
}

// Eviction is idempotent: a signal that fails is sent again until every
// pod's lifecycle has it; the pods are told their node's readiness too.
func TestNodeHealthEvictionRetriesFailedSignals(t *testing.T) {
	env, f := newNodeEnv(t)
	env.RegisterDelayedCallback(func() { f.setAlive(false) }, 65*time.Second)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.failSignals = 3
		f.mu.Unlock()
	}, 350*time.Second)
	f.deleteAt(600 * time.Second)
	env.ExecuteWorkflow(NodeHealth, NodeHealthInput{Node: "n1", GracePeriod: 40 * time.Second, EvictionTimeout: 5 * time.Minute})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.evictedAt) != 2 {
		t.Fatalf("%d pods told to leave after 3 failed signals; want both: %v", len(f.evictedAt), f.signals)
	}
	notReady := 0
	for _, s := range f.signals {
		if strings.HasPrefix(s, podcontract.SignalNode+" ") {
			notReady++
		}
	}
	if notReady != 2 {
		t.Fatalf("pods told of the node's readiness %d times; want both pods once: %v", notReady, f.signals)
	}
}

// A grace period changed on the control plane reaches a node whose health
// workflow started with another.
func TestNodeHealthFollowsTheConfiguredGracePeriod(t *testing.T) {
	env, f := newNodeEnv(t)
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.grace = 10 * time.Second
		f.mu.Unlock()
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() { f.setAlive(false) }, 65*time.Second)
	f.deleteAt(200 * time.Second)
	env.ExecuteWorkflow(NodeHealth, NodeHealthInput{Node: "n1", GracePeriod: 40 * time.Second, EvictionTimeout: 5 * time.Minute})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(f.notReadyAt) != 1 || !within(f.notReadyAt[0], 70*time.Second, 2*time.Second) {
		t.Fatalf("NotReady at %v; want at 70s (last heartbeat 60s + the new grace of 10s)", f.notReadyAt)
	}
}
