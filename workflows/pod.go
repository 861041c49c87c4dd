package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/model"
)

// PodLifecycle's public contract: its name, ID, signals and query. The API
// and operators (temporal workflow signal --name finalize) use these.
const (
	PodWorkflowName = "PodLifecycle"
	SignalTerminate = "terminate"
	SignalFinalize  = "finalize"
	SignalCancel    = "cancel"
	// SignalEvict tells the pod to leave its node (NodeHealth on a lost
	// node, the API's drain); its argument is an activities.EvictSignal.
	SignalEvict = activities.SignalEvict
	QueryStatus = "status"
)

// PodWorkflowID is the stable, readable ID of a pod's lifecycle.
func PodWorkflowID(namespace, name string) string { return "pod/" + namespace + "/" + name }

// TerminateSignal asks for a graceful termination (sent by DELETE).
type TerminateSignal struct {
	// GracePeriodSeconds overrides the pod's terminationGracePeriodSeconds;
	// 0 is a forced delete.
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// CancelSignal aborts an in-flight provision and rolls it back.
type CancelSignal struct {
	Reason string `json:"reason,omitempty"`
}

// PodInput starts a lifecycle; Run carries state across continue-as-new.
type PodInput struct {
	Pod activities.PodRef
	Run *PodRunState `json:",omitempty"`
	// Tuning overrides the lifecycle's timings (tests); nil uses DefaultTuning.
	Tuning *Tuning `json:",omitempty"`
}

// PodRunState is a running pod's state, carried across continue-as-new.
type PodRunState struct {
	Node       string
	HostIP     string
	Sandbox    activities.PodSandbox
	StartedAt  time.Time
	Containers []ContainerRunState
	Steps      []StepRecord
}

// ContainerRunState is one container's probe and restart state.
type ContainerRunState struct {
	Name        string
	Ready       bool
	StartupDone bool
	Restarts    int32
	// RestartAt is when a pending restart may run (back-off); zero: none.
	RestartAt     time.Time
	RestartReason string
	LastStart     time.Time
	Probes        []ProbeRunState
}

// ProbeRunState counts consecutive results of one probe.
type ProbeRunState struct {
	Kind      string // startup, liveness, readiness
	Successes int32
	Failures  int32
	NextAt    time.Time
}

// StepRecord is one step of the lifecycle, for the status query.
type StepRecord struct {
	Step     string
	Started  time.Time
	Finished time.Time `json:",omitempty"`
	Attempts int
	Error    string `json:",omitempty"`
}

// PodLifecycleStatus answers the status query.
type PodLifecycleStatus struct {
	Step      string
	Phase     string
	Node      string
	Attempts  int
	LastError string
	Steps     []StepRecord
	Restarts  map[string]int32
}

// Tuning holds the lifecycle's timings.
type Tuning struct {
	MonitorEvery   time.Duration // how often the zone and its services are checked
	RetryMin       time.Duration // first wait before scheduling or allocating again
	RetryMax       time.Duration
	RestartBackoff time.Duration // a container's second restart waits this, doubling
	RestartMax     time.Duration
	HistoryLimit   int // continue-as-new past this many history events
}

// DefaultTuning matches Kubernetes where Kubernetes has a number.
var DefaultTuning = Tuning{
	MonitorEvery:   10 * time.Second,
	RetryMin:       2 * time.Second,
	RetryMax:       30 * time.Second,
	RestartBackoff: 10 * time.Second,
	RestartMax:     5 * time.Minute,
	HistoryLimit:   5000,
}

var host *activities.Host   // method values name the host activities
var ctl *activities.Control // and the control-plane ones

// errCancelled ends a provision that an operator cancelled.
var errCancelled = errors.New("cancelled")

// errMoved: the pod left its node and is to be scheduled again.
var errMoved = errors.New("moved off its node")

// errNodeLost: a host activity was given up because its node is lost.
var errNodeLost = errors.New("node lost")

// PodLifecycle runs one pod from creation to removal: schedule, allocate an
// address, provision its zone on the node as a saga, run it (probes,
// restarts), and on terminate stop it gracefully and remove every trace.
func PodLifecycle(ctx workflow.Context, in PodInput) error {
	t := DefaultTuning
	if in.Tuning != nil {
		t = *in.Tuning
	}
	w := &podWorkflow{in: in, t: t}
	if err := w.setup(ctx); err != nil {
		return err
	}
	return w.run(ctx)
}

type podWorkflow struct {
	in     PodInput
	t      Tuning
	spec   model.PodSpec
	run_   *PodRunState
	status PodLifecycleStatus

	terminate *TerminateSignal
	finalize  bool
	cancel    *CancelSignal
	evict     *activities.EvictSignal
	// movedFrom is the node the pod left, until it is scheduled again.
	movedFrom string
}

func (w *podWorkflow) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (PodLifecycleStatus, error) {
		s := w.status
		if w.run_ != nil {
			s.Steps = w.run_.Steps
			s.Restarts = map[string]int32{}
			for _, c := range w.run_.Containers {
				s.Restarts[c.Name] = c.Restarts
			}
		}
		return s, nil
	}); err != nil {
		return err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, SignalTerminate)
		for {
			var s TerminateSignal
			ch.Receive(ctx, &s)
			// A second, shorter grace period wins, as a second DELETE does.
			if w.terminate == nil || grace(s.GracePeriodSeconds, 1<<31) < grace(w.terminate.GracePeriodSeconds, 1<<31) {
				w.terminate = &s
			}
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, SignalFinalize)
		for {
			ch.Receive(ctx, nil)
			w.finalize = true
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, SignalCancel)
		for {
			var s CancelSignal
			ch.Receive(ctx, &s)
			if s.Reason == "" {
				s.Reason = "cancelled by an operator"
			}
			w.cancel = &s
		}
	})
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, SignalEvict)
		for {
			var s activities.EvictSignal
			ch.Receive(ctx, &s)
			if w.run_ != nil && w.run_.Node != s.Node {
				continue // the pod has left that node already
			}
			// A lost node outranks a drain of the same node.
			if w.evict == nil || w.evict.Node != s.Node || s.Lost {
				w.evict = &s
			}
		}
	})
	return nil
}

// evicting: the pod was told to leave the node it is on.
func (w *podWorkflow) evicting() bool {
	return w.evict != nil && w.run_ != nil && w.evict.Node == w.run_.Node
}

// lost: the pod's node is lost; nothing more is asked of it.
func (w *podWorkflow) lost() bool { return w.evicting() && w.evict.Lost }

// interrupted: the running pod has something else to do than run.
func (w *podWorkflow) interrupted() bool { return w.stopRequested() || w.evicting() }

// hostWait waits for a host activity, unless its node is lost: then the
// activity is given up (nobody polls that node's queue) with errNodeLost.
func (w *podWorkflow) hostWait(ctx workflow.Context, fut workflow.Future) error {
	if err := workflow.Await(ctx, func() bool { return fut.IsReady() || w.lost() }); err != nil || fut.IsReady() {
		return nil // the future's Get tells
	}
	return errNodeLost
}

func grace(g *int64, def int64) int64 {
	if g == nil {
		return def
	}
	return *g
}

func (w *podWorkflow) ref() activities.PodRef { return w.in.Pod }

func (w *podWorkflow) run(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	if err := upsert(ctx, SearchAttrNamespace, w.in.Pod.Namespace, SearchAttrPod, w.in.Pod.Name); err != nil {
		return err
	}
	var snap activities.PodSnapshot
	if err := workflow.ExecuteActivity(ctx, ctl.LoadPod, w.ref()).Get(ctx, &snap); err != nil {
		return err
	}
	if !snap.Found {
		return nil // the row is gone: nothing to run
	}
	w.spec = snap.Spec
	if snap.Deleting && w.terminate == nil {
		g := snap.GracePeriodSeconds
		w.terminate = &TerminateSignal{GracePeriodSeconds: &g}
	}
	if w.in.Run != nil {
		w.run_ = w.in.Run
		w.status.Node, w.status.Phase = w.run_.Node, model.PodRunning
		if err := w.running(ctx); !errors.Is(err, errMoved) {
			return err
		}
	} else if snap.Phase == model.PodFailed || snap.Phase == model.PodSucceeded {
		// A finished pod whose workflow was restarted: wait to be deleted.
		w.status.Phase = snap.Phase
		return w.awaitRemoval(ctx)
	}
	// Each turn places the pod on a node and runs it there; a pod evicted
	// from its node (restartPolicy Always) comes round again.
	for {
		if err := w.placeAndRun(ctx); !errors.Is(err, errMoved) {
			return err
		}
	}
}

func (w *podWorkflow) placeAndRun(ctx workflow.Context) error {
	w.setPhase(ctx, model.PodPending)
	node, err := w.schedule(ctx)
	if err != nil || node == "" {
		return err
	}
	if w.evict != nil && w.evict.Node != node {
		w.evict = nil // about a node the pod left before
	}
	if w.movedFrom != "" {
		w.update(ctx, activities.StatusUpdate{Phase: model.PodPending, EventReason: "Rescheduled",
			EventMessage: fmt.Sprintf("Rescheduled %s from %s to %s", w.ref(), w.movedFrom, node)})
		w.movedFrom = ""
	}
	alloc, err := w.allocate(ctx, node)
	if err != nil || alloc == nil {
		return err
	}
	imageKind := ""
	if workflow.GetVersion(ctx, versionResolveImage, workflow.DefaultVersion, 1) >= 1 {
		kind, stop, err := w.resolveImage(ctx, node)
		if stop || err != nil {
			return w.releaseUnprovisioned(ctx, err)
		}
		imageKind = kind
	}
	w.run_ = &PodRunState{Node: node, HostIP: alloc.HostIP, Sandbox: sandbox(w.in.Pod, w.spec, alloc, imageKind)}
	for _, c := range w.spec.Containers {
		w.run_.Containers = append(w.run_.Containers, newContainerState(c))
	}
	if err := w.provision(ctx); err != nil {
		return w.failed(ctx, err)
	}
	return w.running(ctx)
}

// schedule binds the pod to a node, waiting while none fits. It returns ""
// if the pod was deleted or cancelled meanwhile.
func (w *podWorkflow) schedule(ctx workflow.Context) (string, error) {
	lastMsg := ""
	for attempt := 1; ; attempt++ {
		w.step(ctx, "Schedule", attempt)
		var res activities.ScheduleResult
		if err := workflow.ExecuteActivity(ctx, ctl.SchedulePod, w.ref()).Get(ctx, &res); err != nil {
			return "", err
		}
		if res.Node != "" {
			w.status.Node = res.Node
			w.endStep(ctx, "")
			if err := upsert(ctx, SearchAttrNode, res.Node); err != nil {
				return "", err
			}
			w.update(ctx, activities.StatusUpdate{Phase: model.PodPending, Reason: "", Message: "",
				EventReason: "Scheduled", EventMessage: fmt.Sprintf("Successfully assigned %s to %s", w.ref(), res.Node)})
			return res.Node, nil
		}
		w.status.LastError = res.Message
		if res.Message != lastMsg {
			now := workflow.Now(ctx)
			w.update(ctx, activities.StatusUpdate{Phase: model.PodPending, Reason: "Unschedulable", Message: res.Message,
				Conditions: []model.PodCondition{{Type: model.PodScheduled, Status: model.ConditionFalse, Reason: "Unschedulable", Message: res.Message, LastTransitionTime: &now}},
				EventType:  model.EventWarning, EventReason: "FailedScheduling", EventMessage: res.Message})
			lastMsg = res.Message
		}
		if stop, err := w.waitRetry(ctx, attempt); stop || err != nil {
			return "", w.removeUnprovisioned(ctx, err)
		}
	}
}

// allocate gets the pod an address on its node, waiting while the pod
// CIDR is full.
func (w *podWorkflow) allocate(ctx workflow.Context, node string) (*activities.AllocateResult, error) {
	lastMsg := ""
	for attempt := 1; ; attempt++ {
		w.step(ctx, "AllocateIP", attempt)
		var res activities.AllocateResult
		if err := workflow.ExecuteActivity(ctx, ctl.AllocatePodIP, activities.AllocateInput{Pod: w.ref(), Node: node}).Get(ctx, &res); err != nil {
			return nil, err
		}
		if res.Exhausted == "" {
			w.endStep(ctx, "")
			return &res, nil
		}
		w.status.LastError = res.Exhausted
		if res.Exhausted != lastMsg {
			w.update(ctx, activities.StatusUpdate{Phase: model.PodPending, Reason: "IPExhausted", Message: res.Exhausted,
				EventType: model.EventWarning, EventReason: "FailedAllocateIP", EventMessage: res.Exhausted})
			lastMsg = res.Exhausted
		}
		if stop, err := w.waitRetry(ctx, attempt); stop || err != nil {
			return nil, w.removeUnprovisioned(ctx, err)
		}
	}
}

// waitRetry sleeps with back-off before the next attempt; it reports stop
// when a terminate or cancel arrives instead.
func (w *podWorkflow) waitRetry(ctx workflow.Context, attempt int) (bool, error) {
	d := w.t.RetryMin << min(attempt-1, 10)
	if d > w.t.RetryMax {
		d = w.t.RetryMax
	}
	_, err := workflow.AwaitWithTimeout(ctx, d, func() bool { return w.stopRequested() })
	if temporal.IsCanceledError(err) {
		w.cancel = &CancelSignal{Reason: "workflow cancel requested"}
		return true, nil
	}
	return w.stopRequested(), err
}

func (w *podWorkflow) stopRequested() bool {
	return w.terminate != nil || w.cancel != nil || w.finalize
}

// removeUnprovisioned ends a pod that never got a zone: deleted, it goes;
// cancelled, it stays Failed until deleted.
func (w *podWorkflow) removeUnprovisioned(ctx workflow.Context, err error) error {
	if err != nil {
		return err
	}
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	if w.terminate == nil && !w.finalize {
		w.markFailed(ctx, "Cancelled", w.cancel.Reason)
		return w.awaitRemoval(ctx)
	}
	return w.remove(ctx)
}

// failed rolls nothing back (provision already did) and keeps the pod
// Failed until it is deleted.
func (w *podWorkflow) failed(ctx workflow.Context, err error) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	if errors.Is(err, errCancelled) && w.evicting() && !w.stopRequested() {
		// Evicted while provisioning: the saga rolled back what it could.
		_ = workflow.GetVersion(ctx, versionNodeEviction, workflow.DefaultVersion, 1)
		return w.leftNode(ctx)
	}
	w.run_ = nil // the saga left nothing on the host
	if errors.Is(err, errCancelled) && (w.terminate != nil || w.finalize) {
		return w.remove(ctx) // deleted while provisioning
	}
	if errors.Is(err, errCancelled) {
		reason := "cancelled"
		if w.cancel != nil {
			reason = w.cancel.Reason
		}
		w.markFailed(ctx, "Cancelled", "provisioning cancelled and rolled back: "+reason)
	} else {
		w.markFailed(ctx, "ProvisionFailed", err.Error())
	}
	return w.awaitRemoval(ctx)
}

func (w *podWorkflow) markFailed(ctx workflow.Context, reason, msg string) {
	w.status.LastError = msg
	w.setPhase(ctx, model.PodFailed)
	now := workflow.Now(ctx)
	w.update(ctx, activities.StatusUpdate{Phase: model.PodFailed, Reason: reason, Message: msg,
		Conditions: []model.PodCondition{{Type: model.PodReady, Status: model.ConditionFalse, Reason: reason, LastTransitionTime: &now}},
		EventType:  model.EventWarning, EventReason: reason, EventMessage: msg})
}

// awaitRemoval waits for the delete of a pod that is done (Failed or
// cancelled), then removes whatever it still holds and its row.
func (w *podWorkflow) awaitRemoval(ctx workflow.Context) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	w.step(ctx, "AwaitDelete", 1)
	if err := workflow.Await(ctx, func() bool { return w.terminate != nil || w.finalize }); err != nil {
		return err
	}
	if w.run_ != nil {
		return w.terminateRunning(ctx)
	}
	return w.remove(ctx)
}

// remove releases the address and deletes the row: the pod is gone.
func (w *podWorkflow) remove(ctx workflow.Context) error {
	w.step(ctx, "Remove", 1)
	if err := workflow.ExecuteActivity(ctx, ctl.ReleasePodIP, w.ref()).Get(ctx, nil); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(ctx, ctl.RemovePod, w.ref()).Get(ctx, nil); err != nil {
		return err
	}
	w.endStep(ctx, "")
	return nil
}

func (w *podWorkflow) setPhase(ctx workflow.Context, phase string) {
	if w.status.Phase == phase {
		return
	}
	w.status.Phase = phase
	_ = upsert(ctx, SearchAttrPhase, phase)
}

// update writes a status change; a failure here is logged, not fatal:
// the next update carries the state again.
func (w *podWorkflow) update(ctx workflow.Context, u activities.StatusUpdate) {
	u.Pod = w.ref()
	if err := workflow.ExecuteActivity(ctx, ctl.UpdatePodStatus, u).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not record pod status", "error", err)
	}
}

func (w *podWorkflow) step(ctx workflow.Context, name string, attempt int) {
	w.status.Step, w.status.Attempts = name, attempt
	rec := StepRecord{Step: name, Started: workflow.Now(ctx), Attempts: attempt}
	if w.run_ == nil {
		w.status.Steps = appendStep(w.status.Steps, rec)
		return
	}
	w.run_.Steps = appendStep(w.run_.Steps, rec)
}

func (w *podWorkflow) endStep(ctx workflow.Context, errMsg string) {
	steps := w.status.Steps
	if w.run_ != nil {
		steps = w.run_.Steps
	}
	if n := len(steps); n > 0 {
		steps[n-1].Finished, steps[n-1].Error = workflow.Now(ctx), errMsg
	}
	if errMsg != "" {
		w.status.LastError = errMsg
	}
}

// appendStep keeps the last 50 steps (a retried step updates its record).
func appendStep(steps []StepRecord, rec StepRecord) []StepRecord {
	if n := len(steps); n > 0 && steps[n-1].Step == rec.Step && steps[n-1].Finished.IsZero() {
		steps[n-1].Attempts = rec.Attempts
		return steps
	}
	steps = append(steps, rec)
	if len(steps) > 50 {
		steps = steps[len(steps)-50:]
	}
	return steps
}

func upsert(ctx workflow.Context, kv ...string) error {
	var updates []temporal.SearchAttributeUpdate
	for i := 0; i+1 < len(kv); i += 2 {
		updates = append(updates, temporal.NewSearchAttributeKeyKeyword(kv[i]).ValueSet(kv[i+1]))
	}
	return workflow.UpsertTypedSearchAttributes(ctx, updates...)
}
