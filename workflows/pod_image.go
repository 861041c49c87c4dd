package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/model"
)

// versionResolveImage gates the ResolveImage step: lifecycles begun before
// it provision without it.
const versionResolveImage = "resolve-image"

// Pod reasons while the image is not on the node yet.
const (
	ReasonImagePulling     = "ImagePulling"
	ReasonImagePullBackOff = "ImagePullBackOff"
)

// resolveImage finds the pod's image for its node and waits, Pending with
// reason ImagePulling, until the node holds it, starting the pull when
// nobody has. A failed pull is retried with back-off, the pod staying
// Pending (ImagePullBackOff) until it succeeds or the pod is deleted, as
// Kubernetes does. It returns the image's kind, or stop when a terminate
// or cancel arrived instead.
func (w *podWorkflow) resolveImage(ctx workflow.Context, node string) (string, bool, error) {
	image := ""
	if len(w.spec.Containers) > 0 {
		image = w.spec.Containers[0].Image
	}
	in := activities.ImageNodeInput{Image: image, Node: node}
	lastMsg, failures := "", 0
	for attempt := 1; ; attempt++ {
		w.step(ctx, "ResolveImage", attempt)
		var r activities.ResolvedImage
		if err := workflow.ExecuteActivity(ctx, img.ResolvePodImage, in).Get(ctx, &r); err != nil {
			return "", false, err
		}
		if !r.Found || r.Present {
			w.endStep(ctx, "")
			return r.Kind, false, nil
		}
		reason, evType := ReasonImagePulling, model.EventNormal
		if r.Failed {
			failures++
			reason, evType = ReasonImagePullBackOff, model.EventWarning
		}
		if r.Pull && !r.Failed {
			w.requestPull(ctx, in)
		}
		msg := r.Message
		w.status.LastError = msg
		if msg != lastMsg {
			w.update(ctx, activities.StatusUpdate{Phase: model.PodPending, Reason: reason, Message: msg,
				EventType: evType, EventReason: reason, EventMessage: msg})
			lastMsg = msg
		}
		var stop bool
		var err error
		if failures > 0 {
			stop, err = w.waitRetry(ctx, failures)
		} else {
			stop, err = w.waitRetry(ctx, 2) // polling a running pull: RetryMin doubled
		}
		if stop || err != nil {
			return "", stop, err
		}
		if r.Failed && r.Pull {
			w.requestPull(ctx, in) // again, after the back-off
		}
	}
}

// requestPull starts the image's pull to the node; one already running is
// joined rather than repeated.
func (w *podWorkflow) requestPull(ctx workflow.Context, in activities.ImageNodeInput) {
	if err := workflow.ExecuteActivity(ctx, img.RequestImagePull, in).Get(ctx, nil); err != nil {
		w.endStep(ctx, err.Error())
	}
}

// releaseUnprovisioned frees the address of a pod stopped before its zone
// was begun, then ends it as removeUnprovisioned does.
func (w *podWorkflow) releaseUnprovisioned(ctx workflow.Context, err error) error {
	if err == nil {
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		dctx = workflow.WithActivityOptions(dctx, controlOptions)
		_ = workflow.ExecuteActivity(dctx, ctl.ReleasePodIP, w.ref()).Get(dctx, nil)
	}
	return w.removeUnprovisioned(ctx, err)
}
