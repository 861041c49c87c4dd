// Package worker wires Temporal workers: the control-plane worker on
// zonewright-control, and (on each host) the node worker.
package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows"
)

// NewControl builds the control-plane worker with every control-plane
// workflow and activity registered.
func NewControl(c client.Client, st *store.Store) worker.Worker {
	w := worker.New(c, workflows.ControlTaskQueue, worker.Options{
		MaxConcurrentWorkflowTaskPollers: 8,
		MaxConcurrentActivityTaskPollers: 8,
	})
	w.RegisterWorkflowWithOptions(workflows.Housekeeping, workflow.RegisterOptions{Name: "Housekeeping"})
	ctl := &activities.Control{Store: st}
	w.RegisterActivityWithOptions(ctl.CompactChanges, activity.RegisterOptions{Name: workflows.ActivityCompactChanges})
	w.RegisterActivityWithOptions(ctl.ExpireEvents, activity.RegisterOptions{Name: workflows.ActivityExpireEvents})
	return w
}

// HousekeepingEvery is how often the housekeeping schedule fires.
const HousekeepingEvery = 5 * time.Minute

// EnsureSchedules creates the control plane's Temporal Schedules if they
// are missing; several replicas may race here, and all but one find it made.
func EnsureSchedules(ctx context.Context, c client.Client) error {
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      workflows.HousekeepingScheduleID,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: HousekeepingEvery}}},
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{
			ID:        workflows.HousekeepingScheduleID,
			Workflow:  "Housekeeping",
			TaskQueue: workflows.ControlTaskQueue,
			Args: []any{workflows.HousekeepingInput{
				ChangeRetention: 15 * time.Minute,
				EventRetention:  time.Hour,
			}},
		},
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.Is(err, temporal.ErrScheduleAlreadyRunning) && !errors.As(err, &exists) {
		return fmt.Errorf("create schedule %s: %w", workflows.HousekeepingScheduleID, err)
	}
	return nil
}
