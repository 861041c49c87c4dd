package workflows

import (
	"go.temporal.io/sdk/workflow"

	controlacts "github.com/zonewright/zonewright/activities/control"
	"github.com/zonewright/zonewright/internal/controlops"
)

// The Job workflow's public contract: its name, ID and the signal that
// makes it look again (sent by the workload feed when the job's spec or
// one of its pods changes).
const (
	JobWorkflowName  = "Job"
	SignalJobChanged = "changed"
)

// JobWorkflowID is the stable, readable ID of a job's workflow.
func JobWorkflowID(namespace, name string) string { return "job/" + namespace + "/" + name }

// JobInput starts a job's workflow and carries it across continue-as-new.
type JobInput struct {
	Job controlops.JobRef
	// HistoryLimit overrides when to continue-as-new (tests); 0: 2000 events.
	HistoryLimit int `json:",omitempty"`
}

// Job runs one job to its end and past its TTL: the same level-triggered
// loop as Deployment (sync, then wait for a signal or the timer the sync
// asked for), over SyncJob.
func Job(ctx workflow.Context, in JobInput) error {
	ctx = workflow.WithActivityOptions(ctx, syncOptions)
	changed := workflow.GetSignalChannel(ctx, SignalJobChanged)
	limit := in.HistoryLimit
	if limit <= 0 {
		limit = 2000
	}
	var ops *controlacts.Control
	for loops := 1; ; loops++ {
		for changed.ReceiveAsync(nil) {
		}
		var res controlops.JobSyncResult
		if err := workflow.ExecuteActivity(ctx, ops.SyncJob, in.Job).Get(ctx, &res); err != nil {
			return err
		}
		if res.Gone {
			return nil
		}
		info := workflow.GetInfo(ctx)
		if (info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= limit || loops*9 >= limit) && changed.Len() == 0 {
			return workflow.NewContinueAsNewError(ctx, Job, in)
		}
		waitCtx, cancel := workflow.WithCancel(ctx)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(changed, func(workflow.ReceiveChannel, bool) {}) // taken by the drain above
		sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
		if res.WakeAfter > 0 {
			sel.AddFuture(workflow.NewTimer(waitCtx, res.WakeAfter), func(workflow.Future) {})
		}
		sel.Select(ctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err // a cancel request: the pods stay, as do their lifecycles
		}
	}
}
