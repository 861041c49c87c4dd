package workflows

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// controlOptions: control-plane activities retry until the database answers.
var controlOptions = workflow.ActivityOptions{
	TaskQueue:           taskqueue.Control,
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2,
		MaximumInterval: 30 * time.Second},
}

// localControlOptions: the same, run on the workflow's own worker. Left
// unset, a local activity's ScheduleToClose is its StartToClose: one
// attempt that times out would fail the whole lifecycle. Like the
// activity form, it is tried again until it succeeds: a control plane
// that cannot reach its database must not fail pods.
var localControlOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    30 * time.Second,
	ScheduleToCloseTimeout: 10 * 365 * 24 * time.Hour,
	RetryPolicy:            controlOptions.RetryPolicy,
}

// provisionHeartbeat: a node that stops heartbeating a provision for this
// long has lost it (a crashed agent); the retry finds the work done so far.
// It also bounds how late a cancel reaches the node (heartbeats are sent at
// most every 0.8 of it).
const provisionHeartbeat = 15 * time.Second

// hostScheduleToStart bounds how long a host task may wait for its node.
const hostScheduleToStart = 2 * time.Minute

// hostHeartbeat is the heartbeat timeout of a host step that asks for no
// other: its node's worker heartbeats every step it runs (the keepalive
// of activities/host), so an attempt whose worker died or never got the
// task is retried after this, not after the step's StartToClose.
const hostHeartbeat = 30 * time.Second

// hostOptions are sized per step; transient failures retry a few times,
// after which the saga rolls back. Invalid input is never retried. A zero
// heartbeat is hostHeartbeat.
func hostOptions(node string, timeout time.Duration, heartbeat time.Duration, attempts int32) workflow.ActivityOptions {
	if heartbeat == 0 {
		heartbeat = hostHeartbeat
	}
	return workflow.ActivityOptions{
		TaskQueue: taskqueue.Node(node),
		// A node that does not pick a task up in time is down: the step
		// fails (and is retried or rolled back) instead of waiting forever.
		ScheduleToStartTimeout: hostScheduleToStart,
		StartToCloseTimeout:    timeout,
		HeartbeatTimeout:       heartbeat,
		WaitForCancellation:    true,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 30 * time.Second, MaximumAttempts: attempts, NonRetryableErrorTypes: []string{"Invalid"}},
	}
}

// undoOptions: a compensation must finish, so Temporal retries its
// failures without end. A task its node does not take up within
// ScheduleToStart is never retried by Temporal, whatever the policy: the
// workflow tries such a step again itself (execUntilDone, retryVolumeTurns).
func undoOptions(node string, timeout time.Duration) workflow.ActivityOptions {
	return undoHeartbeatOptions(node, timeout, 0)
}

// undoHeartbeatOptions are undoOptions for a long step that heartbeats:
// if its worker dies (the agent killed mid-step) the attempt fails after
// heartbeat and is retried, instead of holding the lifecycle until its
// StartToClose timeout.
func undoHeartbeatOptions(node string, timeout, heartbeat time.Duration) workflow.ActivityOptions {
	o := hostOptions(node, timeout, heartbeat, 0)
	o.RetryPolicy.MaximumInterval = time.Minute
	o.WaitForCancellation = false
	return o
}

// versionRetryUndo: an undo or teardown step that failed for a reason a
// later try may fix (its node did not take it up within ScheduleToStart)
// is tried again until it is done or the node is lost, instead of being
// skipped.
const versionRetryUndo = "retry-undo"

// hostRetryMin and hostRetryMax bound the back-off between the workflow's
// own tries of a host step. With ScheduleToStart's 2 minutes, a step
// waiting for its node costs about ten history events every 7 minutes.
const (
	hostRetryMin = 10 * time.Second
	hostRetryMax = 5 * time.Minute
)

// hostRetryBackoff is the wait before the workflow's next try of a host
// step that failed failures times in a row.
func hostRetryBackoff(failures int) time.Duration {
	return min(hostRetryMin<<min(failures-1, 10), hostRetryMax)
}

// retryableHostFailure: a host activity ended with a failure that a
// later try may fix and Temporal will not try again: a timeout (a
// ScheduleToStart timeout, never retried by Temporal whatever the retry
// policy, or the last of a step's attempts) or a retryable error whose
// attempts ran out. A non-retryable error (invalid input, a zone that is
// another pod's) or a cancel is final.
func retryableHostFailure(err error) bool {
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		return true
	}
	if temporal.IsCanceledError(err) {
		return false
	}
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && !appErr.NonRetryable()
}

// notTakenUp: the node did not take the task up within ScheduleToStart
// (its agent down or restarting, the node unreachable, its worker's slots
// all held). On attempts after the first the timeout wraps the previous
// attempt's failure, so the outermost TimeoutError is the one that tells.
func notTakenUp(err error) bool {
	var timeoutErr *temporal.TimeoutError
	return errors.As(err, &timeoutErr) && timeoutErr.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

// execUntilDone runs an undo or teardown step on the pod's node until it
// is done: a failure a later try may fix is tried again after a back-off
// (hostRetryBackoff) however long it takes, until the step succeeds, fails
// for good, or the node is lost (errNodeLost: its agent removes the
// leftovers when it returns, before it reports Ready).
func (w *podWorkflow) execUntilDone(ctx workflow.Context, name string, o workflow.ActivityOptions, fn, arg any) error {
	for failures := 1; ; failures++ {
		err := w.execHost(ctx, o, fn, arg, nil)
		if err == nil || errors.Is(err, errNodeLost) || !retryableHostFailure(err) {
			return err
		}
		if workflow.GetVersion(ctx, versionRetryUndo, workflow.DefaultVersion, 1) < 1 {
			return err
		}
		w.lastError = fmt.Sprintf("%s on node %s, try %d: %s; trying again", name, w.st.Node, failures, errString(err))
		lost, werr := workflow.AwaitWithTimeout(ctx, hostRetryBackoff(failures), w.lost)
		if lost {
			return errNodeLost
		}
		if werr != nil {
			return werr
		}
		w.step(ctx, name, failures+1)
	}
}

// sandbox is the node's view of the pod: caps summed over containers
// (limits, else requests), the process limits its annotations ask for and
// the address it was given.
func sandbox(ref controlapi.PodRef, spec model.PodSpec, limits model.ZoneProcessLimits, alloc *controlapi.AllocateResult, imageKind string, claims []hostapi.ClaimVolume) hostapi.PodSandbox {
	s := hostapi.PodSandbox{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Brand: spec.RuntimeClassName,
		Hostname: spec.Hostname, ImageKind: imageKind, IP: alloc.IP, PrefixLen: alloc.PrefixLen, Gateway: alloc.Gateway}
	s.MilliCPU, s.MemoryBytes = model.PodCaps(&spec)
	s.EphemeralStorageBytes = model.PodEphemeralStorage(&spec)
	s.MaxProcesses, s.MaxLWPs = limits.MaxProcesses, limits.MaxLWPs
	for _, c := range spec.Containers {
		if s.Image == "" {
			s.Image = c.Image
		}
		argv := append(append([]string{}, c.Command...), c.Args...)
		s.Containers = append(s.Containers, hostapi.ContainerSpec{Name: c.Name, Argv: argv, Env: c.Env,
			KillGraceSeconds: c.KillGraceSeconds(&spec)})
		for _, m := range c.VolumeMounts {
			s.Mounts = append(s.Mounts, hostapi.PodMount{Volume: m.Name, Path: m.MountPath, ReadOnly: m.ReadOnly})
		}
	}
	for _, v := range spec.Volumes {
		pv := hostapi.PodVolume{Name: v.Name}
		switch {
		case v.PersistentVolumeClaim != nil:
			// Never an empty scratch volume in a claim's place: a claim
			// not placed with the pod has no UID, and the node refuses it.
			pv.Claim = &hostapi.ClaimVolume{Name: v.PersistentVolumeClaim.ClaimName}
			for i := range claims {
				if claims[i].Name == v.PersistentVolumeClaim.ClaimName {
					pv.Claim = &claims[i]
				}
			}
			// A claim's readOnly makes every mount of it read-only.
			for i := range s.Mounts {
				if s.Mounts[i].Volume == v.Name && v.PersistentVolumeClaim.ReadOnly {
					s.Mounts[i].ReadOnly = true
				}
			}
		case v.EmptyDir != nil && v.EmptyDir.SizeLimit != "":
			pv.SizeLimit, _ = model.Bytes(v.EmptyDir.SizeLimit) // validated
		}
		s.Volumes = append(s.Volumes, pv)
	}
	return s
}

// sagaStep is one provisioning step and what undoes it.
type sagaStep struct {
	name      string
	do, undo  any
	timeout   time.Duration
	heartbeat time.Duration
}

var provisionSteps = []sagaStep{
	{"CreateDatasets", host.CreateDatasets, host.DestroyDatasets, 2 * time.Minute, 0},
	{"CreateVNIC", host.CreateVNIC, host.DeleteVNIC, time.Minute, 0},
	{"ConfigureZone", host.ConfigureZone, host.DeleteZoneConfig, 2 * time.Minute, 0},
	{"InstallZone", host.InstallZone, host.UninstallZone, 30 * time.Minute, 30 * time.Second},
	{"BootZone", host.BootZone, host.HaltZone, 5 * time.Minute, 0},
	{"ConfigureNetwork", host.ConfigureNetwork, nil, 2 * time.Minute, 0},
	{"StartContainers", host.StartContainers, host.StopContainers, 2 * time.Minute, 0},
	{"WaitContainersOnline", host.WaitContainersOnline, nil, 5 * time.Minute, 30 * time.Second},
}

// supervised is what the node's supervisor needs of the pod: the sandbox
// without the containers' environment (it may hold secrets), and each
// container's probes.
func supervised(sb hostapi.PodSandbox, spec model.PodSpec) hostapi.SuperviseInput {
	in := hostapi.SuperviseInput{Sandbox: sb}
	in.Sandbox.Containers = nil
	for _, c := range spec.Containers {
		in.Sandbox.Containers = append(in.Sandbox.Containers, hostapi.ContainerSpec{Name: c.Name})
		in.Probes = append(in.Probes, hostapi.ContainerProbes{Name: c.Name, Ports: c.Ports,
			Startup: c.StartupProbe, Liveness: c.LivenessProbe, Readiness: c.ReadinessProbe})
	}
	return in
}

// provisioning builds the zone step by step, then hands the pod to its
// node's supervisor. A step that fails for good, or a cancel, delete or
// eviction, rolls back every step begun, in reverse, so nothing is left
// on the host.
func (w *podWorkflow) provisioning(ctx workflow.Context) error {
	sb := *w.st.Sandbox
	if w.st.Attempt == 0 { // not again when waiting for a container's configuration
		w.setPodPhase(ctx, model.PodPending)
		w.update(ctx, controlapi.StatusUpdate{Phase: model.PodPending, Reason: "Provisioning", PodIP: sb.IP, HostIP: w.st.HostIP,
			EventReason: "Provisioning", EventMessage: fmt.Sprintf("Provisioning zone on %s with address %s", w.st.Node, sb.IP)})
	}
	provision := w.provisionStepwise
	if w.fastStart {
		provision = w.provisionAtOnce
	}
	begun, seq, failure := provision(ctx)
	if failure == nil && !w.interrupted() {
		return w.startRunning(ctx, seq)
	}
	if w.fastStart && !w.interrupted() && provisionFailureReason(failure) == hostacts.ErrTypeCreateContainerConfig &&
		workflow.GetVersion(ctx, versionConfigWait, workflow.DefaultVersion, 1) >= 1 {
		// As Kubernetes does: the pod waits Pending with the reason, its
		// zone kept, and provisioning (idempotent) runs again after a
		// back-off, so a secret created meanwhile is picked up.
		w.st.Attempt++
		msg := failure.Error()
		var appErr *temporal.ApplicationError
		if errors.As(failure, &appErr) {
			msg = appErr.Message()
		}
		if _, why, ok := strings.Cut(msg, hostacts.ErrTypeCreateContainerConfig+": "); ok {
			msg = why // what is missing, the same on every try
		}
		w.waiting(ctx, hostacts.ErrTypeCreateContainerConfig, "Failed", model.EventWarning, msg)
		if err := w.waitRetry(ctx, w.st.Attempt); err != nil {
			return err
		}
		if !w.interrupted() {
			return nil
		}
		failure = nil // stopped while waiting: undo what was begun
	}
	if !w.interrupted() && (notTakenUp(failure) || w.provisionAnswerLost(ctx, failure)) &&
		workflow.GetVersion(ctx, versionProvisionWaitsForNode, workflow.DefaultVersion, 1) >= 1 {
		// The node did not take the provision up (its agent down or
		// restarting, the node unreachable or its worker busy), or its
		// heartbeats or answer never reached the server: no fault of the
		// pod's. It waits Pending, its address and whatever an earlier
		// attempt built kept, and provisioning (idempotent) runs again
		// after a back-off; a node that stays away is declared lost and
		// the pod leaves it.
		w.st.Attempt++
		msg := fmt.Sprintf("node %s did not take up the provision within %s; trying again", w.st.Node, hostScheduleToStart)
		if !notTakenUp(failure) {
			msg = fmt.Sprintf("node %s did not answer the provision in time (its attempts timed out); trying again", w.st.Node)
		}
		w.waiting(ctx, ReasonNodeNotResponding, ReasonNodeNotResponding, model.EventWarning, msg)
		if err := w.waitRetry(ctx, w.st.Attempt); err != nil {
			return err
		}
		if !w.interrupted() {
			return nil
		}
		failure = nil // stopped while waiting: undo what was begun
	}
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	if w.st.Attempt > 0 && begun < len(provisionSteps) &&
		workflow.GetVersion(ctx, versionProvisionWaitsForNode, workflow.DefaultVersion, 1) >= 1 {
		begun = len(provisionSteps) // an earlier try may have built more than this one
	}
	w.compensate(ctx, begun)
	switch {
	case w.st.Terminate != nil:
		w.setPhase(PhaseRemoving) // deleted while provisioning
	case w.st.Cancel != nil:
		w.finish(ctx, PhaseFailed, "Cancelled", "provisioning cancelled and rolled back: "+w.st.Cancel.Reason)
	case failure == nil && w.evicting():
		return w.leftNode(ctx)
	default:
		w.finish(ctx, PhaseFailed, provisionFailureReason(failure), failure.Error())
	}
	return nil
}

// versionConfigWait: a provision that failed for a missing secret or key
// waits and runs again instead of failing the pod.
const versionConfigWait = "config-wait"

// versionProvisionWaitsForNode: a provision its node did not take up
// within ScheduleToStart waits and runs again instead of failing the pod.
const versionProvisionWaitsForNode = "provision-waits-for-node"

// ReasonNodeNotResponding: the pod waits Pending because its node did not
// take up its provision in time, or its answer did not arrive.
const ReasonNodeNotResponding = "NodeNotResponding"

// versionProvisionAnswerLost: a provision whose attempts all timed out
// after their node took them up (heartbeat or StartToClose), or were
// interrupted (their context ended: a heartbeat that did not get
// through, hostacts.ErrTypeInterrupted), waits and
// runs again, as one not taken up does, instead of failing the pod. The
// node's errors are not retried by Temporal (ProvisionPod fails them for
// good), so only a lost answer gets here: a Temporal too loaded to record
// heartbeats timed out three attempts of pods that were fine, and left
// them Failed.
const versionProvisionAnswerLost = "provision-answer-lost"

// provisionAnswerLost: the provision timed out on its node, other than by
// not being taken up. The version is asked only there, where the rules
// differ, so histories recorded before it replay unchanged.
func (w *podWorkflow) provisionAnswerLost(ctx workflow.Context, failure error) bool {
	var timeoutErr *temporal.TimeoutError
	var appErr *temporal.ApplicationError
	interrupted := errors.As(failure, &appErr) && appErr.Type() == hostacts.ErrTypeInterrupted
	if !interrupted && (!errors.As(failure, &timeoutErr) || notTakenUp(failure)) {
		return false
	}
	return workflow.GetVersion(ctx, versionProvisionAnswerLost, workflow.DefaultVersion, 1) >= 1
}

// provisionFailureReason is the pod's reason for a failed provision:
// Kubernetes' CreateContainerConfigError when a container's environment
// names a secret or key that is not there, ProvisionFailed otherwise.
func provisionFailureReason(failure error) string {
	var appErr *temporal.ApplicationError
	if errors.As(failure, &appErr) && appErr.Type() == hostacts.ErrTypeCreateContainerConfig {
		return hostacts.ErrTypeCreateContainerConfig
	}
	return "ProvisionFailed"
}

// interrupted: provisioning must stop (a delete, a cancel, an eviction).
func (w *podWorkflow) interrupted() bool { return w.stopRequested() || w.evicting() }

// provisionAtOnce builds the zone with one host activity, which also hands
// the pod to the supervisor. It returns how many steps were begun (all of
// them when the node's answer is unknown: undoing is idempotent), the
// supervisor's Seq, and the failure of a step.
func (w *podWorkflow) provisionAtOnce(ctx workflow.Context) (begun int, seq uint64, failure error) {
	w.step(ctx, "ProvisionPod", 1)
	sctx, cancel := workflow.WithCancel(ctx)
	// The node tries each step again itself; Temporal retries only a
	// provision whose node stopped heartbeating.
	o := hostOptions(w.st.Node, hostapi.ProvisionTimeout, provisionHeartbeat, 3)
	in := hostapi.ProvisionInput{Sandbox: *w.st.Sandbox, Probes: supervised(*w.st.Sandbox, w.spec).Probes, Timed: true}
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(sctx, o), host.ProvisionPod, in)
	err := workflow.Await(ctx, func() bool { return fut.IsReady() || w.interrupted() })
	if temporal.IsCanceledError(err) {
		w.st.Cancel = &podcontract.CancelSignal{Reason: "workflow cancel requested"}
	}
	if !fut.IsReady() {
		cancel()
		if !w.lost() {
			_ = fut.Get(ctx, nil) // wait for the activity to stop before undoing it
		}
		w.endStep(ctx, "interrupted")
		return len(provisionSteps), 0, nil
	}
	var res hostapi.ProvisionResult
	err = fut.Get(ctx, &res)
	if err == nil {
		w.endStep(ctx, "")
		w.startupProvisioned(ctx, res.Steps)
		return len(provisionSteps), res.Seq, nil
	}
	begun, step := len(provisionSteps), "ProvisionPod"
	var appErr *temporal.ApplicationError
	var p hostapi.ProvisionProgress
	if errors.As(err, &appErr) && appErr.Details(&p) == nil && p.Begun > 0 {
		begun, step = min(p.Begun, begun), p.Step
	}
	failure = fmt.Errorf("step %s on node %s failed: %w", step, w.st.Node, unwrapActivity(err))
	w.endStep(ctx, failure.Error())
	return begun, 0, failure
}

// provisionStepwise builds the zone with one host activity per step, then
// hands the pod to the supervisor: the path of runs recorded before
// versionFastStart.
func (w *podWorkflow) provisionStepwise(ctx workflow.Context) (begun int, seq uint64, failure error) {
	sb := *w.st.Sandbox
	var times []hostapi.StepTime // each step's, on the workflow's clock
	for _, st := range provisionSteps {
		if w.interrupted() {
			break
		}
		begun++
		w.step(ctx, st.name, 1)
		sctx, cancel := workflow.WithCancel(ctx)
		sctx = workflow.WithActivityOptions(sctx, hostOptions(w.st.Node, st.timeout, st.heartbeat, 6))
		fut := workflow.ExecuteActivity(sctx, st.do, sb)
		err := workflow.Await(ctx, func() bool { return fut.IsReady() || w.interrupted() })
		if temporal.IsCanceledError(err) {
			w.st.Cancel = &podcontract.CancelSignal{Reason: "workflow cancel requested"}
		}
		if !fut.IsReady() {
			cancel()
			if !w.lost() {
				_ = fut.Get(ctx, nil) // wait for the activity to stop before undoing it
			}
			break
		}
		if err := fut.Get(ctx, nil); err != nil {
			failure = fmt.Errorf("step %s on node %s failed: %w", st.name, w.st.Node, unwrapActivity(err))
			w.endStep(ctx, failure.Error())
			break
		}
		w.endStep(ctx, "")
		times = append(times, hostapi.StepTime{Step: st.name, Duration: w.lastStepTime()})
	}
	if failure != nil || w.interrupted() {
		return begun, 0, failure
	}
	w.step(ctx, "Supervise", 1)
	err := w.execHost(ctx, hostOptions(w.st.Node, time.Minute, 0, 5), host.SupervisePod, supervised(*w.st.Sandbox, w.spec), &seq)
	w.endStep(ctx, errString(err))
	w.startupProvisioned(ctx, append(times, hostapi.StepTime{Step: "Supervise", Duration: w.lastStepTime()}))
	return begun, seq, nil
}

// compensate undoes the first n steps in reverse, then frees the address.
func (w *podWorkflow) compensate(ctx workflow.Context, n int) {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	sb := *w.st.Sandbox
	for i := n - 1; i >= 0 && !w.lost(); i-- {
		st := provisionSteps[i]
		if st.undo == nil {
			continue
		}
		w.step(ctx, "Undo"+st.name, 1)
		err := w.execUntilDone(ctx, "Undo"+st.name, undoHeartbeatOptions(w.st.Node, st.timeout, st.heartbeat), st.undo, sb)
		if errors.Is(err, errNodeLost) {
			w.endStep(ctx, "node lost: left for its agent to clean up")
			break
		}
		w.endStep(ctx, errString(err))
	}
	w.releaseAddress(ctx)
}

// releaseAddress frees the pod's address; the sandbox goes with it.
func (w *podWorkflow) releaseAddress(ctx workflow.Context) {
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	if err := w.control(cctx, ctl.ReleasePodIP, w.ref()).Get(cctx, nil); err != nil {
		w.endStep(ctx, "release the address: "+err.Error())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return unwrapActivity(err).Error()
}

// unwrapActivity gives the message a person can act on: the activity's
// own error (step, command, stderr), not Temporal's wrapping.
func unwrapActivity(err error) error {
	var appErr *temporal.ApplicationError
	for e := err; e != nil; {
		if ae, ok := e.(*temporal.ApplicationError); ok {
			appErr = ae
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	if appErr != nil {
		return appErr
	}
	return err
}

// terminating stops the pod gracefully and removes every trace: services
// get SIGTERM, the zone shuts down within the grace period (finalize ends
// it), then it is halted, uninstalled and its configuration, VNIC,
// datasets and address are removed; the row goes next.
func (w *podWorkflow) terminating(ctx workflow.Context) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	w.setPodPhase(ctx, "Terminating")
	if w.st.Sandbox != nil {
		w.stopGracefully(ctx, "Killing")
		w.teardown(ctx)
	}
	w.setPhase(PhaseRemoving)
	return nil
}

// stopGracefully stops the containers and shuts the zone down within the
// pod's grace period (a terminate signal may shorten it, also once under
// way; finalize ends it).
func (w *podWorkflow) stopGracefully(ctx workflow.Context, eventReason string) {
	sb := *w.st.Sandbox
	g := w.podGrace()
	if w.st.Terminate != nil && w.st.Terminate.GracePeriodSeconds != nil {
		g = *w.st.Terminate.GracePeriodSeconds
	}
	if w.st.Finalize {
		g = 0
	}
	g = boundGrace(g)
	now := workflow.Now(ctx)
	gc := &graceClock{seen: w.st.Terminate, end: now.Add(graceDuration(g))}
	w.update(ctx, controlapi.StatusUpdate{Reason: model.ReasonTerminating, Message: fmt.Sprintf("stopping with a grace period of %ds", g),
		Conditions:  []model.PodCondition{{Type: model.PodReady, Status: model.ConditionFalse, Reason: model.ReasonTerminating, LastTransitionTime: &now}},
		EventReason: eventReason, EventMessage: fmt.Sprintf("Stopping containers with a grace period of %ds", g)})
	if g <= 0 || w.lost() {
		return
	}
	g = w.leaveEndpoints(ctx, g, gc)
	if g = gc.bound(ctx, g); g <= 0 {
		return // a later delete's shorter grace period is over: the halt follows
	}
	w.step(ctx, "StopContainers", 1)
	err := w.execHost(ctx, undoOptions(w.st.Node, time.Minute), host.StopContainers, sb, nil)
	w.endStep(ctx, errString(err))
	if errors.Is(err, errNodeLost) {
		return
	}
	if g = gc.bound(ctx, g); g <= 0 {
		return
	}
	w.step(ctx, "ShutdownZone", 1)
	gctx, cancel := workflow.WithCancel(ctx)
	o := hostOptions(w.st.Node, graceDuration(g)+time.Minute, 30*time.Second, 3)
	// On finalize the halt that follows ends the shutdown on the host;
	// waiting for the activity to notice its cancellation would only wait
	// for its next heartbeat.
	o.WaitForCancellation = false
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(gctx, o), host.ShutdownZone, hostapi.ShutdownInput{Sandbox: sb, GraceSeconds: g})
	over := w.awaitGrace(ctx, gc, func() bool { return fut.IsReady() || w.st.Finalize || w.lost() })
	if !fut.IsReady() {
		cancel()
		if w.lost() {
			w.endStep(ctx, errNodeLost.Error())
			return
		}
		if over && !w.st.Finalize {
			w.update(ctx, controlapi.StatusUpdate{Reason: model.ReasonTerminating, Message: "grace period ended, shortened by a later delete",
				EventReason: "Killing", EventMessage: "The grace period, shortened by a later delete, ended; halting the zone"})
		} else {
			w.update(ctx, controlapi.StatusUpdate{Reason: model.ReasonTerminating, Message: "grace period ended by finalize",
				EventReason: "Finalized", EventMessage: "Grace period ended by the finalize signal"})
		}
	}
	var stopped bool
	_ = fut.Get(ctx, &stopped)
	w.endStep(ctx, "")
}

// versionShorterGrace: a terminate with a shorter grace period that
// arrives while the pod stops brings the end of the stop forward.
const versionShorterGrace = "shorter-grace"

// graceClock is a grace period under way. As a second DELETE does in
// Kubernetes, a later terminate whose grace period, counted from its
// arrival, ends sooner brings the end forward; a longer one changes
// nothing.
type graceClock struct {
	seen *podcontract.TerminateSignal // the terminate last taken into account
	end  time.Time
	// shortened: a later terminate brought end forward, so the waits
	// are bounded by it (else the activities waited for are).
	shortened bool
}

// awaitGrace waits until done, taking in terminates as they arrive. It
// returns true when a shortened grace period ended first.
func (w *podWorkflow) awaitGrace(ctx workflow.Context, gc *graceClock, done func() bool) bool {
	for {
		cond := func() bool { return done() || w.st.Terminate != gc.seen }
		if gc.shortened {
			left := gc.end.Sub(workflow.Now(ctx))
			if left <= 0 {
				return true
			}
			if ok, err := workflow.AwaitWithTimeout(ctx, left, cond); err != nil || !ok {
				return err == nil
			}
		} else if err := workflow.Await(ctx, cond); err != nil {
			return false
		}
		if done() {
			return false
		}
		w.takeTerminate(ctx, gc)
	}
}

// takeTerminate takes a terminate that arrived during the grace period
// into account.
func (w *podWorkflow) takeTerminate(ctx workflow.Context, gc *graceClock) {
	t := w.st.Terminate
	gc.seen = t
	if workflow.GetVersion(ctx, versionShorterGrace, workflow.DefaultVersion, 1) < 1 {
		return
	}
	g := boundGrace(grace(t.GracePeriodSeconds, w.podGrace()))
	if end := workflow.Now(ctx).Add(graceDuration(g)); end.Before(gc.end) {
		gc.end, gc.shortened = end, true
		w.update(ctx, controlapi.StatusUpdate{Reason: model.ReasonTerminating, Message: fmt.Sprintf("grace period shortened to %ds by a later delete", g),
			EventReason: "Killing", EventMessage: fmt.Sprintf("Grace period shortened to %ds by a later delete", g)})
	}
}

// bound is g, the grace period left, cut to what a later terminate left
// of it (taking in one that arrived meanwhile).
func (gc *graceClock) bound(ctx workflow.Context, g int64) int64 {
	if !gc.shortened {
		return g
	}
	left := gc.end.Sub(workflow.Now(ctx))
	return min(g, int64((left+time.Second-1)/time.Second))
}

// versionLeaveEndpoints: a terminating pod waits, within its grace
// period, until no node sends it traffic before its containers stop.
const versionLeaveEndpoints = "leave-endpoints"

// leaveEndpoints waits until no service lists the pod and every node has
// applied that, so stopping it drops no request; finalize ends the wait,
// and the grace period (shortened by a later terminate, gc) bounds it. It
// returns the grace period left.
func (w *podWorkflow) leaveEndpoints(ctx workflow.Context, grace int64, gc *graceClock) int64 {
	if workflow.GetVersion(ctx, versionLeaveEndpoints, workflow.DefaultVersion, 1) < 1 {
		return grace
	}
	w.step(ctx, "LeaveEndpoints", 1)
	start := workflow.Now(ctx)
	in := controlapi.EndpointsLeftInput{Pod: w.ref(), IP: w.st.Sandbox.IP, Until: start.Add(graceDuration(grace))}
	o := controlOptions
	o.StartToCloseTimeout, o.HeartbeatTimeout = graceDuration(grace)+30*time.Second, 30*time.Second
	lctx, cancel := workflow.WithCancel(ctx)
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(lctx, o), ctl.WaitEndpointsLeft, in)
	over := w.awaitGrace(ctx, gc, func() bool { return fut.IsReady() || w.st.Finalize })
	var res controlapi.EndpointsLeftResult
	switch {
	case !fut.IsReady():
		cancel()
		if over && !w.st.Finalize {
			w.endStep(ctx, "ended by a later delete's shorter grace period")
			return 0
		}
		w.endStep(ctx, "ended by finalize")
	case fut.Get(ctx, &res) != nil || !res.Left:
		w.endStep(ctx, "the grace period ended before every node stopped sending the pod traffic")
	default:
		w.endStep(ctx, "")
	}
	used := int64(workflow.Now(ctx).Sub(start) / time.Second)
	return max(grace-used, 1)
}

// teardownSteps remove a pod from its node. The uninstall heartbeats
// (hostops every 5 s) like the install: an agent killed while it runs is
// noticed in 30 s, not after its 30 minutes.
var teardownSteps = []sagaStep{
	{"HaltZone", host.HaltZone, nil, 5 * time.Minute, 0},
	{"UninstallZone", host.UninstallZone, nil, 30 * time.Minute, 30 * time.Second},
	{"DeleteZoneConfig", host.DeleteZoneConfig, nil, 2 * time.Minute, 0},
	{"DeleteVNIC", host.DeleteVNIC, nil, time.Minute, 0},
	{"DestroyDatasets", host.DestroyDatasets, nil, 2 * time.Minute, 0},
}

// teardown removes the pod's zone and everything under it from the node,
// then frees its address. On a lost node only the address is freed: the
// agent removes the leftovers when it returns, before it reports Ready.
func (w *podWorkflow) teardown(ctx workflow.Context) {
	sb := *w.st.Sandbox
	for _, st := range teardownSteps {
		if w.lost() {
			break
		}
		w.step(ctx, st.name, 1)
		err := w.execUntilDone(ctx, st.name, undoHeartbeatOptions(w.st.Node, st.timeout, st.heartbeat), st.do, sb)
		w.endStep(ctx, errString(err))
		if errors.Is(err, errNodeLost) {
			break
		}
	}
	w.releaseAddress(ctx)
	w.st.Sandbox = nil
}

// withImageConfig gives the containers of the sandbox's image what the
// image's configuration says where the pod says nothing, by Kubernetes'
// rules: a container without a command runs the image's Entrypoint with
// its own args, or else the image's Cmd; one with a command runs it as
// given. The image's environment comes first, and the pod's variables
// replace it by name; the command starts in the image's working
// directory, and with asUser runs as the image's user.
func withImageConfig(sb *hostapi.PodSandbox, spec model.PodSpec, cfg *model.OCIConfig, asUser bool) {
	for i := range sb.Containers {
		if i >= len(spec.Containers) || spec.Containers[i].Image != sb.Image {
			continue
		}
		c := spec.Containers[i]
		if len(c.Command) == 0 {
			args := c.Args
			if len(args) == 0 {
				args = cfg.Cmd
			}
			sb.Containers[i].Argv = append(append([]string{}, cfg.Entrypoint...), args...)
		}
		var env []model.EnvVar
		for _, kv := range cfg.Env {
			name, value, _ := strings.Cut(kv, "=")
			if !slices.ContainsFunc(c.Env, func(e model.EnvVar) bool { return e.Name == name }) {
				env = append(env, model.EnvVar{Name: name, Value: value})
			}
		}
		sb.Containers[i].Env = append(env, c.Env...)
		if strings.HasPrefix(cfg.WorkingDir, "/") {
			sb.Containers[i].WorkingDir = cfg.WorkingDir
		}
		if asUser {
			sb.Containers[i].User = cfg.User
		}
	}
}
