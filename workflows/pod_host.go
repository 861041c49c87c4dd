package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/scheduler"
)

// controlOptions: control-plane activities retry until the database answers.
var controlOptions = workflow.ActivityOptions{
	TaskQueue:           ControlTaskQueue,
	StartToCloseTimeout: 30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2,
		MaximumInterval: 30 * time.Second},
}

// hostOptions are sized per step; transient failures retry a few times,
// after which the saga rolls back. Invalid input is never retried.
func hostOptions(node string, timeout time.Duration, heartbeat time.Duration, attempts int32) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           NodeTaskQueue(node),
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    heartbeat,
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 30 * time.Second, MaximumAttempts: attempts, NonRetryableErrorTypes: []string{"Invalid"}},
	}
}

// undoOptions: a compensation must finish, so it retries until it does.
func undoOptions(node string, timeout time.Duration) workflow.ActivityOptions {
	o := hostOptions(node, timeout, 0, 0)
	o.RetryPolicy.MaximumInterval = time.Minute
	o.WaitForCancellation = false
	return o
}

// sandbox is the node's view of the pod: caps summed over containers
// (limits, else requests) and the address it was given.
func sandbox(ref activities.PodRef, spec model.PodSpec, alloc *activities.AllocateResult, imageKind string) activities.PodSandbox {
	s := activities.PodSandbox{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID, Brand: spec.RuntimeClassName,
		ImageKind: imageKind, IP: alloc.IP, PrefixLen: alloc.PrefixLen, Gateway: alloc.Gateway}
	caps := scheduler.PodLimits(&model.Pod{Spec: spec})
	s.MilliCPU, s.MemoryBytes = caps.MilliCPU, caps.Memory
	for _, c := range spec.Containers {
		if s.Image == "" {
			s.Image = c.Image
		}
		argv := append(append([]string{}, c.Command...), c.Args...)
		s.Containers = append(s.Containers, activities.ContainerSpec{Name: c.Name, Argv: argv, Env: c.Env})
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

// provision builds the zone step by step. A step that fails for good, or a
// cancel, rolls back every step begun, in reverse, so nothing is left on
// the host; the caller then fails the pod.
func (w *podWorkflow) provision(ctx workflow.Context) error {
	r := w.run_
	w.update(ctx, activities.StatusUpdate{Phase: model.PodPending, Reason: "Provisioning", PodIP: r.Sandbox.IP, HostIP: r.HostIP,
		EventReason: "Provisioning", EventMessage: fmt.Sprintf("Provisioning zone on %s with address %s", r.Node, r.Sandbox.IP)})
	begun := 0
	var failure error
	for _, st := range provisionSteps {
		if w.stopRequested() {
			failure = errCancelled
			break
		}
		begun++
		w.step(ctx, st.name, 1)
		sctx, cancel := workflow.WithCancel(ctx)
		sctx = workflow.WithActivityOptions(sctx, hostOptions(r.Node, st.timeout, st.heartbeat, 6))
		fut := workflow.ExecuteActivity(sctx, st.do, r.Sandbox)
		err := workflow.Await(ctx, func() bool { return fut.IsReady() || w.interrupted() })
		if err != nil || !fut.IsReady() {
			if temporal.IsCanceledError(err) {
				w.cancel = &CancelSignal{Reason: "workflow cancel requested"}
			}
			cancel()
			if !w.lost() {
				_ = fut.Get(ctx, nil) // wait for the activity to stop before undoing it
			}
			failure = errCancelled
			break
		}
		if err := fut.Get(ctx, nil); err != nil {
			failure = fmt.Errorf("step %s on node %s failed: %w", st.name, r.Node, unwrapActivity(err))
			w.endStep(ctx, failure.Error())
			break
		}
		w.endStep(ctx, "")
	}
	if failure == nil {
		return nil
	}
	w.compensate(ctx, begun)
	return failure
}

// compensate undoes the first n steps in reverse, then frees the address.
func (w *podWorkflow) compensate(ctx workflow.Context, n int) {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	r := w.run_
	for i := n - 1; i >= 0 && !w.lost(); i-- {
		st := provisionSteps[i]
		if st.undo == nil {
			continue
		}
		w.step(ctx, "Undo"+st.name, 1)
		uctx := workflow.WithActivityOptions(ctx, undoOptions(r.Node, st.timeout))
		fut := workflow.ExecuteActivity(uctx, st.undo, r.Sandbox)
		if w.hostWait(ctx, fut) != nil {
			w.endStep(ctx, "node lost: left for its agent to clean up")
			break
		}
		if err := fut.Get(uctx, nil); err != nil {
			w.endStep(ctx, err.Error())
			continue
		}
		w.endStep(ctx, "")
	}
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	_ = workflow.ExecuteActivity(cctx, ctl.ReleasePodIP, w.ref()).Get(cctx, nil)
}

// unwrapActivity gives the message a person can act on: the activity's
// own error (step, command, stderr, attempt), not Temporal's wrapping.
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

// terminateRunning stops the pod gracefully and removes every trace:
// services get SIGTERM, the zone shuts down within the grace period (a
// finalize signal ends it early), then it is halted, uninstalled and its
// configuration, VNIC, datasets, address and row are removed.
func (w *podWorkflow) terminateRunning(ctx workflow.Context) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	w.stopGracefully(ctx, "Killing")
	w.teardown(ctx)
	return w.remove(ctx)
}

// stopGracefully stops the containers and shuts the zone down within the
// pod's grace period (a terminate signal may shorten it, finalize ends it).
func (w *podWorkflow) stopGracefully(ctx workflow.Context, eventReason string) {
	r := w.run_
	g := int64(model.DefaultTerminationGracePeriodSeconds)
	if w.spec.TerminationGracePeriodSeconds != nil {
		g = *w.spec.TerminationGracePeriodSeconds
	}
	if w.terminate != nil && w.terminate.GracePeriodSeconds != nil {
		g = *w.terminate.GracePeriodSeconds
	}
	if w.finalize {
		g = 0
	}
	w.update(ctx, activities.StatusUpdate{Reason: "Terminating", Message: fmt.Sprintf("stopping with a grace period of %ds", g),
		Conditions:  []model.PodCondition{{Type: model.PodReady, Status: model.ConditionFalse, Reason: "Terminating"}},
		EventReason: eventReason, EventMessage: fmt.Sprintf("Stopping containers with a grace period of %ds", g)})
	if g > 0 && !w.lost() {
		w.step(ctx, "StopContainers", 1)
		sctx := workflow.WithActivityOptions(ctx, undoOptions(r.Node, time.Minute))
		stopErr := ""
		stop := workflow.ExecuteActivity(sctx, host.StopContainers, r.Sandbox)
		if w.hostWait(ctx, stop) != nil {
			w.endStep(ctx, errNodeLost.Error())
			return
		}
		if err := stop.Get(sctx, nil); err != nil {
			stopErr = err.Error()
		}
		w.endStep(ctx, stopErr)
		w.step(ctx, "ShutdownZone", 1)
		gctx, cancel := workflow.WithCancel(ctx)
		o := hostOptions(r.Node, time.Duration(g)*time.Second+time.Minute, 30*time.Second, 3)
		// On finalize the halt that follows ends the shutdown on the host;
		// waiting for the activity to notice its cancellation would only
		// wait for its next heartbeat.
		o.WaitForCancellation = false
		fut := workflow.ExecuteActivity(workflow.WithActivityOptions(gctx, o), host.ShutdownZone, activities.ShutdownInput{Sandbox: r.Sandbox, GraceSeconds: g})
		_ = workflow.Await(ctx, func() bool { return fut.IsReady() || w.finalize || w.lost() })
		if !fut.IsReady() && w.lost() {
			cancel()
			w.endStep(ctx, errNodeLost.Error())
			return
		}
		if !fut.IsReady() {
			cancel() // finalize: the grace period ends now
			w.update(ctx, activities.StatusUpdate{Reason: "Terminating", Message: "grace period ended by finalize",
				EventReason: "Finalized", EventMessage: "Grace period ended by the finalize signal"})
		}
		var stopped bool
		_ = fut.Get(ctx, &stopped)
		w.endStep(ctx, "")
	}
}

// teardown removes the pod's zone and everything under it from the node.
func (w *podWorkflow) teardown(ctx workflow.Context) {
	r := w.run_
	for _, st := range []sagaStep{
		{"HaltZone", host.HaltZone, nil, 5 * time.Minute, 0},
		{"UninstallZone", host.UninstallZone, nil, 30 * time.Minute, 0},
		{"DeleteZoneConfig", host.DeleteZoneConfig, nil, 2 * time.Minute, 0},
		{"DeleteVNIC", host.DeleteVNIC, nil, time.Minute, 0},
		{"DestroyDatasets", host.DestroyDatasets, nil, 2 * time.Minute, 0},
	} {
		if w.lost() {
			break // the agent cleans up when it returns
		}
		w.step(ctx, st.name, 1)
		sctx := workflow.WithActivityOptions(ctx, undoOptions(r.Node, st.timeout))
		fut := workflow.ExecuteActivity(sctx, st.do, r.Sandbox)
		if w.hostWait(ctx, fut) != nil {
			w.endStep(ctx, errNodeLost.Error())
			break
		}
		if err := fut.Get(sctx, nil); err != nil {
			w.endStep(ctx, err.Error())
			continue
		}
		w.endStep(ctx, "")
	}
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	_ = workflow.ExecuteActivity(cctx, ctl.ReleasePodIP, w.ref()).Get(cctx, nil)
}
