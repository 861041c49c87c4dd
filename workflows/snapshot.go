package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
)

// SnapshotWorkflowName is the snapshot workflow's registered name.
const SnapshotWorkflowName = "SnapshotSync"

// SnapshotWorkflowID is the workflow ID of a snapshot's workflow.
func SnapshotWorkflowID(namespace, name string) string { return "snapshot/" + namespace + "/" + name }

// SnapshotInput names the snapshot.
type SnapshotInput struct {
	Snapshot controlapi.SnapshotRef
}

// SnapshotSync does the node's part of a VolumeSnapshot, then ends: a new
// one is taken on its claim's node (zfs snapshot) and marked ready; one
// being deleted waits until no claim cloned from it is left (ZFS keeps a
// snapshot while clones of it do), then its node destroys it and its row
// goes. Each wake (signal "sync") makes it look again.
func SnapshotSync(ctx workflow.Context, in SnapshotInput) error {
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	wake := workflow.GetSignalChannel(ctx, SignalVolumeSync)
	return retryVolumeTurns(ctx, wake, SnapshotWorkflowName, in, func() (bool, error) { return snapshotTurn(ctx, wake, in) })
}

// snapshotTurn reads the snapshot and does what it needs next; done:
// nothing is left to do.
func snapshotTurn(ctx workflow.Context, wake workflow.ReceiveChannel, in SnapshotInput) (done bool, err error) {
	for wake.ReceiveAsync(nil) {
	}
	var st controlapi.SnapshotState
	if err := workflow.ExecuteActivity(ctx, ctl.LoadSnapshot, in.Snapshot).Get(ctx, &st); err != nil {
		return false, err
	}
	target := controlapi.SnapshotTarget{Snapshot: in.Snapshot, UID: st.Snapshot.UID, State: st}
	switch {
	case !st.Found:
		return true, nil
	case st.Deleting && len(st.Clones) > 0:
		return false, waitForWake(ctx, wake, SnapshotWorkflowName, in)
	case st.Deleting:
		if st.Node != "" {
			hctx := workflow.WithActivityOptions(ctx, undoOptions(st.Node, 2*time.Minute))
			if err := workflow.ExecuteActivity(hctx, host.DestroyClaimSnapshot, st.Snapshot).Get(ctx, nil); err != nil {
				return false, err
			}
		}
		return true, workflow.ExecuteActivity(ctx, ctl.RemoveSnapshot, target).Get(ctx, nil)
	case !st.Ready:
		var placed bool
		if err := workflow.ExecuteActivity(ctx, ctl.PlaceSnapshot, target).Get(ctx, &placed); err != nil || !placed {
			return true, err // gone, or it cannot be taken (the snapshot says why)
		}
		hctx := workflow.WithActivityOptions(ctx, undoOptions(st.Node, 2*time.Minute))
		if err := workflow.ExecuteActivity(hctx, host.SnapshotClaimVolume, st.Snapshot).Get(ctx, nil); err != nil {
			return false, err
		}
		// Deleted meanwhile?
		return false, workflow.ExecuteActivity(ctx, ctl.SnapshotTaken, target).Get(ctx, nil)
	}
	return !wake.ReceiveAsync(nil), nil
}
