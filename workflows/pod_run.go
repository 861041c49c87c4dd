package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// RunState is a running pod's state.
type RunState struct {
	StartedAt time.Time
	// Seq: reports numbered at or below it describe the pod before its
	// containers last started.
	Seq uint64
	// LastSeq is the newest report applied: one numbered at or below it
	// arrived late and is ignored (versionReportHighWater).
	LastSeq    uint64 `json:",omitempty"`
	Containers []ContainerRunState
	// Written is the status last written, so an unchanged one is not
	// written again.
	Written string `json:",omitempty"`
}

// Container run states.
const (
	containerRunning    = "running"
	containerBackOff    = "backoff"    // waiting for RestartAt
	containerTerminated = "terminated" // ended for good (OnFailure, Never)
)

// ContainerRunState is what the lifecycle knows of one container.
type ContainerRunState struct {
	Name           string
	State          string
	Ready, Started bool
	Restarts       int32
	// Since is the Seq from which reports describe this incarnation.
	Since         uint64
	RestartAt     time.Time `json:",omitempty"`
	RestartReason string    `json:",omitempty"`
	// StartedAt is when this incarnation started; zero: with the pod.
	StartedAt time.Time `json:",omitempty"`
	// BackOffFrom is Restarts when the back-off last reset, and
	// FailedRestarts the restarts tried since then that started nothing:
	// both count towards the next back-off.
	BackOffFrom    int32 `json:",omitempty"`
	FailedRestarts int32 `json:",omitempty"`
	// Last is how the previous incarnation ended (or this one, once
	// terminated).
	Last *model.ContainerStateTerminated `json:",omitempty"`
}

// Changes to how containers restart, as Kubernetes does it. Runs recorded
// before each replay on the path they took.
const (
	// versionRestartFailureBackOff: a restart that fails leaves the
	// container down, backing off, and is tried again.
	versionRestartFailureBackOff = "restart-failure-backoff"
	// versionNeverKeepsSiblings: under restartPolicy Never a failed
	// container ends alone; the pod ends when every container has.
	versionNeverKeepsSiblings = "never-keeps-siblings"
	// versionLivenessStop: a container that failed its liveness probe is
	// stopped before it backs off.
	versionLivenessStop = "liveness-stop"
	// versionBackOffReset: a container that ran Tuning.RestartBackoffReset
	// before it ended restarts without back-off.
	versionBackOffReset = "restart-backoff-reset"
)

// startRunning: the pod's node supervises it (from seq on); from then on the pod costs nothing until its node reports a change.
func (w *podWorkflow) startRunning(ctx workflow.Context, seq uint64) error {
	now := workflow.Now(ctx)
	r := &RunState{StartedAt: now, Seq: seq}
	for _, c := range w.spec.Containers {
		r.Containers = append(r.Containers, ContainerRunState{Name: c.Name, State: containerRunning, Since: seq,
			Started: c.StartupProbe == nil, Ready: c.ReadinessProbe == nil && c.StartupProbe == nil})
	}
	w.st.Run = r
	w.setPhase(PhaseRunning)
	w.setPodPhase(ctx, model.PodRunning)
	w.writeStatus(ctx, "Started", fmt.Sprintf("Zone running on %s; containers started", w.st.Node))
	return nil
}

// running reacts to what arrives: a delete, a cancel, an eviction, the
// node's readiness, a report from the node, a restart falling due. With
// nothing to do it waits without a timer: a healthy pod adds no history.
func (w *podWorkflow) running(ctx workflow.Context) error {
	r := w.st.Run
	switch {
	case w.st.Terminate != nil:
		w.setPhase(PhaseTerminating)
		return nil
	case w.st.Cancel != nil:
		w.teardownFailed(ctx, "Cancelled", "stopped and removed from the node: "+w.st.Cancel.Reason)
		return nil
	case w.evicting():
		return w.leaveNode(ctx)
	}
	if rep := w.st.Report; rep != nil {
		w.st.Report = nil
		if rep.Seq > r.Seq {
			r.LastSeq = max(r.LastSeq, rep.Seq)
			if done := w.apply(ctx, *rep); done {
				return nil
			}
		}
	}
	now := workflow.Now(ctx)
	var next time.Time
	for i := range r.Containers {
		c := &r.Containers[i]
		if c.State != containerBackOff {
			continue
		}
		if !now.Before(c.RestartAt) {
			w.restart(ctx, i)
			if c.State != containerBackOff {
				continue
			}
			now = workflow.Now(ctx) // a restart that failed backs off from now
		}
		if next.IsZero() || c.RestartAt.Before(next) {
			next = c.RestartAt
		}
	}
	if w.allTerminated() {
		w.ended(ctx)
		return nil
	}
	w.writeStatus(ctx, "", "")
	nodeNotReady := w.st.NodeNotReady
	wake := func() bool {
		return w.st.Terminate != nil || w.st.Cancel != nil || w.evicting() || w.st.Report != nil || w.st.NodeNotReady != nodeNotReady
	}
	var err error
	if next.IsZero() {
		err = workflow.Await(ctx, func() bool { return wake() || w.mayContinueAsNew(ctx) })
	} else {
		// Not below zero: a restart may have taken past another's time.
		_, err = workflow.AwaitWithTimeout(ctx, max(next.Sub(now), 0), wake)
	}
	if temporal.IsCanceledError(err) {
		w.st.Cancel = &podcontract.CancelSignal{Reason: "workflow cancel requested"}
		return nil
	}
	return err
}

// apply acts on a node's report; it reports true when the pod left
// Running.
func (w *podWorkflow) apply(ctx workflow.Context, rep model.PodReport) bool {
	r := w.st.Run
	if rep.Zone != "running" {
		return w.zoneDown(ctx, rep.Zone)
	}
	for _, cr := range rep.Containers {
		i := w.container(cr.Name)
		if i < 0 {
			continue
		}
		c := &r.Containers[i]
		if c.State != containerRunning || rep.Seq <= c.Since {
			continue // backing off, ended, or a report of an earlier incarnation
		}
		c.Ready, c.Started = cr.Ready, cr.Started
		var why string
		var code int32 = 1
		switch {
		case cr.State == model.ContainerExited && cr.ExitCode != nil:
			code = *cr.ExitCode
			why = fmt.Sprintf("exited with code %d", code)
		case cr.State == model.ContainerMaintenance:
			why = "its service is in maintenance (SMF stopped restarting it)"
		case cr.State == model.ContainerMissing:
			why = "its service is gone"
		case cr.Unhealthy != "":
			why = cr.Unhealthy
		default:
			continue
		}
		if w.containerEnded(ctx, i, code, why, cr.Unhealthy != "" && cr.State == model.ContainerRunning) {
			return true
		}
	}
	return false
}

// containerEnded decides, by restartPolicy, what becomes of a container
// whose command ended (or that failed its liveness probe): restart after
// back-off, or terminated for good. It reports true when the pod left
// Running.
func (w *podWorkflow) containerEnded(ctx workflow.Context, i int, code int32, why string, unhealthy bool) bool {
	c := &w.st.Run.Containers[i]
	now := workflow.Now(ctx)
	reason := "Error"
	switch {
	case unhealthy:
		reason = "Unhealthy"
	case code == 0:
		reason = "Completed"
	}
	c.Ready = false
	ranFor := now.Sub(w.containerStartedAt(*c, now))
	c.Last = &model.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: why, FinishedAt: &now}
	if unhealthy && workflow.GetVersion(ctx, versionLivenessStop, workflow.DefaultVersion, 1) >= 1 {
		w.stopContainer(ctx, i) // as kubelet kills it; it stays down through its back-off
	}
	policy := w.spec.RestartPolicy
	switch {
	case policy == model.RestartNever && reason != "Completed":
		c.State = containerTerminated
		if workflow.GetVersion(ctx, versionNeverKeepsSiblings, workflow.DefaultVersion, 1) < 1 {
			w.teardownFailed(ctx, "ContainerFailed", fmt.Sprintf("container %s %s and restartPolicy is Never", c.Name, why))
			return true
		}
		// As in Kubernetes, the other containers run on; the pod ends
		// (Failed) once every container has.
		w.writeStatusEvent(ctx, model.EventWarning, "ContainerFailed",
			fmt.Sprintf("Container %s %s; restartPolicy is Never, so it is not restarted", c.Name, why))
		return false
	case policy != model.RestartAlways && reason == "Completed":
		c.State = containerTerminated
		w.writeStatus(ctx, "Completed", fmt.Sprintf("Container %s completed (exit code 0)", c.Name))
		return false
	}
	if c.Restarts-c.BackOffFrom+c.FailedRestarts > 0 && ranFor >= w.backOffReset() &&
		workflow.GetVersion(ctx, versionBackOffReset, workflow.DefaultVersion, 1) >= 1 {
		c.BackOffFrom, c.FailedRestarts = c.Restarts, 0 // it ran long enough: kubelet forgets its crashes
	}
	delay := w.backOffDelay(*c)
	c.State, c.RestartAt, c.RestartReason = containerBackOff, now.Add(delay), why
	w.writeStatus(ctx, "BackOff", fmt.Sprintf("Restarting container %s in %s: %s", c.Name, delay, why))
	return false
}

// backOffDelay is how long a container waits before it is started again:
// not at all the first time, then RestartBackoff doubling up to
// RestartMax. Every start since the back-off last reset counts, the failed
// ones too.
func (w *podWorkflow) backOffDelay(c ContainerRunState) time.Duration {
	n := c.Restarts - c.BackOffFrom + c.FailedRestarts
	if n <= 0 {
		return 0
	}
	return min(w.t.RestartBackoff<<min(n-1, 16), w.t.RestartMax)
}

// backOffReset is how long a container must run for its back-off to
// start over (kubelet's 10 minutes unless the input says otherwise).
func (w *podWorkflow) backOffReset() time.Duration {
	if w.t.RestartBackoffReset > 0 {
		return w.t.RestartBackoffReset
	}
	return defaultBackOffReset
}

// containerStartedAt is when a container's current incarnation started;
// unknown (now) for one restarted before incarnations were timed.
func (w *podWorkflow) containerStartedAt(c ContainerRunState, now time.Time) time.Time {
	switch {
	case !c.StartedAt.IsZero():
		return c.StartedAt
	case c.Restarts > 0:
		return now
	}
	return w.st.Run.StartedAt
}

// stopContainer stops one container and waits until it has stopped; the
// pod stays supervised. A stop that fails is recorded: a restart that
// follows replaces the container anyway.
func (w *podWorkflow) stopContainer(ctx workflow.Context, i int) {
	c := w.st.Run.Containers[i]
	err := w.execHost(ctx, hostOptions(w.st.Node, graceDuration(w.podGrace())+time.Minute, 0, 5), host.StopContainer,
		hostapi.RestartInput{Sandbox: *w.st.Sandbox, Container: c.Name}, nil)
	if err != nil {
		w.update(ctx, controlapi.StatusUpdate{EventOnly: true, EventType: model.EventWarning, EventReason: "StopFailed",
			EventMessage: fmt.Sprintf("Could not stop container %s: %s", c.Name, errString(err))})
	}
}

// restart restarts a container whose back-off is over. A restart that
// fails leaves it down and backing off, to be tried again.
func (w *podWorkflow) restart(ctx workflow.Context, i int) {
	c := &w.st.Run.Containers[i]
	var seq uint64
	err := w.execHost(ctx, hostOptions(w.st.Node, 2*time.Minute, 0, 5), host.RestartContainer,
		hostapi.RestartInput{Sandbox: *w.st.Sandbox, Container: c.Name}, &seq)
	now := workflow.Now(ctx)
	if err != nil && workflow.GetVersion(ctx, versionRestartFailureBackOff, workflow.DefaultVersion, 1) >= 1 {
		c.FailedRestarts++
		delay := w.backOffDelay(*c)
		c.RestartAt = now.Add(delay)
		w.writeStatusEvent(ctx, model.EventWarning, "RestartFailed",
			fmt.Sprintf("Could not restart container %s: %s; trying again in %s", c.Name, errString(err), delay))
		return
	}
	c.Restarts++
	c.State, c.RestartAt, c.Since, c.StartedAt = containerRunning, time.Time{}, max(seq, c.Since), now
	c.Started = w.spec.Containers[i].StartupProbe == nil
	c.Ready = false
	msg := fmt.Sprintf("Restarted container %s (restart %d): %s", c.Name, c.Restarts, c.RestartReason)
	if err != nil {
		msg = fmt.Sprintf("Restart %d of container %s failed: %s", c.Restarts, c.Name, unwrapActivity(err))
	}
	c.RestartReason = ""
	w.writeStatus(ctx, "Restarted", msg)
}

// versionZoneBootWaitsForNode: a step of booting a stopped zone again that
// its node did not take up is tried again instead of failing the pod.
const versionZoneBootWaitsForNode = "zone-boot-waits-for-node"

// versionZoneBootStartsOver: a step of booting a stopped zone again that
// fails because the zone stopped again meanwhile starts the boot over.
const versionZoneBootStartsOver = "zone-boot-starts-over"

// versionZoneBootsAtOnce: a stopped zone is booted again, its containers
// started and the pod handed to the supervisor with one host activity
// (BootPodAgain) instead of four: a node whose whole stack restarted has
// every pod boot again at once, and each activity is a round trip through
// Temporal.
const versionZoneBootsAtOnce = "zone-boots-at-once"

// zoneBootsAgain bounds the boots a zone that keeps stopping is given
// before the pod fails.
const zoneBootsAgain = 3

// zoneDown handles a zone found not running: booted again (every container
// restarts), unless restartPolicy is Never or the zone is gone, which fail
// the pod.
func (w *podWorkflow) zoneDown(ctx workflow.Context, state string) bool {
	sb := *w.st.Sandbox
	if w.spec.RestartPolicy == model.RestartNever {
		w.teardownFailed(ctx, "ZoneStopped", fmt.Sprintf("zone is %q and restartPolicy is Never", state))
		return true
	}
	if state == "" || state == "configured" {
		w.teardownFailed(ctx, "ZoneGone", fmt.Sprintf("zone vanished from node %s (state %q)", w.st.Node, state))
		return true
	}
	atOnce := workflow.GetVersion(ctx, versionZoneBootsAtOnce, workflow.DefaultVersion, 1) >= 1
	var seq uint64
	for boots := 0; ; boots++ {
		stopping, err := w.bootAgain(ctx, sb, atOnce, &seq)
		if stopping {
			return false // the stop that was asked for takes the zone down
		}
		// The zone stopped again before its containers started (the node's
		// whole stack restarted, halting its zones): boot it once more.
		if isType(err, hostacts.ErrTypeWrongState) && boots < zoneBootsAgain &&
			workflow.GetVersion(ctx, versionZoneBootStartsOver, workflow.DefaultVersion, 1) >= 1 {
			w.lastError = fmt.Sprintf("the zone stopped again while it was booted: %s; booting it again", errString(err))
			continue
		}
		if err != nil {
			w.teardownFailed(ctx, "ZoneStopped", fmt.Sprintf("zone was %q and could not be booted again: %s", state, errString(err)))
			return true
		}
		break
	}
	if !atOnce {
		_ = w.execHost(ctx, hostOptions(w.st.Node, time.Minute, 0, 5), host.SupervisePod, supervised(sb, w.spec), &seq)
	}
	r := w.st.Run
	r.Seq = max(r.Seq, seq)
	for i := range r.Containers {
		c := &r.Containers[i]
		if c.State == containerTerminated {
			continue
		}
		c.Restarts++
		c.State, c.Since, c.RestartAt, c.Ready, c.StartedAt = containerRunning, r.Seq, time.Time{}, false, workflow.Now(ctx)
		c.Started = w.spec.Containers[i].StartupProbe == nil
	}
	w.writeStatus(ctx, "ZoneRebooted", fmt.Sprintf("Zone was %s; booted it again", state))
	return false
}

// bootAgain boots the pod's stopped zone and starts its containers, with
// atOnce in one activity that also hands the pod to the supervisor and
// answers *seq; it stops early, stopping true, when a stop was asked for
// while its node did not take a step up.
func (w *podWorkflow) bootAgain(ctx workflow.Context, sb hostapi.PodSandbox, atOnce bool, seq *uint64) (stopping bool, err error) {
	type hostStep struct {
		fn, arg, result any
		timeout         time.Duration
	}
	steps := []hostStep{{host.BootZone, sb, nil, 5 * time.Minute}, {host.ConfigureNetwork, sb, nil, 5 * time.Minute},
		{host.StartContainers, sb, nil, 5 * time.Minute}}
	if atOnce {
		in := hostapi.SuperviseInput{Sandbox: sb, Probes: supervised(sb, w.spec).Probes}
		steps = []hostStep{{host.BootPodAgain, in, seq, 9 * time.Minute}}
	}
	for _, step := range steps {
		err := w.execHost(ctx, hostOptions(w.st.Node, step.timeout, 0, 5), step.fn, step.arg, step.result)
		// A node that did not take the step up (ScheduleToStart, never
		// retried by Temporal) has not refused it: try again after a
		// back-off until it does, the node is lost, or the pod is stopped.
		for failures := 1; notTakenUp(err) && workflow.GetVersion(ctx, versionZoneBootWaitsForNode, workflow.DefaultVersion, 1) >= 1; failures++ {
			w.lastError = fmt.Sprintf("booting the zone again on node %s, try %d: %s; trying again", w.st.Node, failures, errString(err))
			if _, werr := workflow.AwaitWithTimeout(ctx, hostRetryBackoff(failures), func() bool { return w.lost() || w.interrupted() }); werr != nil {
				err = werr
				break
			}
			if w.interrupted() && !w.lost() {
				return true, nil
			}
			if w.lost() {
				err = errNodeLost
				break
			}
			err = w.execHost(ctx, hostOptions(w.st.Node, step.timeout, 0, 5), step.fn, step.arg, step.result)
		}
		if err != nil {
			return false, err
		}
	}
	return false, nil
}

func (w *podWorkflow) container(name string) int {
	for i, c := range w.st.Run.Containers {
		if c.Name == name {
			return i
		}
	}
	return -1
}

func (w *podWorkflow) allTerminated() bool {
	for _, c := range w.st.Run.Containers {
		if c.State != containerTerminated {
			return false
		}
	}
	return len(w.st.Run.Containers) > 0
}

// ended: every container ended for good (under OnFailure or Never); the
// zone goes, and the pod Succeeded unless one of them failed (Never).
func (w *podWorkflow) ended(ctx workflow.Context) {
	var failed []string
	for _, c := range w.st.Run.Containers {
		if c.Last != nil && c.Last.Reason != "Completed" {
			failed = append(failed, fmt.Sprintf("container %s %s", c.Name, c.Last.Message))
		}
	}
	if len(failed) > 0 {
		w.teardownFailed(ctx, "ContainerFailed", strings.Join(failed, "; ")+" and restartPolicy is Never")
		return
	}
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	w.teardown(ctx)
	w.finish(ctx, PhaseSucceeded, "Completed", "every container completed")
}

// teardownFailed stops and removes the pod's zone and keeps the pod Failed.
func (w *podWorkflow) teardownFailed(ctx workflow.Context, reason, msg string) {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	w.teardown(ctx)
	w.finish(ctx, PhaseFailed, reason, msg)
}

// writeStatus writes the running pod's status when it changed (or when an
// event is to be recorded).
func (w *podWorkflow) writeStatus(ctx workflow.Context, reason, msg string) {
	w.writeStatusEvent(ctx, "", reason, msg)
}

// versionStatusAfterSignals: the status is written, even when it looks
// unchanged, after two or more of the node's signals (reports, readiness)
// were taken at once. A workflow task that timed out after its status
// write ran leaves that write in the store unrecorded; the task tried
// again takes the signals that arrived meanwhile with the one it had (a
// newer report replaces the older) and may end where the status last
// recorded was, so without a write the store keeps the unrecorded one
// for good. One signal at a time, as a healthy pod's, writes nothing.
const versionStatusAfterSignals = "status-after-signals"

// writeStatusEvent is writeStatus with an event of the type given (Normal
// when empty).
func (w *podWorkflow) writeStatusEvent(ctx workflow.Context, typ, reason, msg string) {
	r := w.st.Run
	now := workflow.Now(ctx)
	statuses := w.containerStatuses(now)
	ready, condReason := model.ConditionTrue, ""
	for _, s := range statuses {
		if !s.Ready {
			ready = model.ConditionFalse
		}
	}
	if w.st.NodeNotReady {
		ready, condReason = model.ConditionFalse, "NodeNotReady"
	}
	summary := fmt.Sprintf("%s/%s|", ready, condReason)
	for _, c := range r.Containers {
		summary += fmt.Sprintf("%s=%s,%t,%t,%d;", c.Name, c.State, c.Ready, c.Started, c.Restarts)
	}
	taken := w.taken
	w.taken = 0
	if summary == r.Written && reason == "" &&
		(taken < 2 || workflow.GetVersion(ctx, versionStatusAfterSignals, workflow.DefaultVersion, 1) < 1) {
		return
	}
	r.Written = summary
	start := r.StartedAt
	u := controlapi.StatusUpdate{Phase: model.PodRunning, PodIP: w.st.Sandbox.IP, HostIP: w.st.HostIP, StartTime: &start,
		ContainerStatuses: statuses,
		Conditions:        []model.PodCondition{{Type: model.PodReady, Status: ready, Reason: condReason, LastTransitionTime: &now}},
		EventType:         typ, EventReason: reason, EventMessage: msg}
	if ready == model.ConditionTrue {
		u.Startup = w.startupMeasured()
	}
	w.update(ctx, u)
}

// containerStatuses renders the containers in Kubernetes' shape.
func (w *podWorkflow) containerStatuses(now time.Time) []model.ContainerStatus {
	var out []model.ContainerStatus
	for _, c := range w.st.Run.Containers {
		started := c.Started
		s := model.ContainerStatus{Name: c.Name, Ready: c.Ready && !w.st.NodeNotReady, Started: &started, RestartCount: c.Restarts}
		switch c.State {
		case containerBackOff:
			s.State.Waiting = &model.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: c.RestartReason}
		case containerTerminated:
			s.State.Terminated = c.Last
		default:
			startedAt := w.containerStartedAt(c, w.st.Run.StartedAt)
			s.State.Running = &model.ContainerStateRunning{StartedAt: &startedAt}
		}
		if c.Last != nil && c.State != containerTerminated {
			s.LastTerminationState.Terminated = c.Last
		}
		out = append(out, s)
	}
	return out
}

// finalContainerStatuses renders the containers of a pod that has ended:
// each one terminated and not ready, as kubelet shows a pod whose zone is
// gone. One still running was killed with its zone; one backing off ended
// as it last did.
func (w *podWorkflow) finalContainerStatuses(now time.Time, why string) []model.ContainerStatus {
	out := w.containerStatuses(now)
	for i := range out {
		s := &out[i]
		if s.State.Terminated != nil {
			continue
		}
		switch {
		case s.State.Running != nil:
			s.State.Terminated = &model.ContainerStateTerminated{ExitCode: 137, Reason: "Error",
				Message: "killed with the pod's zone: " + why, FinishedAt: &now}
		case s.LastTerminationState.Terminated != nil:
			s.State.Terminated, s.LastTerminationState.Terminated = s.LastTerminationState.Terminated, nil
		default:
			s.State.Terminated = &model.ContainerStateTerminated{ExitCode: 137, Reason: "Error", Message: why, FinishedAt: &now}
		}
		started := false
		s.State.Running, s.State.Waiting, s.Ready, s.Started = nil, nil, false, &started
	}
	return out
}
