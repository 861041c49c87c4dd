package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// moveLookEvery bounds how late a move notices what it waits for (a
// destination that fits, the last pod gone from the old node) when the
// wake was lost.
const moveLookEvery = 30 * time.Second

// transferTimeout bounds one stream of a move; transferHeartbeat is how
// long a node may go silent during one before the attempt is given up
// and started again (its agent died).
const (
	transferTimeout   = 6 * time.Hour
	transferHeartbeat = 30 * time.Second
)

func transferOptions(node string) workflow.ActivityOptions {
	o := undoOptions(node, transferTimeout)
	o.HeartbeatTimeout = transferHeartbeat
	return o
}

// moveClaim does the next step of the claim's move, by its phase, each
// step safe to run again after a crash of any process:
//
//   - Planning: pick a destination (the claim's pods keep running).
//   - Copying: snapshot move-<id>-1 on the old node and copy it whole to
//     the destination while the pods run; then tell them to leave.
//   - Switching: once no pod is left on the old node, snapshot
//     move-<id>-2, copy what changed since move-<id>-1, and make the
//     destination the claim's node (its pods start there).
//   - Cleaning: destroy the old node's copy and the move's snapshots.
//
// It returns to be called again with the claim read anew; it waits (for
// a wake or moveLookEvery) when the move cannot go on yet.
func moveClaim(ctx workflow.Context, wake workflow.ReceiveChannel, in ClaimInput, st controlapi.ClaimState) error {
	m := st.Move
	target := controlapi.ClaimTarget{Claim: in.Claim, UID: st.Volume.UID}
	mv := controlapi.ClaimMoveInput{Target: target, MoveID: m.ID}
	switch m.Phase {
	case model.MovePlanning:
		var plan controlapi.ClaimMovePlan
		if err := workflow.ExecuteActivity(ctx, ctl.PlanClaimMove, target).Get(ctx, &plan); err != nil {
			return err
		}
		if plan.Move == nil {
			return waitForMove(ctx, wake, in)
		}
		return nil
	case model.MoveCopying:
		if err := copyClaim(ctx, st, mv, 1); err != nil {
			return err
		}
		return workflow.ExecuteActivity(ctx, ctl.MoveClaimPods, mv).Get(ctx, nil)
	case model.MoveSwitching:
		if st.OnSource > 0 {
			return waitForMove(ctx, wake, in)
		}
		if err := copyClaim(ctx, st, mv, 2); err != nil {
			return err
		}
		return workflow.ExecuteActivity(ctx, ctl.SwitchClaimNode, mv).Get(ctx, nil)
	case model.MoveCloning:
		if err := copyClone(ctx, in, st, mv); err != nil {
			return err
		}
		return workflow.ExecuteActivity(ctx, ctl.SwitchClaimNode, mv).Get(ctx, nil)
	case model.MoveCleaning:
		if m.Snapshot != "" {
			// A clone's copy: its received snapshot goes; there is no source
			// copy of the claim to remove.
			dctx := workflow.WithActivityOptions(ctx, undoOptions(m.To, 2*time.Minute))
			snap := hostapi.ClaimSnapshot{UID: m.Snapshot, ClaimUID: st.Volume.UID}
			if err := workflow.ExecuteActivity(dctx, host.DestroyClaimSnapshot, snap).Get(ctx, nil); err != nil {
				return err
			}
			return workflow.ExecuteActivity(ctx, ctl.EndClaimMove, mv).Get(ctx, nil)
		}
		vol := st.Volume
		vol.FromSnapshot = nil
		if !st.SourceGone {
			sctx := workflow.WithActivityOptions(ctx, undoOptions(m.From, 5*time.Minute))
			if err := workflow.ExecuteActivity(sctx, host.DestroyClaimVolume, vol).Get(ctx, nil); err != nil {
				return err
			}
		}
		dctx := workflow.WithActivityOptions(ctx, undoOptions(m.To, 2*time.Minute))
		for step := 1; step <= 2; step++ {
			snap := hostapi.ClaimSnapshot{UID: model.MoveSnapshot(m.ID, step), ClaimUID: st.Volume.UID}
			if err := workflow.ExecuteActivity(dctx, host.DestroyClaimSnapshot, snap).Get(ctx, nil); err != nil {
				return err
			}
		}
		return workflow.ExecuteActivity(ctx, ctl.EndClaimMove, mv).Get(ctx, nil)
	}
	return nil
}

// copyClaim takes snapshot step of the move on the old node and copies
// it to the destination through the relay: whole (step 1) or what
// changed since step 1.
func copyClaim(ctx workflow.Context, st controlapi.ClaimState, mv controlapi.ClaimMoveInput, step int) error {
	m := st.Move
	snap := model.MoveSnapshot(m.ID, step)
	vol := st.Volume
	vol.FromSnapshot = nil
	sctx := workflow.WithActivityOptions(ctx, undoOptions(m.From, 2*time.Minute))
	if err := workflow.ExecuteActivity(sctx, host.SnapshotClaimVolume, hostapi.ClaimSnapshot{UID: snap, ClaimUID: vol.UID}).Get(ctx, nil); err != nil {
		return err
	}
	var tickets controlapi.ClaimTransferTickets
	if err := workflow.ExecuteActivity(ctx, ctl.ClaimTransfer, controlapi.ClaimTransferInput{Move: mv, Step: step}).Get(ctx, &tickets); err != nil {
		return err
	}
	xfer := hostapi.ClaimTransfer{Claim: vol, Snapshot: snap}
	if step > 1 {
		xfer.From = model.MoveSnapshot(m.ID, step-1)
	}
	send, recv := xfer, xfer
	send.Ticket, recv.Ticket = tickets.Upload, tickets.Download
	// The relay holds the whole stream between the two: a destination
	// that fails to receive downloads it again, without a new send.
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, transferOptions(m.From)), host.SendClaimVolume, send).Get(ctx, nil); err != nil {
		return err
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, transferOptions(m.To)), host.ReceiveClaimVolume, recv).Get(ctx, nil)
}

// copyClone copies the claim's VolumeSnapshot from the node holding it
// (the move's From) to the claim's node through the relay: a clone made
// on another node than its snapshot's. The copy is the claim's own
// dataset, with its names and size; a receive already done is skipped.
func copyClone(ctx workflow.Context, in ClaimInput, st controlapi.ClaimState, mv controlapi.ClaimMoveInput) error {
	m := st.Move
	src := st.Volume.FromSnapshot
	if src == nil {
		return temporal.NewNonRetryableApplicationError("a claim copied from a snapshot names no snapshot", "InvalidClone", nil)
	}
	vol := st.Volume
	vol.FromSnapshot = nil
	var tickets controlapi.ClaimTransferTickets
	if err := workflow.ExecuteActivity(ctx, ctl.ClaimTransfer, controlapi.ClaimTransferInput{Move: mv, Step: 1}).Get(ctx, &tickets); err != nil {
		return err
	}
	source := hostapi.ClaimVolume{Name: vol.Name, UID: src.ClaimUID, Block: vol.Block}
	send := hostapi.ClaimTransfer{Claim: source, Snapshot: src.UID, Ticket: tickets.Upload}
	recv := hostapi.ClaimTransfer{Claim: vol, Snapshot: src.UID, Ticket: tickets.Download,
		Props: hostapi.ClaimDatasetProps(in.Claim.Namespace, vol)}
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, transferOptions(m.From)), host.SendClaimVolume, send).Get(ctx, nil); err != nil {
		return err
	}
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, transferOptions(m.To)), host.ReceiveClaimVolume, recv).Get(ctx, nil)
}

// waitForMove waits for a wake or moveLookEvery, continuing as new
// first when the history has grown long.
func waitForMove(ctx workflow.Context, wake workflow.ReceiveChannel, in ClaimInput) error {
	if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
		return workflow.NewContinueAsNewError(ctx, ClaimWorkflowName, in)
	}
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(wake, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	sel.AddFuture(workflow.NewTimer(ctx, moveLookEvery), func(workflow.Future) {})
	sel.Select(ctx)
	return nil
}

// endMove drops what a move of a claim being deleted left: the copy on
// the node that was not the claim's (the destination before the switch,
// the old node after), and the move's streams.
func endMove(ctx workflow.Context, in ClaimInput, st controlapi.ClaimState) error {
	m := st.Move
	other := m.To
	if st.Node == m.To {
		other = m.From
	}
	if other != "" && other != st.Node && !st.Retain && !(other == m.From && st.SourceGone) {
		vol := st.Volume
		vol.FromSnapshot = nil
		hctx := workflow.WithActivityOptions(ctx, undoOptions(other, 5*time.Minute))
		if err := workflow.ExecuteActivity(hctx, host.DestroyClaimVolume, vol).Get(ctx, nil); err != nil {
			return err
		}
	}
	if m.ID == "" {
		return nil
	}
	mv := controlapi.ClaimMoveInput{Target: controlapi.ClaimTarget{Claim: in.Claim, UID: st.Volume.UID}, MoveID: m.ID}
	return workflow.ExecuteActivity(ctx, ctl.EndClaimMove, mv).Get(ctx, nil)
}
