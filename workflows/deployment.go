package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// The Deployment workflow's public contract: its name, ID and the signal
// that makes it look again (sent by the deployment feed when the
// deployment's spec or one of its pods changes).
const (
	DeploymentWorkflowName  = "Deployment"
	SignalDeploymentChanged = "changed"
)

// DeploymentWorkflowID is the stable, readable ID of a deployment's workflow.
func DeploymentWorkflowID(namespace, name string) string {
	return "deployment/" + namespace + "/" + name
}

// DeploymentInput starts a deployment's workflow, and carries it across
// continue-as-new: all the rest lives in PostgreSQL.
type DeploymentInput struct {
	Deployment controlapi.DeploymentRef
	// HistoryLimit overrides when to continue-as-new (tests); 0: 2000 events.
	HistoryLimit int `json:",omitempty"`
}

// syncOptions: a sync creates and deletes up to a rollout step's pods, one
// lifecycle start each, and heartbeats after each, so a sync lost with a
// control-plane worker is retried within seconds, not at its timeout; it
// retries until the database and Temporal answer.
var syncOptions = workflow.ActivityOptions{
	TaskQueue:           taskqueue.Control,
	StartToCloseTimeout: 2 * time.Minute,
	HeartbeatTimeout:    5 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 2,
		MaximumInterval: 30 * time.Second},
}

// Deployment is the single writer of one deployment's pods: a
// level-triggered loop that syncs (observe, plan, act, write status) and
// then waits for a change signal, or for the timer the sync asked for (a
// pod becoming available, a deadline). While nothing changes it waits on
// the signal alone and costs no history events. The pods' lifecycles are
// separate workflows that outlive it.
func Deployment(ctx workflow.Context, in DeploymentInput) error {
	ctx = workflow.WithActivityOptions(ctx, syncOptions)
	var ops *controlapi.Activities
	return syncUntilGone(ctx, SignalDeploymentChanged, in.HistoryLimit, func(ctx workflow.Context) (syncOutcome, error) {
		var res controlapi.DeploymentSyncResult
		err := workflow.ExecuteActivity(ctx, ops.SyncDeployment, in.Deployment).Get(ctx, &res)
		return syncOutcome{Gone: res.Gone, WakeAfter: res.WakeAfter}, err
	}, func() error { return workflow.NewContinueAsNewError(ctx, Deployment, in) })
}

// syncOutcome is what a sync tells the loop: the object is gone, or when
// to sync again unasked (0: only on a change).
type syncOutcome struct {
	Gone      bool
	WakeAfter time.Duration
}

// syncUntilGone is the loop of Deployment and Job: take the pending
// change signals, sync once, end when the object is gone, continue as
// new (again) when the history is long, then wait for a change signal,
// the wake-up the sync asked for, or a cancel request.
func syncUntilGone(ctx workflow.Context, signal string, limit int, sync func(workflow.Context) (syncOutcome, error), again func() error) error {
	changed := workflow.GetSignalChannel(ctx, signal)
	if limit <= 0 {
		limit = 2000
	}
	// A loop costs about 9 events (a signal or a timer, a workflow task,
	// an activity); counting them bounds the history where its length is
	// not known (the SDK's test environment).
	for loops := 1; ; loops++ {
		// Changes that came while the last sync ran are all covered by
		// the next one.
		for changed.ReceiveAsync(nil) {
		}
		res, err := sync(ctx)
		if err != nil {
			return err
		}
		if res.Gone {
			return nil
		}
		info := workflow.GetInfo(ctx)
		if (info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= limit || loops*9 >= limit) && changed.Len() == 0 {
			return again()
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
