package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
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
	Job controlapi.JobRef
	// HistoryLimit overrides when to continue-as-new (tests); 0: 2000 events.
	HistoryLimit int `json:",omitempty"`
}

// Job runs one job to its end and past its TTL: the same level-triggered
// loop as Deployment (sync, then wait for a signal or the timer the sync
// asked for), over SyncJob.
func Job(ctx workflow.Context, in JobInput) error {
	ctx = workflow.WithActivityOptions(ctx, syncOptions)
	var ops *controlapi.Activities
	return syncUntilGone(ctx, SignalJobChanged, in.HistoryLimit, func(ctx workflow.Context) (syncOutcome, error) {
		var res controlapi.JobSyncResult
		err := workflow.ExecuteActivity(ctx, ops.SyncJob, in.Job).Get(ctx, &res)
		return syncOutcome{Gone: res.Gone, WakeAfter: res.WakeAfter}, err
	}, func() error { return workflow.NewContinueAsNewError(ctx, Job, in) })
}
