// Package controlworker wires the control plane's Temporal worker on
// zonewright-control (every workflow and control-plane activity) and the
// control plane's Schedules.
package controlworker

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

	controlacts "github.com/zonewright/zonewright/activities/control"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/scheduler"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/podcontract"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// Deps are what the control-plane worker's workflows and activities
// work with.
type Deps struct {
	Temporal client.Client
	Store    *store.Store
	// Nodes starts nodes' health workflows.
	Nodes workflows.NodeClient
	// PodTuning goes into the pod lifecycles the worker starts; nil: the
	// defaults.
	PodTuning *workflows.Tuning
	// ServiceNet is the service network terminating pods wait to leave.
	ServiceNet *servicenet.Holder
	Capacity   scheduler.Capacity
	// Moves is how claims move with their pods.
	Moves Moves
	// Metrics is what the control-plane activities measure; nil: nothing.
	Metrics *metrics.Serve
}

// New builds the control-plane worker with every control-plane
// workflow and activity registered, and returns the operations its
// activities run on.
func New(d Deps) (worker.Worker, *controlops.Control) {
	c := d.Temporal
	pods := workflows.PodClient{Temporal: c, Tuning: d.PodTuning}
	w := worker.New(c, taskqueue.Control, worker.Options{
		// Autoscaling pollers keep polling the normal queue while running
		// pods keep the sticky queue busy; the fixed-poller balancer always
		// prefers a sticky backlog, and new pods then wait for minutes.
		WorkflowTaskPollerBehavior:       worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{InitialNumberOfPollers: 8}),
		MaxConcurrentActivityTaskPollers: 8,
		// The SDK tells an activity it is cancelled only in the reply to a
		// heartbeat, and sends heartbeats at most every 0.8 of the
		// activity's heartbeat timeout (48 s for an image fetch): a cancelled
		// import would keep downloading that long. Every couple of seconds
		// is cheap for the few long control-plane activities.
		MaxHeartbeatThrottleInterval: controlHeartbeatThrottle,
	})
	w.RegisterWorkflowWithOptions(workflows.Housekeeping, workflow.RegisterOptions{Name: workflows.HousekeepingWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.PodLifecycle, workflow.RegisterOptions{Name: podcontract.WorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ReconcilePods, workflow.RegisterOptions{Name: workflows.ReconcilePodsWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.NodeHealth, workflow.RegisterOptions{Name: workflows.NodeHealthWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.Deployment, workflow.RegisterOptions{Name: workflows.DeploymentWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.Job, workflow.RegisterOptions{Name: workflows.JobWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ClaimSync, workflow.RegisterOptions{Name: workflows.ClaimWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.SnapshotSync, workflow.RegisterOptions{Name: workflows.SnapshotWorkflowName})
	ctl := controlops.NewControl(d.Store, pods)
	ctl.NodeHealth = d.Nodes
	ctl.NodeGracePeriod, ctl.NodeEvictionTimeout = d.Nodes.GracePeriod, d.Nodes.EvictionTimeout
	ctl.HearingSince = time.Now()
	ctl.ServiceNet = d.ServiceNet
	ctl.Scheduler.Capacity = d.Capacity
	ctl.Volumes = workflows.VolumeClient{Temporal: c}
	ctl.Transfers, ctl.AdvertiseURL = d.Moves.Relay, d.Moves.AdvertiseURL
	ctl.Metrics = d.Metrics
	w.RegisterActivity(&controlacts.Control{Ops: ctl})
	return w, ctl
}

// controlHeartbeatThrottle bounds how late a cancel reaches a running
// control-plane activity that reports progress (an image fetch).
const controlHeartbeatThrottle = 2 * time.Second

// Moves is how claims move with their pods: streams relayed by Relay
// (nil: claims do not move) at AdvertiseURL, the API as nodes reach it.
type Moves struct {
	Relay        controlops.TransferRelay
	AdvertiseURL string
}

// RegisterImages adds the image workflows and their control-plane
// activities (over a) to the control-plane worker.
func RegisterImages(w worker.Worker, a *controlops.Images) {
	w.RegisterWorkflowWithOptions(workflows.ImageImport, workflow.RegisterOptions{Name: workflows.ImageImportWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ImagePull, workflow.RegisterOptions{Name: workflows.ImagePullWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ImageDelete, workflow.RegisterOptions{Name: workflows.ImageDeleteWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ImageSync, workflow.RegisterOptions{Name: workflows.ImageSyncWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ImageGC, workflow.RegisterOptions{Name: workflows.ImageGCWorkflowName})
	w.RegisterWorkflowWithOptions(workflows.ImageNodeRemove, workflow.RegisterOptions{Name: workflows.ImageNodeRemoveWorkflowName})
	w.RegisterActivity(&controlacts.Images{Ops: a})
}

// The control plane's housekeeping needs a global view and nothing else:
// it runs every few minutes, so the Temporal UI's workflow list stays
// about the pods. Each node reconciles its own host (see the agent).
const (
	// ImageSyncEvery is how often nodes are checked for images they lack
	// (pods pull what they need at once; this catches late nodes).
	ImageSyncEvery = 5 * time.Minute
	// ImageGCEvery is how often nodes' pools are checked against the
	// image GC thresholds (the kubelet's image GC period).
	ImageGCEvery = 5 * time.Minute
	// HousekeepingEvery is how often the housekeeping schedule fires.
	HousekeepingEvery = 5 * time.Minute
	// ReconcileEvery is how often pod rows are checked for their workflows.
	ReconcileEvery = 5 * time.Minute
	// PodSettle is how long a pod row is given to get its workflow before
	// the reconciler starts one.
	PodSettle = 30 * time.Second
)

// obsoleteSchedules were created by earlier versions; their work moved
// (host reconciliation runs on each node now).
var obsoleteSchedules = []string{"zonewright-reconcile-hosts"}

// EnsureSchedules creates the control plane's Temporal Schedules if they
// are missing (several replicas may race here, and all but one find them
// made), updates their interval when it changed, and deletes obsolete ones.
// reconcilePods overrides ReconcileEvery and podSettle PodSettle when
// positive (tests).
func EnsureSchedules(ctx context.Context, c client.Client, reconcilePods, podSettle time.Duration) error {
	if reconcilePods <= 0 {
		reconcilePods = ReconcileEvery
	}
	if podSettle <= 0 {
		podSettle = PodSettle
	}
	for _, id := range obsoleteSchedules {
		err := c.ScheduleClient().GetHandle(ctx, id).Delete(ctx)
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("delete obsolete schedule %s: %w", id, err)
		}
	}
	for _, s := range []struct {
		id, workflow string
		every        time.Duration
		arg          any
	}{
		{workflows.HousekeepingScheduleID, workflows.HousekeepingWorkflowName, HousekeepingEvery,
			workflows.HousekeepingInput{ChangeRetention: 15 * time.Minute, EventRetention: time.Hour}},
		{workflows.ReconcilePodsScheduleID, workflows.ReconcilePodsWorkflowName, reconcilePods, podSettle},
		{workflows.ImageSyncScheduleID, workflows.ImageSyncWorkflowName, ImageSyncEvery, nil},
		{workflows.ImageGCScheduleID, workflows.ImageGCWorkflowName, ImageGCEvery, nil},
	} {
		var args []any
		if s.arg != nil {
			args = []any{s.arg}
		}
		spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: s.every}}}
		action := &client.ScheduleWorkflowAction{ID: s.id, Workflow: s.workflow,
			TaskQueue: taskqueue.Control, Args: args}
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
		if err != nil {
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

// ReconcilePodsOnce runs the pod reconciler now, between its scheduled
// runs. A control plane killed between a pod's row and its lifecycle
// leaves a pod without one; the replica that starts next calls this once
// the row has had its settle time, so the pod does not wait for the
// schedule (ReconcileEvery) to be repaired.
func ReconcilePodsOnce(ctx context.Context, c client.Client) error {
	// Beside a run still open: one a killed replica's worker was running
	// stays open until its activity times out (minutes), and a run more
	// is harmless (starting a running lifecycle is refused).
	err := c.ScheduleClient().GetHandle(ctx, workflows.ReconcilePodsScheduleID).Trigger(ctx, client.ScheduleTriggerOptions{
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL,
	})
	if err != nil {
		return fmt.Errorf("trigger schedule %s: %w", workflows.ReconcilePodsScheduleID, err)
	}
	return nil
}
