package host

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/hostops"
)

// ProvisionPod builds the pod's zone in one activity and hands the pod to
// the supervisor, returning the Seq from which its reports describe it.
// A failed step had its tries on the node: the error counts them, is not
// retried, and carries the hostops.ProvisionProgress as its details.
func (a *Activities) ProvisionPod(ctx context.Context, in hostops.ProvisionInput) (uint64, error) {
	seq, err := a.Ops.ProvisionPod(heartbeats(ctx), in)
	if err != nil && ctx.Err() != nil {
		return 0, ctx.Err() // cancelled
	}
	var pe *hostops.ProvisionError
	if !errors.As(err, &pe) {
		return seq, fail(ctx, err)
	}
	var ae *temporal.ApplicationError
	if !errors.As(classify(pe.Err, pe.Tries), &ae) {
		return 0, err
	}
	return 0, temporal.NewApplicationErrorWithOptions(ae.Message(), ae.Type(),
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{pe.Progress}})
}
