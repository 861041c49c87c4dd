package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// Phase is where a lifecycle is. Every phase keeps all it needs in
// PodState, so every phase can continue-as-new.
type Phase string

// The lifecycle's phases, in their usual order.
const (
	PhasePending      Phase = "Pending"      // waiting for a node
	PhaseScheduled    Phase = "Scheduled"    // bound; waiting for an address
	PhaseImagePulling Phase = "ImagePulling" // waiting for the image on the node
	PhaseProvisioning Phase = "Provisioning" // building the zone (a saga)
	PhaseRunning      Phase = "Running"      // reacting to the node's reports
	PhaseTerminating  Phase = "Terminating"  // stopping within the grace period
	PhaseRemoving     Phase = "Removing"     // releasing the address, removing the row
	PhaseFailed       Phase = "Failed"       // holds nothing on a host; waits to be deleted
	PhaseSucceeded    Phase = "Succeeded"
)

// PodInput starts a lifecycle; State carries it across continue-as-new.
type PodInput struct {
	Pod controlapi.PodRef
	// Tuning is written by whoever starts the lifecycle, so changing a
	// default never changes running workflows; nil takes DefaultTuning
	// once, and it is carried from then on.
	Tuning *Tuning   `json:",omitempty"`
	State  *PodState `json:",omitempty"`
}

// PodState is everything a lifecycle knows.
type PodState struct {
	Phase Phase
	// Attempt counts the tries of a waiting phase; Waiting is the reason
	// last reported while waiting (an event is recorded when it changes).
	Attempt int    `json:",omitempty"`
	Waiting string `json:",omitempty"`
	Node    string `json:",omitempty"`
	HostIP  string `json:",omitempty"`
	// Sandbox exists once the pod holds an address.
	Sandbox *hostapi.PodSandbox `json:",omitempty"`
	// MovedFrom is the node an evicted pod left, until it is placed again.
	MovedFrom string `json:",omitempty"`
	// Claims are the pod's claims as placed: their datasets are on Node.
	Claims []hostapi.ClaimVolume `json:",omitempty"`
	Run    *RunState             `json:",omitempty"`
	// Why the pod failed or succeeded, once it did.
	Reason, Message string `json:",omitempty"`
	// What was asked of it.
	Terminate    *podcontract.TerminateSignal `json:",omitempty"`
	Finalize     bool                         `json:",omitempty"`
	Cancel       *podcontract.CancelSignal    `json:",omitempty"`
	Evict        *podcontract.EvictSignal     `json:",omitempty"`
	NodeNotReady bool                         `json:",omitempty"`
	// Report is the newest node report not applied yet.
	Report *model.PodReport `json:",omitempty"`
	Steps  []StepRecord     `json:",omitempty"`
	// Startup records the pod's first start as it goes (pod_startup.go);
	// StartMeasured: it was Ready once and the start was measured, so a
	// later start (after an eviction) is not.
	Startup       *controlapi.PodStartup `json:",omitempty"`
	StartMeasured bool                   `json:",omitempty"`
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
	Step      string // the phase
	Phase     string // the pod's phase as the API shows it
	Node      string
	Attempts  int
	LastError string
	Steps     []StepRecord
	Restarts  map[string]int32
}

// Tuning holds the lifecycle's timings.
type Tuning struct {
	RetryMin time.Duration // first wait before a waiting phase tries again
	// RetryMax caps that wait; with it a waiting pod costs a bounded
	// number of history events per hour.
	RetryMax       time.Duration
	RestartBackoff time.Duration // a container's second restart waits this, doubling
	RestartMax     time.Duration
	HistoryLimit   int // continue-as-new past this many history events
	// RestartBackoffReset: a container that ran this long before it
	// ended restarts at once, its back-off forgotten (zero: 10 minutes).
	RestartBackoffReset time.Duration `json:",omitempty"`
}

// DefaultTuning matches Kubernetes where Kubernetes has a number; a pod
// waits at most 5 minutes between looks (about 70 history events an hour).
var DefaultTuning = Tuning{
	RetryMin:            2 * time.Second,
	RetryMax:            5 * time.Minute,
	RestartBackoff:      10 * time.Second,
	RestartMax:          5 * time.Minute,
	HistoryLimit:        1500,
	RestartBackoffReset: defaultBackOffReset,
}

// defaultBackOffReset is kubelet's: a container that ran 10 minutes
// without a problem has its restart back-off reset.
const defaultBackOffReset = 10 * time.Minute

var host *hostacts.Activities  // method values name the host activities
var ctl *controlapi.Activities // and the control-plane ones

// errNodeLost: a host activity was given up because its node is lost.
var errNodeLost = errors.New("node lost")

// PodLifecycle runs one pod from creation to removal as a phase machine:
// schedule, allocate an address, wait for the image, provision the zone as
// a saga, run it (reacting to what its node reports; restarts with back-off
// per restartPolicy), and on terminate stop it gracefully and remove every
// trace.
func PodLifecycle(ctx workflow.Context, in PodInput) error {
	w := &podWorkflow{in: in, t: DefaultTuning}
	if in.Tuning != nil {
		w.t = *in.Tuning
	}
	w.in.Tuning = &w.t
	if in.State != nil {
		w.st = *in.State
	}
	if err := w.setup(ctx); err != nil {
		return err
	}
	return w.run(ctx)
}

type podWorkflow struct {
	in   PodInput
	t    Tuning
	spec model.PodSpec
	// limits are the process limits the pod's annotations ask of its
	// zone, read with spec at the start of each run.
	limits model.ZoneProcessLimits
	st     PodState

	// Not carried across continue-as-new: the last error for the query,
	// a wake-up.
	lastError string
	woken     bool
	// podPhase is the phase last written to the search attribute.
	podPhase string
	// fastStart: this run reaches the database through local activities
	// and provisions the zone in one host activity (versionFastStart).
	fastStart bool
	// taken counts the node's reports and readiness signals taken since
	// the status was last looked at (versionStatusAfterSignals).
	taken int
}

// versionFastStart: control-plane steps run as local activities (no task
// queue round trip) and the zone is provisioned by one host activity
// (ProvisionPod) instead of one per step. Runs recorded before it replay
// on the step-by-step path.
const versionFastStart = "fast-start"

func (w *podWorkflow) ref() controlapi.PodRef { return w.in.Pod }

func (w *podWorkflow) run(ctx workflow.Context) error {
	w.fastStart = workflow.GetVersion(ctx, versionFastStart, workflow.DefaultVersion, 1) >= 1
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	if w.in.State == nil {
		if err := upsert(ctx, SearchAttrNamespace, w.in.Pod.Namespace, SearchAttrPod, w.in.Pod.Name); err != nil {
			return err
		}
	}
	var snap controlapi.PodSnapshot
	if err := w.control(ctx, ctl.LoadPod, w.ref()).Get(ctx, &snap); err != nil {
		return err
	}
	if !snap.Found {
		return nil // the row is gone: nothing to run
	}
	w.spec, w.limits = snap.Spec, snap.ProcessLimits
	if snap.Deleting && w.st.Terminate == nil {
		g := snap.GracePeriodSeconds
		w.st.Terminate = &podcontract.TerminateSignal{GracePeriodSeconds: &g}
	}
	if w.in.State == nil {
		w.st.Phase = PhasePending
		if snap.Phase == model.PodFailed || snap.Phase == model.PodSucceeded {
			// A finished pod whose workflow was restarted: wait to be deleted.
			w.st.Phase = Phase(snap.Phase)
		}
	}
	for {
		if ctx.Err() != nil {
			// A Temporal cancel request is a cancel like the signal's; what
			// follows (rolling back, waiting to be deleted) must still run.
			if w.st.Cancel == nil {
				w.st.Cancel = &podcontract.CancelSignal{Reason: "workflow cancel requested"}
			}
			ctx, _ = workflow.NewDisconnectedContext(ctx)
			ctx = workflow.WithActivityOptions(ctx, controlOptions)
		}
		if w.st.Phase == PhaseRemoving {
			return w.remove(ctx)
		}
		if w.mayContinueAsNew(ctx) {
			st := w.st
			return workflow.NewContinueAsNewError(ctx, PodLifecycle, PodInput{Pod: w.in.Pod, Tuning: w.in.Tuning, State: &st})
		}
		if err := w.turn(ctx); err != nil {
			return err
		}
	}
}

// turn does one step of the current phase; the phase methods set the next.
func (w *podWorkflow) turn(ctx workflow.Context) error {
	switch w.st.Phase {
	case PhasePending:
		return w.pending(ctx)
	case PhaseScheduled:
		return w.scheduled(ctx)
	case PhaseImagePulling:
		return w.imagePulling(ctx)
	case PhaseProvisioning:
		return w.provisioning(ctx)
	case PhaseRunning:
		return w.running(ctx)
	case PhaseTerminating:
		return w.terminating(ctx)
	case PhaseFailed, PhaseSucceeded:
		return w.finished(ctx)
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("unknown phase %q", w.st.Phase), "Invalid", nil)
}

// mayContinueAsNew: the history is long and nothing is in flight (no
// unhandled signal, no running update handler), so nothing can be lost.
func (w *podWorkflow) mayContinueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	if info.GetCurrentHistoryLength() < w.t.HistoryLimit && !info.GetContinueAsNewSuggested() {
		return false
	}
	return len(workflow.GetUnhandledSignalNames(ctx)) == 0 && workflow.AllHandlersFinished(ctx)
}

// setPhase moves the lifecycle to another phase, resetting the waiting
// counters.
func (w *podWorkflow) setPhase(p Phase) {
	if w.st.Phase != p {
		w.st.Phase, w.st.Attempt, w.st.Waiting = p, 0, ""
	}
}

// setPodPhase keeps the ZwPhase search attribute on the pod's phase.
func (w *podWorkflow) setPodPhase(ctx workflow.Context, phase string) {
	if w.podPhase != phase {
		w.podPhase = phase
		_ = upsert(ctx, SearchAttrPhase, phase)
	}
}

// stopRequested: a delete or a cancel arrived.
func (w *podWorkflow) stopRequested() bool { return w.st.Terminate != nil || w.st.Cancel != nil }

// evicting: the pod was told to leave the node it is on.
func (w *podWorkflow) evicting() bool {
	return w.st.Evict != nil && w.st.Node != "" && w.st.Evict.Node == w.st.Node
}

// lost: the pod's node is lost; nothing more is asked of it.
func (w *podWorkflow) lost() bool { return w.evicting() && w.st.Evict.Lost }

// hostWait waits for a host activity unless its node is lost: then the
// activity is cancelled (its queue may never be polled again, and a stale
// task must not run when the host returns) and errNodeLost is returned.
func (w *podWorkflow) hostWait(ctx workflow.Context, fut workflow.Future, cancel workflow.CancelFunc) error {
	if err := workflow.Await(ctx, func() bool { return fut.IsReady() || w.lost() }); err != nil || fut.IsReady() {
		return nil // the future's Get tells
	}
	cancel()
	return errNodeLost
}

// execHost runs a host activity on the pod's node and waits for it as
// hostWait does.
func (w *podWorkflow) execHost(ctx workflow.Context, o workflow.ActivityOptions, fn, arg any, result any) error {
	hctx, cancel := workflow.WithCancel(ctx)
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(hctx, o), fn, arg)
	if err := w.hostWait(ctx, fut, cancel); err != nil {
		return err
	}
	return fut.Get(ctx, result)
}

func grace(g *int64, def int64) int64 {
	if g == nil {
		return def
	}
	return *g
}

// graceDuration is a grace period as a duration. It saturates at
// model.MaxGracePeriodSeconds: a period stored before the API bounded it
// must not overflow a timeout built from it.
func graceDuration(g int64) time.Duration {
	return time.Duration(boundGrace(g)) * time.Second
}

// boundGrace puts a grace period in [0, model.MaxGracePeriodSeconds].
func boundGrace(g int64) int64 { return min(max(g, 0), model.MaxGracePeriodSeconds) }

// remove releases the address and deletes the row: the pod is gone.
func (w *podWorkflow) remove(ctx workflow.Context) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	w.step(ctx, "Remove", 1)
	if err := w.control(ctx, ctl.ReleasePodIP, w.ref()).Get(ctx, nil); err != nil {
		return err
	}
	if err := w.control(ctx, ctl.RemovePod, w.ref()).Get(ctx, nil); err != nil {
		return err
	}
	w.endStep(ctx, "")
	return nil
}

// finish ends the pod Failed (or Succeeded): it holds nothing on a host any
// more and waits to be deleted.
func (w *podWorkflow) finish(ctx workflow.Context, phase Phase, reason, msg string) {
	var statuses []model.ContainerStatus
	if w.st.Run != nil {
		statuses = w.finalContainerStatuses(workflow.Now(ctx), msg)
	}
	w.setPhase(phase)
	w.st.Reason, w.st.Message = reason, msg
	w.st.Run, w.st.Sandbox, w.st.Node, w.st.Report = nil, nil, "", nil
	w.setPodPhase(ctx, string(phase))
	typ := model.EventWarning
	if phase == PhaseSucceeded {
		typ = model.EventNormal
	} else {
		w.lastError = msg
	}
	now := workflow.Now(ctx)
	w.update(ctx, controlapi.StatusUpdate{Phase: string(phase), Reason: reason, Message: msg, ContainerStatuses: statuses,
		Conditions: []model.PodCondition{{Type: model.PodReady, Status: model.ConditionFalse, Reason: reason, LastTransitionTime: &now}},
		EventType:  typ, EventReason: reason, EventMessage: msg})
}

// finished waits, holding nothing, for the pod to be deleted.
func (w *podWorkflow) finished(ctx workflow.Context) error {
	w.step(ctx, "AwaitDelete", 1)
	w.setPodPhase(ctx, string(w.st.Phase))
	if err := workflow.Await(ctx, func() bool { return w.st.Terminate != nil || w.mayContinueAsNew(ctx) }); err != nil {
		return err
	}
	if w.st.Terminate != nil {
		w.setPhase(PhaseRemoving)
	}
	return nil
}

// update writes a status change. Control activities retry until the
// database answers, so an error here is the workflow being cancelled.
func (w *podWorkflow) update(ctx workflow.Context, u controlapi.StatusUpdate) {
	u.Pod = w.ref()
	if err := w.control(ctx, ctl.UpdatePodStatus, u).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not record pod status", "error", err)
	}
}

// control runs a control-plane activity: on this worker, as a local
// activity, from versionFastStart on.
func (w *podWorkflow) control(ctx workflow.Context, fn, arg any) workflow.Future {
	if w.fastStart {
		return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, localControlOptions), fn, arg)
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, controlOptions), fn, arg)
}

func (w *podWorkflow) step(ctx workflow.Context, name string, attempt int) {
	rec := StepRecord{Step: name, Started: workflow.Now(ctx), Attempts: attempt}
	w.st.Steps = appendStep(w.st.Steps, rec)
}

func (w *podWorkflow) endStep(ctx workflow.Context, errMsg string) {
	if n := len(w.st.Steps); n > 0 {
		w.st.Steps[n-1].Finished, w.st.Steps[n-1].Error = workflow.Now(ctx), errMsg
	}
	if errMsg != "" {
		w.lastError = errMsg
	}
}

// appendStep keeps the last 20 steps (a retried step updates its record).
func appendStep(steps []StepRecord, rec StepRecord) []StepRecord {
	if n := len(steps); n > 0 && steps[n-1].Step == rec.Step && steps[n-1].Finished.IsZero() {
		steps[n-1].Attempts = rec.Attempts
		return steps
	}
	steps = append(steps, rec)
	if len(steps) > 20 {
		steps = steps[len(steps)-20:]
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
