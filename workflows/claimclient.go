package workflows

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/controlops"
)

// ClaimClient starts or wakes claims' workflows: what the API and the
// pods' removal use.
type ClaimClient struct {
	Temporal client.Client
}

// Sync has the claim's workflow look at the claim: started if none runs,
// signalled if one does.
func (c ClaimClient) Sync(ctx context.Context, namespace, name string) error {
	opts := client.StartWorkflowOptions{
		ID:                    ClaimWorkflowID(namespace, name),
		TaskQueue:             ControlTaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
	_, err := c.Temporal.SignalWithStartWorkflow(ctx, opts.ID, SignalClaimSync, nil, opts, ClaimWorkflowName,
		ClaimInput{Claim: controlops.ClaimRef{Namespace: namespace, Name: name}})
	if err != nil {
		return fmt.Errorf("wake %s: %w", opts.ID, err)
	}
	return nil
}
