package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
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
	Claim controlapi.ClaimRef
}

// ClaimSync does the node's part of a claim's changes, then ends: a claim
// being deleted waits until no pod uses it, then its node destroys the
// dataset (or keeps it, under Retain) and the claim's row goes; a claim
// whose node is drained moves to another with its pods (moveClaim); a
// bound claim that grew gets the new quota on its node. Each wake (signal
// "sync") makes it look again; nothing runs while nothing changes. A node
// step that failed for a reason a later try may fix (its node did not
// take it up) is tried again, the claim read anew, until it is done or the
// node is deleted.
func ClaimSync(ctx workflow.Context, in ClaimInput) error {
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	wake := workflow.GetSignalChannel(ctx, SignalVolumeSync)
	return retryVolumeTurns(ctx, wake, ClaimWorkflowName, in, func() (bool, error) { return claimTurn(ctx, wake, in) })
}

// claimTurn reads the claim and does what it needs next; done: nothing
// is left to do.
func claimTurn(ctx workflow.Context, wake workflow.ReceiveChannel, in ClaimInput) (done bool, err error) {
	for wake.ReceiveAsync(nil) {
	}
	var st controlapi.ClaimState
	if err := workflow.ExecuteActivity(ctx, ctl.LoadClaim, in.Claim).Get(ctx, &st); err != nil {
		return false, err
	}
	target := controlapi.ClaimTarget{Claim: in.Claim, UID: st.Volume.UID, Bytes: st.Volume.Bytes}
	switch {
	case !st.Found:
		return true, nil
	case st.Deleting && len(st.UsedBy) > 0:
		return false, waitForWake(ctx, wake, ClaimWorkflowName, in)
	case st.Deleting:
		if st.Node != "" && !st.Retain && !st.NodeGone {
			hctx := workflow.WithActivityOptions(ctx, undoOptions(st.Node, 5*time.Minute))
			if err := workflow.ExecuteActivity(hctx, host.DestroyClaimVolume, st.Volume).Get(ctx, nil); err != nil {
				return false, err
			}
		}
		if st.Move != nil {
			if err := endMove(ctx, in, st); err != nil {
				return false, err
			}
		}
		return true, workflow.ExecuteActivity(ctx, ctl.RemoveClaim, target).Get(ctx, nil)
	case st.Move != nil:
		return false, moveClaim(ctx, wake, in, st)
	case st.Node != "" && st.Volume.Bytes != st.CapacityBytes:
		hctx := workflow.WithActivityOptions(ctx, undoOptions(st.Node, 2*time.Minute))
		if err := workflow.ExecuteActivity(hctx, host.ResizeClaimVolume, st.Volume).Get(ctx, nil); err != nil {
			return false, err
		}
		// It may have grown again meanwhile.
		return false, workflow.ExecuteActivity(ctx, ctl.ClaimResized, target).Get(ctx, nil)
	}
	return !wake.ReceiveAsync(nil), nil
}

// versionRetryVolumeHost: a claim's or snapshot's node step that its node
// did not take up (or whose attempts ran out) is tried again instead of
// failing the workflow.
const versionRetryVolumeHost = "retry-volume-host"

// retryVolumeTurns runs turn until it is done. A turn that failed for a
// reason a later try may fix (retryableHostFailure: above all a node that
// did not take a task up within ScheduleToStart, which Temporal never
// retries) runs again after a back-off, or at once on a wake; it reads
// its object anew, so a node deleted meanwhile ends the tries. Other
// errors (a continue-as-new among them) end the workflow as they are.
func retryVolumeTurns(ctx workflow.Context, wake workflow.ReceiveChannel, workflowName string, in any, turn func() (bool, error)) error {
	for failures := 0; ; {
		done, err := turn()
		switch {
		case err == nil && done:
			return nil
		case err == nil:
			failures = 0
			continue
		case !retryableHostFailure(err) || workflow.GetVersion(ctx, versionRetryVolumeHost, workflow.DefaultVersion, 1) < 1:
			return err
		}
		failures++
		workflow.GetLogger(ctx).Warn("a node step failed; trying again", "try", failures, "error", err)
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return workflow.NewContinueAsNewError(ctx, workflowName, in)
		}
		tctx, cancel := workflow.WithCancel(ctx)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(wake, func(workflow.ReceiveChannel, bool) {})
		sel.AddFuture(workflow.NewTimer(tctx, hostRetryBackoff(failures)), func(workflow.Future) {})
		sel.Select(ctx)
		cancel()
	}
}
