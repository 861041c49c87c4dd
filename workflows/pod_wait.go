package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// versionErrImagePull marks lifecycles that say ErrImagePull before
// ImagePullBackOff; versionPulledEvent those that record a Pulled event
// when the image they waited for is on their node; versionImageUser those
// whose containers run as their image's USER (earlier ones ran them as
// the zone's root, and keep doing so).
const (
	versionErrImagePull = "err-image-pull"
	versionPulledEvent  = "pulled-event"
	versionImageUser    = "image-user"
)

// pending binds the pod to a node, or waits while none fits.
func (w *podWorkflow) pending(ctx workflow.Context) error {
	w.setPodPhase(ctx, model.PodPending)
	if w.stopRequested() {
		return w.stopUnprovisioned(ctx)
	}
	w.look(ctx, "Schedule")
	var res controlapi.ScheduleResult
	if err := w.control(ctx, ctl.SchedulePod, w.ref()).Get(ctx, &res); err != nil {
		return err
	}
	if res.Node == "" {
		now := workflow.Now(ctx)
		reason := podcontract.ReasonUnschedulable
		if res.Reason != "" {
			reason = res.Reason // the capacity map, not the nodes
		}
		w.waiting(ctx, reason, "FailedScheduling", model.EventWarning, res.Message,
			model.PodCondition{Type: model.PodScheduled, Status: model.ConditionFalse, Reason: reason, Message: res.Message, LastTransitionTime: &now})
		return w.waitRetry(ctx, w.st.Attempt)
	}
	w.endStep(ctx, "")
	w.startupScheduled(ctx)
	w.st.Node, w.st.Claims = res.Node, res.Claims
	if w.st.Evict != nil && w.st.Evict.Node != res.Node {
		w.st.Evict = nil // about a node the pod left before
	}
	if err := upsert(ctx, SearchAttrNode, res.Node); err != nil {
		return err
	}
	w.update(ctx, controlapi.StatusUpdate{Phase: model.PodPending, EventReason: "Scheduled",
		EventMessage: fmt.Sprintf("Successfully assigned %s to %s", w.ref(), res.Node)})
	if w.st.MovedFrom != "" {
		w.update(ctx, controlapi.StatusUpdate{Phase: model.PodPending, EventReason: "Rescheduled",
			EventMessage: fmt.Sprintf("Rescheduled %s from %s to %s", w.ref(), w.st.MovedFrom, res.Node)})
		w.st.MovedFrom = ""
	}
	w.setPhase(PhaseScheduled)
	return nil
}

// scheduled gets the pod an address on its node, waiting while the
// node's pod CIDR is full; an address released on the node wakes it.
func (w *podWorkflow) scheduled(ctx workflow.Context) error {
	if w.stopRequested() || w.evicting() {
		return w.stopUnprovisioned(ctx)
	}
	w.look(ctx, "AllocateIP")
	var res controlapi.AllocateResult
	in := controlapi.AllocateInput{Pod: w.ref(), Node: w.st.Node}
	if err := w.control(ctx, ctl.AllocatePodIP, in).Get(ctx, &res); err != nil {
		return err
	}
	if res.Exhausted != "" {
		w.waiting(ctx, podcontract.ReasonIPExhausted, "FailedAllocateIP", model.EventWarning, res.Exhausted)
		return w.waitRetry(ctx, w.st.Attempt)
	}
	w.endStep(ctx, "")
	sb := sandbox(w.in.Pod, w.spec, w.limits, &res, "", w.st.Claims)
	w.st.Sandbox, w.st.HostIP = &sb, res.HostIP
	w.setPhase(PhaseImagePulling)
	return nil
}

// imagePulling waits, Pending with reason ImagePulling, until the node
// holds the pod's image, starting the pull when nobody has. The pull's end
// wakes the pod (podcontract.SignalWake), even one that arrives while it looks; a look
// every RetryMax covers a wake that could not be sent. A failed pull is
// retried with back-off (ImagePullBackOff), as Kubernetes does.
func (w *podWorkflow) imagePulling(ctx workflow.Context) error {
	if w.stopRequested() || w.evicting() {
		return w.stopUnprovisioned(ctx)
	}
	w.look(ctx, "ResolveImage")
	in := controlapi.ImageNodeInput{Image: w.sandboxImage(), Node: w.st.Node}
	if len(w.spec.Containers) > 0 {
		in.NeverPull = w.spec.Containers[0].ImagePullPolicy == model.PullNever
		in.Refresh = w.spec.Containers[0].ImagePullPolicy == model.PullAlways
	}
	var r controlapi.ResolvedImage
	if err := w.control(ctx, img.ResolvePodImage, in).Get(ctx, &r); err != nil {
		return err
	}
	if !r.Found || r.Present {
		w.endStep(ctx, "")
		if w.waitedForImage() && workflow.GetVersion(ctx, versionPulledEvent, workflow.DefaultVersion, 1) >= 1 {
			w.update(ctx, controlapi.StatusUpdate{EventOnly: true, EventType: model.EventNormal, EventReason: "Pulled",
				EventMessage: fmt.Sprintf("Successfully pulled image %q to node %s", w.sandboxImage(), w.st.Node)})
		}
		w.startupImageReady(ctx)
		w.st.Sandbox.ImageKind, w.st.Sandbox.ImageDigest = r.Kind, r.Digest
		if r.Config != nil {
			asUser := r.Config.User != "" && workflow.GetVersion(ctx, versionImageUser, workflow.DefaultVersion, 1) >= 1
			withImageConfig(w.st.Sandbox, w.spec, r.Config, asUser)
		}
		w.setPhase(PhaseProvisioning)
		return nil
	}
	if r.Pull {
		if err := w.control(ctx, img.RequestImagePull, in).Get(ctx, nil); err != nil {
			w.endStep(ctx, err.Error())
		}
	}
	if r.Failed {
		// As the kubelet: ErrImagePull when a pull is first seen failing,
		// ImagePullBackOff while the pod backs off before the next look.
		reason := podcontract.ReasonImagePullBackOff
		switch {
		case r.Reason != "":
			reason = r.Reason
		case (!w.waitedForImage() || strings.HasPrefix(w.st.Waiting, podcontract.ReasonImagePulling+": ")) &&
			workflow.GetVersion(ctx, versionErrImagePull, workflow.DefaultVersion, 1) >= 1:
			reason = podcontract.ReasonErrImagePull
		}
		w.waiting(ctx, reason, reason, model.EventWarning, r.Message)
		return w.waitRetry(ctx, w.st.Attempt)
	}
	w.waiting(ctx, podcontract.ReasonImagePulling, podcontract.ReasonImagePulling, model.EventNormal, r.Message)
	return w.waitFor(ctx, w.t.RetryMax)
}

// waitedForImage: the pod's last wait was for its image's pull.
func (w *podWorkflow) waitedForImage() bool {
	for _, r := range []string{podcontract.ReasonImagePulling, podcontract.ReasonErrImagePull, podcontract.ReasonImagePullBackOff} {
		if strings.HasPrefix(w.st.Waiting, r+": ") {
			return true
		}
	}
	return false
}

func (w *podWorkflow) sandboxImage() string {
	if len(w.spec.Containers) > 0 {
		return w.spec.Containers[0].Image
	}
	return ""
}

// waiting reports why the pod waits, once per reason and message.
func (w *podWorkflow) waiting(ctx workflow.Context, reason, eventReason, eventType, msg string, conds ...model.PodCondition) {
	w.lastError = msg
	if w.st.Waiting == reason+": "+msg {
		return
	}
	w.st.Waiting = reason + ": " + msg
	w.update(ctx, controlapi.StatusUpdate{Phase: model.PodPending, Reason: reason, Message: msg, Conditions: conds,
		EventType: eventType, EventReason: eventReason, EventMessage: msg})
}

// waitRetry waits with exponential back-off, capped at RetryMax, before
// the next attempt.
func (w *podWorkflow) waitRetry(ctx workflow.Context, attempt int) error {
	d := w.t.RetryMin << min(attempt-1, 20)
	return w.waitFor(ctx, min(d, w.t.RetryMax))
}

// look begins another try of a waiting phase. A wake that arrived before
// it is spent: what the try reads is newer than what the wake announced.
// One arriving from here on ends the wait that follows at once.
func (w *podWorkflow) look(ctx workflow.Context, step string) {
	w.woken = false
	w.st.Attempt++
	w.step(ctx, step, w.st.Attempt)
}

// waitFor sleeps d, or less when a delete, cancel, eviction or wake-up
// arrives; a wake that arrived since the last look counts. A Temporal
// cancel request is a cancel.
func (w *podWorkflow) waitFor(ctx workflow.Context, d time.Duration) error {
	if workflow.GetVersion(ctx, versionKeptWakes, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		w.woken = false // lost a wake that came during the look
	}
	_, err := workflow.AwaitWithTimeout(ctx, d, func() bool { return w.stopRequested() || w.evicting() || w.woken })
	w.woken = false
	if temporal.IsCanceledError(err) {
		w.st.Cancel = &podcontract.CancelSignal{Reason: "workflow cancel requested"}
		return nil
	}
	return err
}

// versionKeptWakes: a wake that arrives while a waiting pod looks (before
// its wait begins) ends the wait at once instead of being forgotten.
const versionKeptWakes = "kept-wakes"

// stopUnprovisioned ends a pod whose zone was never begun: deleted, it
// goes; cancelled, it stays Failed until deleted; evicted from its node,
// it leaves it.
func (w *podWorkflow) stopUnprovisioned(ctx workflow.Context) error {
	if w.st.Terminate != nil {
		w.setPhase(PhaseRemoving)
		return nil
	}
	if w.st.Sandbox != nil {
		if err := w.control(ctx, ctl.ReleasePodIP, w.ref()).Get(ctx, nil); err != nil {
			return err
		}
		w.st.Sandbox = nil
	}
	if w.st.Cancel != nil {
		w.finish(ctx, PhaseFailed, "Cancelled", w.st.Cancel.Reason)
		return nil
	}
	return w.leftNode(ctx)
}
