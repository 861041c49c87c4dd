package workflows

import (
	"context"
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// DeploymentClient starts and wakes deployments' workflows: what the
// deployment feed uses.
type DeploymentClient struct {
	Temporal client.Client
}

func (c DeploymentClient) options(ns, name string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       DeploymentWorkflowID(ns, name),
		TaskQueue:                taskqueue.Control,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
	}
}

// Wake tells the deployment's workflow to look again, starting it if it
// does not run.
func (c DeploymentClient) Wake(ctx context.Context, ns, name string) error {
	opts := c.options(ns, name)
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_UNSPECIFIED // signal-with-start uses the running one
	_, err := c.Temporal.SignalWithStartWorkflow(ctx, opts.ID, SignalDeploymentChanged, nil, opts, DeploymentWorkflowName,
		DeploymentInput{Deployment: controlapi.DeploymentRef{Namespace: ns, Name: name}})
	return err
}

// Ensure starts the deployment's workflow if it does not run, and leaves
// a running one alone (it costs that one no history event).
func (c DeploymentClient) Ensure(ctx context.Context, ns, name string) error {
	_, err := c.Temporal.ExecuteWorkflow(ctx, c.options(ns, name), DeploymentWorkflowName,
		DeploymentInput{Deployment: controlapi.DeploymentRef{Namespace: ns, Name: name}})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	return err
}

// JobClient starts and wakes jobs' workflows: what the workload feed uses.
type JobClient struct {
	Temporal client.Client
}

func (c JobClient) options(ns, name string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                    JobWorkflowID(ns, name),
		TaskQueue:             taskqueue.Control,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
}

// Wake tells the job's workflow to look again, starting it if it does
// not run.
func (c JobClient) Wake(ctx context.Context, ns, name string) error {
	opts := c.options(ns, name)
	_, err := c.Temporal.SignalWithStartWorkflow(ctx, opts.ID, SignalJobChanged, nil, opts, JobWorkflowName,
		JobInput{Job: controlapi.JobRef{Namespace: ns, Name: name}})
	return err
}

// Ensure starts the job's workflow if it does not run.
func (c JobClient) Ensure(ctx context.Context, ns, name string) error {
	opts := c.options(ns, name)
	opts.WorkflowIDConflictPolicy = enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL
	_, err := c.Temporal.ExecuteWorkflow(ctx, opts, JobWorkflowName, JobInput{Job: controlapi.JobRef{Namespace: ns, Name: name}})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	return err
}
