// Package workflows holds zonewright's Temporal workflows: deterministic
// orchestration with no I/O of its own; activities do the work. Callers
// share the pod lifecycle's contract (podcontract) and the task queues'
// names (taskqueue), not this package; the workflows name the
// control-plane activities by internal/controlapi's stand-ins, so they
// compile none of the control plane.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// HousekeepingScheduleID is the Temporal Schedule that runs Housekeeping,
// registered as HousekeepingWorkflowName.
const (
	HousekeepingScheduleID   = "zonewright-housekeeping"
	HousekeepingWorkflowName = "Housekeeping"
)

// HousekeepingInput says how much history to keep.
type HousekeepingInput struct {
	// ChangeRetention is how long watch history is kept for resuming clients.
	ChangeRetention time.Duration
	// EventRetention is how long events are kept (Kubernetes keeps one hour).
	EventRetention time.Duration
}

// HousekeepingResult reports what was removed.
type HousekeepingResult struct {
	ChangesCompacted int64
	EventsExpired    int64
}

// Housekeeping trims the watch change log and expires old events, so the
// database does not grow without bound.
func Housekeeping(ctx workflow.Context, in HousekeepingInput) (HousekeepingResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
	var res HousekeepingResult
	if err := workflow.ExecuteActivity(ctx, ctl.CompactChanges, in.ChangeRetention).Get(ctx, &res.ChangesCompacted); err != nil {
		return res, err
	}
	if err := workflow.ExecuteActivity(ctx, ctl.ExpireEvents, in.EventRetention).Get(ctx, &res.EventsExpired); err != nil {
		return res, err
	}
	return res, nil
}

// Search attributes the workflows upsert so operators can filter them in
// the Temporal Web UI; all are Keyword.
const (
	SearchAttrNamespace = "ZwNamespace"
	SearchAttrPod       = "ZwPod"
	SearchAttrNode      = "ZwNode"
	SearchAttrPhase     = "ZwPhase"
)

// SearchAttributeNames lists them for registration.
var SearchAttributeNames = []string{SearchAttrNamespace, SearchAttrPod, SearchAttrNode, SearchAttrPhase}

// ReconcilePodsScheduleID is the Temporal Schedule that runs ReconcilePods,
// registered as ReconcilePodsWorkflowName.
const (
	ReconcilePodsScheduleID   = "zonewright-reconcile-pods"
	ReconcilePodsWorkflowName = "ReconcilePods"
)

// ReconcilePods starts the lifecycle of every pod row that lacks one, and
// the health workflow of every node that lacks one.
func ReconcilePods(ctx workflow.Context, settle time.Duration) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var started int
	if err := workflow.ExecuteActivity(ctx, ctl.EnsurePodWorkflows, settle).Get(ctx, &started); err != nil {
		return started, err
	}
	if workflow.GetVersion(ctx, "ensure-node-health", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return started, nil
	}
	return started, workflow.ExecuteActivity(ctx, ctl.EnsureNodeWorkflows).Get(ctx, nil)
}
