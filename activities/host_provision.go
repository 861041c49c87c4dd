package activities

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/illumos"
)

// ProvisionInput is a pod to build on its node and then hand to the
// node's supervisor.
type ProvisionInput struct {
	Sandbox PodSandbox
	Probes  []ContainerProbes
}

// ProvisionProgress is how far a provision got: the details of its
// heartbeats and of its failure, so the workflow undoes exactly the steps
// begun (the failed one included).
type ProvisionProgress struct {
	Begun int
	Step  string
}

// ProvisionStep is one step of building a pod's zone.
type ProvisionStep struct {
	Name    string
	Timeout time.Duration
	run     func(*Host, context.Context, PodSandbox) error
}

// ProvisionSteps are the steps ProvisionPod runs, in order; a workflow
// undoes the ones begun in reverse.
var ProvisionSteps = []ProvisionStep{
	{"CreateDatasets", 2 * time.Minute, (*Host).CreateDatasets},
	{"CreateVNIC", time.Minute, (*Host).CreateVNIC},
	{"ConfigureZone", 2 * time.Minute, (*Host).ConfigureZone},
	{"InstallZone", 30 * time.Minute, (*Host).InstallZone},
	{"BootZone", 5 * time.Minute, (*Host).BootZone},
	{"ConfigureNetwork", 2 * time.Minute, (*Host).ConfigureNetwork},
	{"StartContainers", 2 * time.Minute, (*Host).StartContainers},
	{"WaitContainersOnline", 5 * time.Minute, (*Host).WaitContainersOnline},
}

// ProvisionTimeout bounds a whole provision: every step's own bound.
func ProvisionTimeout() time.Duration {
	var d time.Duration
	for _, st := range ProvisionSteps {
		d += st.Timeout
	}
	return d
}

// ProvisionPod builds the pod's zone, every step in one activity so a pod
// costs one round trip to its node, then hands the pod to the supervisor
// and returns the Seq from which its reports describe it. Every step is
// idempotent, so a retry starts again from the first and finds the work
// already done. A failure carries the ProvisionProgress as its details.
func (h *Host) ProvisionPod(ctx context.Context, in ProvisionInput) (uint64, error) {
	s := in.Sandbox
	if err := s.check(); err != nil {
		return 0, h.invalid(ctx, "provision the pod", s, err)
	}
	var mu sync.Mutex
	var progress ProvisionProgress
	stop := h.heartbeat(ctx, func() any {
		mu.Lock()
		defer mu.Unlock()
		return progress
	})
	defer stop()
	for i, st := range ProvisionSteps {
		mu.Lock()
		progress = ProvisionProgress{Begun: i + 1, Step: st.Name}
		mu.Unlock()
		err := h.runStep(ctx, st, s)
		if err != nil && ctx.Err() != nil {
			return 0, ctx.Err() // cancelled: the workflow undoes everything
		}
		if err != nil {
			return 0, provisionFailed(err, progress)
		}
	}
	if h.Supervisor == nil {
		return 0, h.invalid(ctx, "supervise the pod", s, errors.New("this node runs no supervisor"))
	}
	return h.Supervisor.Watch(SupervisedPod(s, in.Probes), nil), nil
}

// stepAttempts bounds the tries of one step within a provision.
const stepAttempts = 6

// runStep runs one step, trying a transient failure again with back-off
// (each step on its own: a retry of the whole provision would need every
// step to succeed at once).
func (h *Host) runStep(ctx context.Context, st ProvisionStep, s PodSandbox) error {
	wait := h.stepRetry()
	for try := int32(1); ; try++ {
		sctx, cancel := context.WithTimeout(withAttempt(ctx, try), st.Timeout)
		err := st.run(h, sctx, s)
		cancel()
		var appErr *temporal.ApplicationError
		if err == nil || ctx.Err() != nil || try == stepAttempts || (errors.As(err, &appErr) && appErr.NonRetryable()) {
			return err
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func (h *Host) stepRetry() time.Duration {
	if h.StepRetry > 0 {
		return h.StepRetry
	}
	return time.Second
}

// provisionFailed is a step's last error, with the progress as its
// details; the step had its tries, so the provision is not retried.
func provisionFailed(err error, p ProvisionProgress) error {
	typ := kindErrType[illumos.KindUnknown]
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		typ = appErr.Type()
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), typ,
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{p}})
}
