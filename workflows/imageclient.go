package workflows

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// ImageClient starts the image workflows: what the API, the image map and
// the control-plane activities use.
type ImageClient struct{ Temporal client.Client }

// ErrImageBusy: a workflow of an earlier image of the same name still runs.
var ErrImageBusy = errors.New("an earlier image of this name is still being removed")

func (c ImageClient) start(ctx context.Context, id, workflow string, conflict enumspb.WorkflowIdConflictPolicy, arg any) error {
	_, err := c.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskqueue.Control,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, WorkflowIDConflictPolicy: conflict}, workflow, arg)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return fmt.Errorf("%w: %s", ErrImageBusy, id)
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	return nil
}

// StartImport starts the import of a newly created image.
func (c ImageClient) StartImport(ctx context.Context, ref controlapi.ImageRef) error {
	return c.start(ctx, ImageWorkflowID(ref.Name), ImageImportWorkflowName, enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL, ImageInput{Image: ref})
}

// StartDelete starts the removal of an image marked deleting; a second
// DELETE joins the running one.
func (c ImageClient) StartDelete(ctx context.Context, ref controlapi.ImageRef) error {
	return c.start(ctx, ImageDeleteWorkflowID(ref.Name), ImageDeleteWorkflowName, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, ImageInput{Image: ref})
}

// EnsureImport imports an image again (its tag moved) unless an import
// of it runs.
func (c ImageClient) EnsureImport(ctx context.Context, ref controlapi.ImageRef) error {
	return c.start(ctx, ImageWorkflowID(ref.Name), ImageImportWorkflowName, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, ImageInput{Image: ref})
}

// EnsurePull starts the pull of an image to a node unless one runs.
func (c ImageClient) EnsurePull(ctx context.Context, image, node string) error {
	return c.start(ctx, ImagePullWorkflowID(image, node), ImagePullWorkflowName, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		ImagePullInput{Image: image, Node: node})
}
