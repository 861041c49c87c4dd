package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// Image garbage collection: a Schedule runs ImageGC, which removes the
// unused images of nodes whose pool is too full, each removal an
// ImageNodeRemove under the ID of the image's pull to that node.
const (
	ImageGCWorkflowName         = "ImageGC"
	ImageNodeRemoveWorkflowName = "ImageNodeRemove"
	// ImageGCScheduleID runs ImageGC.
	ImageGCScheduleID = "zonewright-image-gc"
)

// ImageGCResult counts the images removed from nodes.
type ImageGCResult struct {
	Removed int
}

// ImageNodeRemoval says whether the image was removed from the node, and
// if not, why.
type ImageNodeRemoval struct {
	Removed bool
	Why     string `json:",omitempty"`
}

// ImageGC removes, from each node whose pool is used at or above the high
// threshold, the images no pod assigned to it uses, least recently used
// first, until the estimate is below the low threshold; nodes in
// parallel, images of one node one after another.
func ImageGC(ctx workflow.Context) (ImageGCResult, error) {
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	var plan controlapi.ImageGCPlan
	if err := workflow.ExecuteActivity(cctx, img.PlanImageGC).Get(cctx, &plan); err != nil {
		return ImageGCResult{}, err
	}
	var res ImageGCResult
	wg := workflow.NewWaitGroup(ctx)
	for _, n := range plan.Nodes {
		wg.Add(1)
		workflow.Go(ctx, func(gctx workflow.Context) {
			defer wg.Done()
			res.Removed += collectNode(gctx, n)
		})
	}
	wg.Wait(ctx)
	return res, nil
}

// collectNode removes the node's chosen images and records what it did.
// A removal that cannot start because a pull of the same image to the
// node runs (the same workflow ID) is passed over: the pull wins.
func collectNode(ctx workflow.Context, n controlapi.NodeImageGC) int {
	log := workflow.GetLogger(ctx)
	report := controlapi.ImageGCReport{Plan: n}
	for _, c := range n.Remove {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            ImagePullWorkflowID(c.Image, n.Node),
			TaskQueue:             taskqueue.Control,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			// A removal begun ends even if this run is terminated: its
			// node's state of the image is released already.
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
		})
		var r ImageNodeRemoval
		err := workflow.ExecuteChildWorkflow(cctx, ImageNodeRemoveWorkflowName, ImagePullInput{Image: c.Image, Node: n.Node}).Get(cctx, &r)
		switch {
		case temporal.IsWorkflowExecutionAlreadyStartedError(err):
			log.Info("image kept: a pull of it to the node runs", "image", c.Image, "node", n.Node)
		case err != nil:
			log.Warn("could not remove the image from the node", "image", c.Image, "node", n.Node, "error", err)
		case !r.Removed:
			log.Info("image kept", "image", c.Image, "node", n.Node, "why", r.Why)
		default:
			report.Removed = append(report.Removed, c.Image)
		}
	}
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	if err := workflow.ExecuteActivity(cctx, img.RecordImageGC, report).Get(cctx, nil); err != nil {
		log.Warn("could not record the image collection", "node", n.Node, "error", err)
	}
	return len(report.Removed)
}

// ImageNodeRemove removes one image from one node for its garbage
// collection. It runs under the ID of the image's pull to the node, so
// it never runs beside that pull; a pod that asks for the pull meanwhile
// joins this run, and is woken at its end to pull the image again. It
// first releases the node's hold of the image (refused while a pod
// assigned there uses it: one just scheduled keeps it), then removes it
// on the node, where RemoveImage still refuses while zones clone it.
func ImageNodeRemove(ctx workflow.Context, in ImagePullInput) (ImageNodeRemoval, error) {
	cctx := workflow.WithActivityOptions(ctx, controlOptions)
	ref := controlapi.ImageNodeInput{Image: in.Image, Node: in.Node}
	var rel controlapi.ImageRelease
	if err := workflow.ExecuteActivity(cctx, img.ReleaseImageNode, ref).Get(cctx, &rel); err != nil {
		return ImageNodeRemoval{}, err
	}
	if !rel.Released {
		return ImageNodeRemoval{Why: rel.Why}, nil
	}
	o := pullOptions(in.Node)
	o.StartToCloseTimeout, o.HeartbeatTimeout = 10*time.Minute, 0
	rctx := workflow.WithActivityOptions(ctx, o)
	err := workflow.ExecuteActivity(rctx, host.RemoveImage, hostapi.NodeImage{Name: in.Image}).Get(rctx, nil)
	out := ImageNodeRemoval{Removed: err == nil}
	if err != nil {
		// Not removed: the node holds it still (a zone clones it, or the
		// node did not take the removal up), so it is Ready there again;
		// after another failure what is left is unknown, and a pod there
		// pulls it again (a pull repairs a partial image).
		u := controlapi.ImageNodeUpdate{Image: in.Image, Node: in.Node, Phase: model.ImageReady}
		if !isType(err, hostacts.ErrTypeBusy) && !notTakenUp(err) {
			u.Phase, u.Reason = model.ImageFailed, model.ImageReasonPullFailed
		}
		u.Message = "garbage collection could not remove it: " + unwrapActivity(err).Error()
		out.Why = u.Message
		if err := workflow.ExecuteActivity(cctx, img.SetImageNodeStatus, u).Get(cctx, nil); err != nil {
			return out, err
		}
	}
	if err := workflow.ExecuteActivity(cctx, ctl.WakeImageWaiters, ref).Get(cctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("could not wake the pods waiting for the image", "image", in.Image, "node", in.Node, "error", err)
	}
	return out, nil
}
