package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/workflows/podcontract"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// Errors of PodClient that callers map to API statuses.
var (
	// ErrRefused: the lifecycle's validator refused an update (finalize
	// on a pod that is not terminating); the error says why.
	ErrRefused = errors.New("refused")
	// ErrStillRunning: a workflow of an earlier pod of the same name has not finished.
	ErrStillRunning = errors.New("a pod of this name is still being removed")
)

// PodClient starts and steers pod lifecycles: what the API and the
// reconciler use, so nobody retypes an ID or a signal name.
type PodClient struct {
	Temporal client.Client
	// Tuning is written into every lifecycle started; nil: DefaultTuning.
	Tuning *Tuning
}

// Start starts the lifecycle of a newly created pod.
func (c PodClient) Start(ctx context.Context, ref controlapi.PodRef) error {
	opts := client.StartWorkflowOptions{
		ID:                       podcontract.WorkflowID(ref.Namespace, ref.Name),
		TaskQueue:                taskqueue.Control,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}
	// The previous pod of this name may be finishing its last activity.
	for attempt := 0; ; attempt++ {
		t := DefaultTuning
		if c.Tuning != nil {
			t = *c.Tuning
		}
		_, err := c.Temporal.ExecuteWorkflow(ctx, opts, podcontract.WorkflowName, PodInput{Pod: ref, Tuning: &t})
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
	d, err := c.describeRunning(ctx, namespace, name)
	return d != nil, err
}

// runningLifecyclesQuery finds the running lifecycles in Temporal's
// visibility store (its SQL and Elasticsearch stores both answer it).
const runningLifecyclesQuery = "WorkflowType = '" + podcontract.WorkflowName + "' AND ExecutionStatus = 'Running'"

// RunningPods lists the pods whose lifecycle runs, in pages of a
// thousand, as the visibility store sees them: it lags the histories by
// a moment, so a lifecycle just started may be missing.
func (c PodClient) RunningPods(ctx context.Context) (map[controlapi.PodName]bool, error) {
	out := map[controlapi.PodName]bool{}
	req := &workflowservice.ListWorkflowExecutionsRequest{Query: runningLifecyclesQuery, PageSize: 1000}
	for {
		resp, err := c.Temporal.ListWorkflow(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			if ns, name, ok := podcontract.ParseWorkflowID(e.GetExecution().GetWorkflowId()); ok {
				out[controlapi.PodName{Namespace: ns, Name: name}] = true
			}
		}
		if len(resp.GetNextPageToken()) == 0 {
			return out, nil
		}
		req.NextPageToken = resp.GetNextPageToken()
	}
}

// describeRunning describes the pod's lifecycle; nil when it is not
// running (or there is none).
func (c PodClient) describeRunning(ctx context.Context, namespace, name string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	d, err := c.Temporal.DescribeWorkflowExecution(ctx, podcontract.WorkflowID(namespace, name), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil || d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, err
	}
	return d, nil
}

// failingTaskAttempts is the attempt of a pending workflow task that marks
// a lifecycle as failing its tasks: one attempt has failed (or timed out)
// already. On a forced delete, terminating a lifecycle that would have
// recovered costs only an orphan zone, which host reconciliation removes.
const failingTaskAttempts = 2

// FailingTasks reports whether the pod's lifecycle is running but fails
// its workflow tasks (a task retried failingTaskAttempts times): such a
// lifecycle never takes a signal, so it never ends the pod.
func (c PodClient) FailingTasks(ctx context.Context, namespace, name string) (bool, error) {
	d, err := c.describeRunning(ctx, namespace, name)
	if d == nil {
		return false, err
	}
	t := d.GetPendingWorkflowTask()
	return t != nil && t.Attempt >= failingTaskAttempts, nil
}

// Terminate ends the pod's lifecycle without running any more of it.
func (c PodClient) Terminate(ctx context.Context, namespace, name, reason string) error {
	err := c.Temporal.TerminateWorkflow(ctx, podcontract.WorkflowID(namespace, name), "", reason)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	return err
}

// Signal sends one of the lifecycle's signals.
func (c PodClient) Signal(ctx context.Context, namespace, name, signal string, arg any) error {
	err := c.Temporal.SignalWorkflow(ctx, podcontract.WorkflowID(namespace, name), "", signal, arg)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s", podcontract.ErrNoLifecycle, podcontract.WorkflowID(namespace, name))
	}
	return err
}

// Update runs one of the lifecycle's updates and waits for its answer; a
// refusal by its validator is ErrRefused with the lifecycle's reason.
func (c PodClient) Update(ctx context.Context, namespace, name, update string, args ...any) error {
	h, err := c.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: podcontract.WorkflowID(namespace, name), UpdateName: update, Args: args,
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return fmt.Errorf("%w: %s", podcontract.ErrNoLifecycle, podcontract.WorkflowID(namespace, name))
	}
	if err == nil {
		err = h.Get(ctx, nil)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return fmt.Errorf("%w: %s", ErrRefused, appErr.Message())
	}
	return err
}
