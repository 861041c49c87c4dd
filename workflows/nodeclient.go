package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// NodeClient starts and wakes nodes' health workflows: what the API and
// the reconciler use. Grace and eviction timeout go into every workflow
// it starts.
type NodeClient struct {
	Temporal        client.Client
	GracePeriod     time.Duration
	EvictionTimeout time.Duration
}

// Ensure starts the node's NodeHealth workflow unless one is running.
func (c NodeClient) Ensure(ctx context.Context, node string) error {
	opts := client.StartWorkflowOptions{
		ID:                       NodeWorkflowID(node),
		TaskQueue:                taskqueue.Control,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
	_, err := c.Temporal.ExecuteWorkflow(ctx, opts, NodeHealthWorkflowName,
		NodeHealthInput{Node: node, GracePeriod: c.GracePeriod, EvictionTimeout: c.EvictionTimeout})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", opts.ID, err)
	}
	return nil
}

// Check makes the node's health workflow look at the node now (after a
// forced delete it then ends). A workflow that is not running is fine.
func (c NodeClient) Check(ctx context.Context, node string) error {
	err := c.Temporal.SignalWorkflow(ctx, NodeWorkflowID(node), "", SignalNodeCheck, nil)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil
	}
	return err
}
