package hostops

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/progress"
)

// ProvisionStep is one step of building a pod's zone.
type ProvisionStep struct {
	Name    string
	Timeout time.Duration
	run     func(*Host, context.Context, hostapi.PodSandbox) error
}

// ProvisionSteps are the steps ProvisionPod runs, in order; undoing runs
// in reverse.
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

// ProvisionError is a provision that failed at a step after Tries tries.
type ProvisionError struct {
	Progress hostapi.ProvisionProgress
	Tries    int32
	Err      error
}

func (e *ProvisionError) Error() string { return e.Err.Error() }
func (e *ProvisionError) Unwrap() error { return e.Err }

// ProvisionPod builds the pod's zone, every step in one call so that a pod
// costs one round trip to its node, then hands the pod to the supervisor
// and returns the Seq from which its reports describe it (with the steps'
// times when in.Timed). A step that
// fails transiently is tried again with back-off, on its own; every step
// is idempotent, so a provision run again finds the work done. It reports
// its ProvisionProgress, and fails with a *ProvisionError.
func (h *Host) ProvisionPod(ctx context.Context, in hostapi.ProvisionInput) (hostapi.ProvisionResult, error) {
	s := in.Sandbox
	if err := checkSandbox(s); err != nil {
		return hostapi.ProvisionResult{}, h.invalid(ctx, "provision the pod", s, err)
	}
	if h.Supervisor == nil {
		return hostapi.ProvisionResult{}, h.invalid(ctx, "provision the pod", s, errors.New("this node runs no supervisor"))
	}
	var res hostapi.ProvisionResult
	timed := func(step string, start time.Time) {
		if in.Timed {
			res.Steps = append(res.Steps, hostapi.StepTime{Step: step, Duration: time.Since(start)})
		}
	}
	var mu sync.Mutex
	var at hostapi.ProvisionProgress
	stop := h.heartbeat(ctx, func() any {
		mu.Lock()
		defer mu.Unlock()
		return at
	})
	defer stop()
	for i, st := range ProvisionSteps {
		mu.Lock()
		at = hostapi.ProvisionProgress{Begun: i + 1, Step: st.Name}
		mu.Unlock()
		progress.Report(ctx, at)
		start := time.Now()
		tries, err := h.runStep(ctx, st, s)
		if err != nil && ctx.Err() != nil {
			return hostapi.ProvisionResult{}, ctx.Err() // cancelled: the caller undoes everything
		}
		if err != nil {
			return hostapi.ProvisionResult{}, &ProvisionError{Progress: at, Tries: tries, Err: err}
		}
		timed(st.Name, start)
	}
	start := time.Now()
	seq, err := h.SupervisePod(ctx, hostapi.SuperviseInput{Sandbox: s, Probes: in.Probes})
	if err != nil {
		return hostapi.ProvisionResult{}, err
	}
	timed("Supervise", start)
	res.Seq = seq
	return res, nil
}

// BootPodAgain boots a pod's stopped zone, configures its network, starts
// its containers and hands the pod to the supervisor, in one call so that
// a zone booted again costs one round trip to its node (a node's whole
// stack restarting boots every zone it has at once). Every step is
// idempotent: a call tried again finds the work done. It returns the Seq
// from which the pod's reports describe it.
func (h *Host) BootPodAgain(ctx context.Context, in hostapi.SuperviseInput) (uint64, error) {
	for _, step := range []func(*Host, context.Context, hostapi.PodSandbox) error{
		(*Host).BootZone, (*Host).ConfigureNetwork, (*Host).StartContainers,
	} {
		if err := step(h, ctx, in.Sandbox); err != nil {
			return 0, err
		}
	}
	return h.SupervisePod(ctx, in)
}

// runStep runs one step, trying a transient failure again with back-off
// for as long as the step's time allows (each step on its own: starting
// the provision over would need every step to succeed in the same run).
// A count of tries would give up on a host that fails often but never for
// long. It returns the tries made.
func (h *Host) runStep(ctx context.Context, st ProvisionStep, s hostapi.PodSandbox) (int32, error) {
	wait := h.stepRetry()
	deadline := time.Now().Add(st.Timeout)
	for try := int32(1); ; try++ {
		sctx, cancel := context.WithDeadline(ctx, deadline)
		err := st.run(h, sctx, s)
		cancel()
		var maint *MaintenanceError
		var config *ConfigError
		if err == nil || ctx.Err() != nil || Permanent(err) || errors.As(err, &maint) || errors.As(err, &config) ||
			time.Now().Add(wait).After(deadline) {
			// A container in maintenance stays there until cleared: the
			// lifecycle decides by its restart policy, not a retry here.
			// A missing secret is reported at once, as kubelet does: the
			// lifecycle waits CreateContainerConfigError and tries again.
			return try, err
		}
		h.log().Warn("provision step failed; trying again", "step", st.Name, "zone", s.ZoneName(), "try", try, "err", err)
		if err := sleep(ctx, wait); err != nil {
			return try, err
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

// Permanent reports an error that trying again cannot fix: an invalid
// request, a conflict on the host, a missing or corrupt image.
func Permanent(err error) bool {
	var (
		invalid  *InvalidError
		conflict *ConflictError
		missing  *ImageMissingError
		mismatch *DigestMismatchError
	)
	return errors.As(err, &invalid) || errors.As(err, &conflict) || errors.As(err, &missing) ||
		errors.As(err, &mismatch) || illumos.KindOf(err) == illumos.KindInvalid
}
