package workflows

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// VolumeClient starts or wakes the workflows of claims and snapshots:
// what the API and the control-plane activities use.
type VolumeClient struct {
	Temporal client.Client
}

// SyncClaim has the claim's workflow look at the claim: started if none
// runs, signalled if one does.
func (c VolumeClient) SyncClaim(ctx context.Context, namespace, name string) error {
	return c.signalWithStart(ctx, ClaimWorkflowID(namespace, name), ClaimWorkflowName,
		ClaimInput{Claim: controlapi.ClaimRef{Namespace: namespace, Name: name}})
}

// SyncSnapshot has the snapshot's workflow look at the snapshot.
func (c VolumeClient) SyncSnapshot(ctx context.Context, namespace, name string) error {
	return c.signalWithStart(ctx, SnapshotWorkflowID(namespace, name), SnapshotWorkflowName,
		SnapshotInput{Snapshot: controlapi.SnapshotRef{Namespace: namespace, Name: name}})
}

func (c VolumeClient) signalWithStart(ctx context.Context, id, workflow string, input any) error {
	opts := client.StartWorkflowOptions{
		ID:                    id,
		TaskQueue:             taskqueue.Control,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
	if _, err := c.Temporal.SignalWithStartWorkflow(ctx, id, SignalVolumeSync, nil, opts, workflow, input); err != nil {
		return fmt.Errorf("wake %s: %w", id, err)
	}
	return nil
}
