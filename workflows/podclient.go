package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/activities"
)

// Errors of PodClient that callers map to API statuses.
var (
	// ErrNoLifecycle: the pod has no running workflow.
	ErrNoLifecycle = activities.ErrNoLifecycle
	// ErrStillRunning: a workflow of an earlier pod of the same name has not finished.
	ErrStillRunning = errors.New("a pod of this name is still being removed")
)

// PodClient starts and steers pod lifecycles: what the API and the
// reconciler use, so nobody retypes an ID or a signal name.
type PodClient struct{ Temporal client.Client }

// Start starts the lifecycle of a newly created pod.
func (c PodClient) Start(ctx context.Context, ref activities.PodRef) error {
	opts := client.StartWorkflowOptions{
		ID:                       PodWorkflowID(ref.Namespace, ref.Name),
		TaskQueue:                ControlTaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}
	// The previous pod of this name may be finishing its last activity.
	for attempt := 0; ; attempt++ {
		_, err := c.Temporal.ExecuteWorkflow(ctx, opts, PodWorkflowName, PodInput{Pod: ref})
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if !errors.As(err, &started) {
			return err
		}
		if attempt == 20 {
			return fmt.Errorf("%w: %s", ErrStillRunning, opts.ID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Running reports whether the pod's lifecycle workflow is running.
func (c PodClient) Running(ctx context.Context, namespace, name string) (bool, error) {
	d, err := c.Temporal.DescribeWorkflowExecution(ctx, PodWorkflowID(namespace, name), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// Signal sends one of the lifecycle's signals.
func (c PodClient) Signal(ctx context.Context, namespace, name, signal string, arg any) error {
	err := c.Temporal.SignalWorkflow(ctx, PodWorkflowID(namespace, name), "", signal, arg)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s", ErrNoLifecycle, PodWorkflowID(namespace, name))
	}
	return err
}
