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
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows"
)

// NewControl builds the control-plane worker with every control-plane
// workflow and activity registered; nodes starts nodes' health workflows,
// podTuning goes into the pod lifecycles it starts (nil: the defaults).
func NewControl(c client.Client, st *store.Store, nodes workflows.NodeClient, podTuning *workflows.Tuning) worker.Worker {
	pods := workflows.PodClient{Temporal: c, Tuning: podTuning}
	w := worker.New(c, workflows.ControlTaskQueue, worker.Options{
		// Autoscaling pollers keep polling the normal queue while running
		// pods keep the sticky queue busy; the fixed-poller balancer always
		// prefers a sticky backlog, and new pods then wait for minutes.
		WorkflowTaskPollerBehavior:       worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{InitialNumberOfPollers: 8}),
		MaxConcurrentActivityTaskPollers: 8,
	})
	w.RegisterWorkflowWithOptions(workflows.Housekeeping, workflow.RegisterOptions{Name: "Housekeeping"})
	w.RegisterWorkflowWithOptions(workflows.PodLifecycle, workflow.RegisterOptions{Name: workflows.PodWorkflowName})
	// Registered by method name, as the workflows refer to them.
	w.RegisterWorkflowWithOptions(workflows.ReconcilePods, workflow.RegisterOptions{Name: "ReconcilePods"})
	w.RegisterWorkflowWithOptions(workflows.ReconcileHosts, workflow.RegisterOptions{Name: workflows.ReconcileHostsWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.NodeHealth, workflow.RegisterOptions{Name: workflows.NodeHealthWorkflowName})
	ctl := activities.NewControl(st, pods)
	ctl.NodeHealth = nodes
	w.RegisterActivity(ctl)
	return w
}

// RegisterImages adds the image workflows and their control-plane
// activities to the control-plane worker.
func RegisterImages(w worker.Worker, a *activities.Images) {
	w.RegisterWorkflowWithOptions(workflows.ImageImport, workflow.RegisterOptions{Name: workflows.ImageImportWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ImagePull, workflow.RegisterOptions{Name: workflows.ImagePullWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ImageDelete, workflow.RegisterOptions{Name: workflows.ImageDeleteWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ImageSync, workflow.RegisterOptions{Name: workflows.ImageSyncWorkflowName})
	w.RegisterActivity(a)
}

// ImageSyncEvery is how often nodes are checked for images they lack.
const ImageSyncEvery = 30 * time.Second

// HousekeepingEvery is how often the housekeeping schedule fires.
const HousekeepingEvery = 5 * time.Minute

// ReconcileEvery is how often pod rows are checked for their workflows.
const ReconcileEvery = 30 * time.Second

// ScheduleOptions tune the control plane's schedules; zero values take
// the defaults.
type ScheduleOptions struct {
	// ReconcileInterval is how often ReconcileHosts compares the nodes
	// with PostgreSQL; default ReconcileEvery.
	ReconcileInterval time.Duration
	// OrphanGrace is how long an orphan is reported before it is removed;
	// default workflows.DefaultOrphanGrace.
	OrphanGrace time.Duration
}

// EnsureSchedules creates the control plane's Temporal Schedules if they
// are missing; several replicas may race here, and all but one find them
// made. The host reconciliation schedule is updated to o when it exists,
// so a changed interval or grace period takes effect on restart.
func EnsureSchedules(ctx context.Context, c client.Client, o ScheduleOptions) error {
	if o.ReconcileInterval <= 0 {
		o.ReconcileInterval = ReconcileEvery
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = workflows.DefaultOrphanGrace
	}
	for _, s := range []struct {
		id, workflow string
		every        time.Duration
		arg          any
		update       bool
	}{
		{workflows.HousekeepingScheduleID, "Housekeeping", HousekeepingEvery,
			workflows.HousekeepingInput{ChangeRetention: 15 * time.Minute, EventRetention: time.Hour}, false},
		{workflows.ReconcilePodsScheduleID, "ReconcilePods", ReconcileEvery, ReconcileEvery, false},
		{workflows.ReconcileHostsScheduleID, workflows.ReconcileHostsWorkflowName, o.ReconcileInterval,
			workflows.ReconcileHostsInput{OrphanGrace: o.OrphanGrace}, true},
		{workflows.ImageSyncScheduleID, workflows.ImageSyncWorkflowName, ImageSyncEvery, nil, false},
	} {
		var args []any
		if s.arg != nil {
			args = []any{s.arg}
		}
		spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: s.every}}}
		action := &client.ScheduleWorkflowAction{ID: s.id, Workflow: s.workflow,
			TaskQueue: workflows.ControlTaskQueue, Args: args}
		_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
			ID:      s.id,
			Spec:    spec,
			Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			Action:  action,
		})
		var exists *serviceerror.AlreadyExists
		if err != nil && !errors.Is(err, temporal.ErrScheduleAlreadyRunning) && !errors.As(err, &exists) {
			return fmt.Errorf("create schedule %s: %w", s.id, err)
		}
		if err != nil && s.update {
			err = c.ScheduleClient().GetHandle(ctx, s.id).Update(ctx, client.ScheduleUpdateOptions{
				DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
					sch := in.Description.Schedule
					sch.Spec = &spec
					sch.Action = action
					return &client.ScheduleUpdate{Schedule: &sch}, nil
				},
			})
			if err != nil {
				return fmt.Errorf("update schedule %s: %w", s.id, err)
			}
		}
	}
	return nil
}
