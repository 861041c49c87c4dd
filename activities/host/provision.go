package host

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
)

// ProvisionPod builds the pod's zone in one activity and hands the pod to
// the supervisor, returning the Seq from which its reports describe it
// (and the steps' times, when asked for).
// A failed step had its tries on the node: the error counts them, is not
// retried, and carries the hostapi.ProvisionProgress as its details.
func (a *Activities) ProvisionPod(ctx context.Context, in hostapi.ProvisionInput) (hostapi.ProvisionResult, error) {
	res, err := a.Ops.ProvisionPod(heartbeats(ctx), in)
	if err != nil && ctx.Err() != nil {
		return hostapi.ProvisionResult{}, temporal.NewApplicationError("the provision was interrupted: "+ctx.Err().Error(), ErrTypeInterrupted)
	}
	var pe *hostops.ProvisionError
	if !errors.As(err, &pe) {
		return res, fail(ctx, err)
	}
	var ae *temporal.ApplicationError
	if !errors.As(classify(pe.Err, pe.Tries), &ae) {
		return hostapi.ProvisionResult{}, err
	}
	return hostapi.ProvisionResult{}, temporal.NewApplicationErrorWithOptions(ae.Message(), ae.Type(),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{pe.Progress}})
}
