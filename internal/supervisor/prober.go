package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// Probe kinds.
const (
	probeStartup   = "startup"
	probeLiveness  = "liveness"
	probeReadiness = "readiness"
)

// startProbes starts one worker per probe of c, each on its own timer, as
// kubelet's prober does. Callers hold s.mu.
func (s *Supervisor) startProbes(p *pod, c *container) {
	ctx, stop := context.WithCancel(p.ctx)
	c.stop = stop
	for kind, spec := range map[string]*model.Probe{probeStartup: c.spec.Startup, probeLiveness: c.spec.Liveness, probeReadiness: c.spec.Readiness} {
		if spec != nil {
			go s.probeLoop(ctx, p, c, kind, spec)
		}
	}
}

// probeLoop runs one probe until ctx ends: first after its initial delay
// (a readiness or startup probe as soon as its container runs), then every
// period; the startup probe gates the others and ends once it
// succeeded. Only a crossed threshold changes what is reported.
func (s *Supervisor) probeLoop(ctx context.Context, p *pod, c *container, kind string, spec *model.Probe) {
	period := time.Duration(max(spec.PeriodSeconds, 1)) * time.Second
	successThreshold, failureThreshold := max(spec.SuccessThreshold, 1), max(spec.FailureThreshold, 1)
	if !sleep(ctx, time.Duration(spec.InitialDelaySeconds)*time.Second) {
		return
	}
	var successes, failures int32
	for {
		s.mu.Lock()
		started, running := c.started, c.state == model.ContainerRunning
		s.mu.Unlock()
		if kind == probeStartup && started {
			return
		}
		wait := period
		if running && (kind == probeStartup || started) {
			res, err := RunProbe(ctx, s.cfg.Host, p.spec.Zone, c.spec.User, p.spec.IP, c.spec.Ports, spec)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				res = Result{Message: err.Error()} // a probe that cannot run never succeeds
			}
			if res.Success {
				successes, failures = successes+1, 0
			} else {
				failures, successes = failures+1, 0
			}
			if s.apply(ctx, c, kind, res, successes >= successThreshold, failures >= failureThreshold, failures) {
				s.poke()
			}
		} else if kind != probeLiveness {
			// Look again at the next observation rather than a period
			// later: a container that starts (a pod handed over, a zone
			// booted again) is probed for readiness at once, as the
			// kubelet triggers it. Liveness keeps its period.
			wait = min(period, s.cfg.ObserveEvery)
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// apply records a probe's crossed threshold; it reports whether anything
// that is reported changed.
func (s *Supervisor) apply(ctx context.Context, c *container, kind string, res Result, succeeded, failed bool, failures int32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return false // a result of an incarnation that was restarted meanwhile
	}
	before := *c
	switch {
	case kind == probeStartup && succeeded:
		c.started = true
	case kind == probeReadiness && succeeded:
		c.ready = true
	case kind == probeReadiness && failed:
		c.ready = false
	case (kind == probeStartup || kind == probeLiveness) && failed && c.unhealthy == "":
		c.unhealthy = fmt.Sprintf("%s probe failed %d times: %s", kind, failures, res.Message)
	}
	return before.started != c.started || before.ready != c.ready || before.unhealthy != c.unhealthy
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
