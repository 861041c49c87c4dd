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
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// The image workflows' public contract: names and IDs. Operators cancel an
// import with `temporal workflow cancel --workflow-id image/<name>`.
const (
	ImageImportWorkflowName = "ImageImport"
	ImagePullWorkflowName   = "ImagePull"
	ImageDeleteWorkflowName = "ImageDelete"
	ImageSyncWorkflowName   = "ImageSync"
	// ImageSyncScheduleID runs ImageSync: nodes get the images they lack.
	ImageSyncScheduleID = "zonewright-image-sync"
)

// ImageWorkflowID is the import of one image.
func ImageWorkflowID(name string) string { return "image/" + name }

// ImagePullWorkflowID is the pull of one image to one node; pods waiting
// for the image and the node sync start the same ID, so they coalesce.
func ImagePullWorkflowID(image, node string) string { return "image/" + image + "/node/" + node }

// ImageDeleteWorkflowID is the removal of one image from nodes and store.
func ImageDeleteWorkflowID(name string) string { return "image/" + name + "/delete" }

// ImageInput starts an import or a deletion.
type ImageInput struct {
	Image controlapi.ImageRef
}

// ImagePullInput starts a pull of one image to one node.
type ImagePullInput struct {
	Image string
	Node  string
}

var img *controlapi.ImageActivities // method values name the image activities

// fetchOptions: a download may take hours; heartbeats (every progress
// report) notice a dead worker within a minute. A digest mismatch or a
// source that says no for good is not retried.
var fetchOptions = workflow.ActivityOptions{
	TaskQueue:           taskqueue.Control,
	StartToCloseTimeout: 12 * time.Hour,
	HeartbeatTimeout:    time.Minute,
	WaitForCancellation: true,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
		MaximumAttempts: 8, NonRetryableErrorTypes: []string{controlapi.ErrTypeDigestMismatch, controlapi.ErrTypeSourceFailed, controlapi.ErrTypeImageGone}},
}

// pullScheduleToStart bounds how long a pull or removal waits for its
// node to take it up.
const pullScheduleToStart = 5 * time.Minute

// pullOptions: the node downloads and installs; a node that does not pick
// the task up in time (down) fails this node only: a pod waiting for the
// image there asks for it again with back-off.
func pullOptions(node string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:              taskqueue.Node(node),
		ScheduleToStartTimeout: pullScheduleToStart,
		StartToCloseTimeout:    2 * time.Hour,
		HeartbeatTimeout:       5 * time.Minute,
		WaitForCancellation:    true,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second,
			MaximumAttempts: 4, NonRetryableErrorTypes: []string{hostacts.ErrTypeInvalid, hostacts.ErrTypeDigestMismatch}},
	}
}

// ImageImport fetches an image into the control plane's store (verifying
// its digest), decompresses it, registers it Ready and distributes it to
// every fitting node in parallel. A cancel removes every partial file.
func ImageImport(ctx workflow.Context, in ImageInput) error {
	ref := in.Image
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	var plan controlapi.ImagePlan
	if err := workflow.ExecuteActivity(cctx, img.BeginImageImport, ref).Get(cctx, &plan); err != nil {
		return err
	}
	if !plan.Found || !plan.Spec.NeedsPull() {
		return nil
	}
	var pulling []string
	cleanup := func(reason, msg string) {
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		removeEverywhere(dctx, ref, pulling)
		dctx = workflow.WithActivityOptions(dctx, controlOptions)
		_ = workflow.ExecuteActivity(dctx, img.MarkImageFailed, controlapi.ImageFailure{Image: ref, Reason: reason, Message: msg}).Get(dctx, nil)
	}
	fctx := workflow.WithActivityOptions(ctx, fetchOptions)
	var fetched controlapi.ImageFetched
	err := workflow.ExecuteActivity(fctx, img.FetchImage, ref).Get(fctx, &fetched)
	if err == nil {
		var art controlapi.ImageArtefact
		err = workflow.ExecuteActivity(fctx, img.DecompressImage, ref).Get(fctx, &art)
		if err == nil {
			var targets controlapi.ImageTargets
			if err := workflow.ExecuteActivity(cctx, img.MarkImageReady, controlapi.ImageReadyInput{Image: ref, Artefact: art}).Get(cctx, &targets); err != nil {
				return err
			}
			pulling = targets.Nodes
			distribute(ctx, targets)
			if ctx.Err() == nil {
				return nil
			}
			err = ctx.Err()
		}
	}
	switch {
	case temporal.IsCanceledError(err) || ctx.Err() != nil:
		cleanup(model.ImageReasonCancelled, "import cancelled; partial files removed")
		return temporal.NewCanceledError("import of " + ref.Name + " cancelled")
	case isType(err, controlapi.ErrTypeImageGone):
		return nil
	case isType(err, controlapi.ErrTypeDigestMismatch):
		cleanup(model.ImageReasonDigestMismatch, unwrapActivity(err).Error())
	default:
		cleanup(model.ImageReasonFetchFailed, unwrapActivity(err).Error())
	}
	return nil // the image is Failed: the workflow did its job
}

func isType(err error, typ string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == typ
}

// distribute pulls the image to every target node in parallel; each node's
// outcome goes into the image status, and one failing fails no other.
func distribute(ctx workflow.Context, t controlapi.ImageTargets) {
	wg := workflow.NewWaitGroup(ctx)
	for _, node := range t.Nodes {
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			pullToNode(gctx, t.Image, node)
		})
	}
	wg.Wait(ctx)
}

// pullToNode runs PullImage on the node and records the outcome.
func pullToNode(ctx workflow.Context, ni hostapi.NodeImage, node string) {
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	set := func(c workflow.Context, phase, reason, msg string) {
		c = workflow.WithActivityOptions(c, controlOptions)
		_ = workflow.ExecuteActivity(c, img.SetImageNodeStatus, controlapi.ImageNodeUpdate{Image: ni.Name, Node: node,
			Phase: phase, Reason: reason, Message: msg}).Get(c, nil)
	}
	set(cctx, model.ImagePulling, "", "")
	pctx := workflow.WithActivityOptions(ctx, pullOptions(node))
	var res hostapi.NodeImageResult
	err := workflow.ExecuteActivity(pctx, host.PullImage, ni).Get(pctx, &res)
	if ctx.Err() != nil {
		return // cancelled: the caller removes what was pulled
	}
	if err != nil {
		reason, msg := model.ImageReasonPullFailed, unwrapActivity(err).Error()
		switch {
		case isType(err, hostacts.ErrTypeDigestMismatch):
			reason = model.ImageReasonDigestMismatch
		case notTakenUp(err):
			// Said as such, not as Temporal's wrapping: the pods waiting
			// for the image show it.
			msg = fmt.Sprintf("node %s did not take up the pull within %s (its agent down, unreachable or busy)", node, pullScheduleToStart)
		}
		set(cctx, model.ImageFailed, reason, msg)
	} else {
		set(cctx, model.ImageReady, "", res.Artefact)
	}
	// Pods waiting for the image on this node look again now, instead
	// of at their next periodic look.
	if workflow.GetVersion(ctx, versionWakeImageWaiters, workflow.DefaultVersion, 1) >= 1 {
		in := controlapi.ImageNodeInput{Image: ni.Name, Node: node}
		if err := workflow.ExecuteActivity(cctx, ctl.WakeImageWaiters, in).Get(cctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("could not wake the pods waiting for the image", "image", ni.Name, "node", node, "error", err)
		}
	}
}

// versionWakeImageWaiters marks pulls that wake the pods waiting for them.
const versionWakeImageWaiters = "wake-image-waiters"

// removeEverywhere removes the image from the named nodes and the store,
// best effort on nodes (one that is down must not block the rest).
func removeEverywhere(ctx workflow.Context, ref controlapi.ImageRef, nodes []string) {
	wg := workflow.NewWaitGroup(ctx)
	for _, node := range nodes {
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			o := pullOptions(node)
			o.StartToCloseTimeout, o.HeartbeatTimeout = 10*time.Minute, 0
			rctx := workflow.WithActivityOptions(gctx, o)
			if err := workflow.ExecuteActivity(rctx, host.RemoveImage, hostapi.NodeImage{Name: ref.Name}).Get(rctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("could not remove the image from a node", "image", ref.Name, "node", node, "error", err)
			}
		})
	}
	wg.Wait(ctx)
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	_ = workflow.ExecuteActivity(cctx, img.RemoveImageArtefact, ref.Name).Get(cctx, nil)
}

// ImagePull brings one Ready image to one node (a node that joined later,
// or one a pod waits on).
func ImagePull(ctx workflow.Context, in ImagePullInput) error {
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	var plan controlapi.NodePull
	if err := workflow.ExecuteActivity(cctx, img.ImagePullPlan, controlapi.ImageNodeInput{Image: in.Image, Node: in.Node}).Get(cctx, &plan); err != nil {
		return err
	}
	if plan.Skip {
		workflow.GetLogger(ctx).Info("no pull needed", "image", in.Image, "node", in.Node, "why", plan.Why)
		return nil
	}
	pullToNode(ctx, plan.Image, in.Node)
	return ctx.Err()
}

// ImageDelete stops a running import, removes the image from every node
// that holds it and from the store, then deletes its row.
func ImageDelete(ctx workflow.Context, in ImageInput) error {
	// The import cleans up after itself when cancelled; this removes the
	// rest. An import that is not running makes this a no-op.
	_ = workflow.RequestCancelExternalWorkflow(ctx, ImageWorkflowID(in.Image.Name), "").Get(ctx, nil)
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	var nodes []string
	if err := workflow.ExecuteActivity(cctx, img.ImageNodeNames, in.Image).Get(cctx, &nodes); err != nil {
		return err
	}
	removeEverywhere(ctx, in.Image, nodes)
	if err := workflow.ExecuteActivity(cctx, img.DeleteImageRow, in.Image).Get(cctx, nil); err != nil {
		return fmt.Errorf("delete image %s: %w", in.Image.Name, err)
	}
	return nil
}

// ImageSync starts pulls of the Ready images that fitting nodes lack.
func ImageSync(ctx workflow.Context) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var started int
	err := workflow.ExecuteActivity(ctx, img.SyncNodeImages).Get(ctx, &started)
	return started, err
}
