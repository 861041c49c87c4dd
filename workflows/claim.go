package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlops"
)

// ClaimWorkflowName is the claim workflow's registered name.
const ClaimWorkflowName = "ClaimSync"

// SignalVolumeSync wakes a claim's or a snapshot's workflow: its object
// changed, or something holding it back is gone.
const SignalVolumeSync = "sync"

// volumeLookEvery bounds how late a claim or snapshot being deleted
// notices that what held it is gone when that wake was lost.
const volumeLookEvery = 10 * time.Minute

// waitForWake waits for a wake (signal "sync") or volumeLookEvery,
// continuing as new first when the history has grown long.
func waitForWake(ctx workflow.Context, wake workflow.ReceiveChannel, workflowName string, in any) error {
	if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
		return workflow.NewContinueAsNewError(ctx, workflowName, in)
	}
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(wake, func(workflow.ReceiveChannel, bool) {})
	sel.AddFuture(workflow.NewTimer(ctx, volumeLookEvery), func(workflow.Future) {})
	sel.Select(ctx)
	return nil
}

// ClaimWorkflowID is the workflow ID of a claim's workflow.
func ClaimWorkflowID(namespace, name string) string { return "claim/" + namespace + "/" + name }

// ClaimInput names the claim.
type ClaimInput struct {
	Claim controlops.ClaimRef
}

// ClaimSync does the node's part of a claim's changes, then ends: a claim
// being deleted waits until no pod uses it, then its node destroys the
// dataset (or keeps it, under Retain) and the claim's row goes; a claim
// whose node is drained moves to another with its pods (moveClaim); a
// bound claim that grew gets the new quota on its node. Each wake (signal
// "sync") makes it look again; nothing runs while nothing changes.
func ClaimSync(ctx workflow.Context, in ClaimInput) error {
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	wake := workflow.GetSignalChannel(ctx, SignalVolumeSync)
	for {
		for wake.ReceiveAsync(nil) {
		}
		var st controlops.ClaimState
		if err := workflow.ExecuteActivity(ctx, ctl.LoadClaim, in.Claim).Get(ctx, &st); err != nil {
			return err
		}
		target := controlops.ClaimTarget{Claim: in.Claim, UID: st.Volume.UID, Bytes: st.Volume.Bytes}
		switch {
		case !st.Found:
			return nil
		case st.Deleting && len(st.UsedBy) > 0:
			if err := waitForWake(ctx, wake, ClaimWorkflowName, in); err != nil {
				return err
			}
			continue
		case st.Deleting:
			if st.Node != "" && !st.Retain && !st.NodeGone {
				hctx := workflow.WithActivityOptions(ctx, undoOptions(st.Node, 5*time.Minute))
				if err := workflow.ExecuteActivity(hctx, host.DestroyClaimVolume, st.Volume).Get(ctx, nil); err != nil {
					return err
				}
			}
			if st.Move != nil {
				if err := endMove(ctx, in, st); err != nil {
					return err
				}
			}
			return workflow.ExecuteActivity(ctx, ctl.RemoveClaim, target).Get(ctx, nil)
		case st.Move != nil:
			if err := moveClaim(ctx, wake, in, st); err != nil {
				return err
			}
			continue
		case st.Node != "" && st.Volume.Bytes != st.CapacityBytes:
			hctx := workflow.WithActivityOptions(ctx, undoOptions(st.Node, 2*time.Minute))
			if err := workflow.ExecuteActivity(hctx, host.ResizeClaimVolume, st.Volume).Get(ctx, nil); err != nil {
				return err
			}
			if err := workflow.ExecuteActivity(ctx, ctl.ClaimResized, target).Get(ctx, nil); err != nil {
				return err
			}
			continue // it may have grown again meanwhile
		}
		if !wake.ReceiveAsync(nil) {
			return nil
		}
	}
}
