// Package retry calls a function again until it succeeds, fails for good,
// or runs out of attempts or time: the one loop the agent, its API client
// and the dev stack's start-up waits share.
package retry

import (
	"context"
	"fmt"
	"time"
)

// Policy says how often, how long and on which failures to try again.
type Policy struct {
	// Pause is the wait after the first failure; each later one doubles,
	// up to MaxPause (0: no growth past Pause).
	Pause, MaxPause time.Duration
	// Attempts bounds the calls; 0: until ctx ends.
	Attempts int
	// Retryable says whether a failure may pass if tried again; nil:
	// every failure.
	Retryable func(error) bool
	// CallTimeout bounds each call on its own, so one hung call does not
	// eat the whole budget; 0: only ctx.
	CallTimeout time.Duration
	// OnRetry, when set, hears of each failure about to be tried again.
	OnRetry func(attempt int, err error)
}

// Do calls fn until it returns nil, a failure p.Retryable refuses, or
// p.Attempts calls have failed, and returns fn's last error. When ctx
// ends first, the error wraps both ctx's and fn's last one.
func Do(ctx context.Context, p Policy, fn func(context.Context) error) error {
	pause := p.Pause
	for attempt := 1; ; attempt++ {
		err := call(ctx, p.CallTimeout, fn)
		if err == nil || (p.Retryable != nil && !p.Retryable(err)) || attempt == p.Attempts {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		}
		if p.OnRetry != nil {
			p.OnRetry(attempt, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(pause):
		}
		if pause *= 2; pause > p.MaxPause {
			pause = max(p.MaxPause, p.Pause)
		}
	}
}

func call(ctx context.Context, timeout time.Duration, fn func(context.Context) error) error {
	if timeout <= 0 {
		return fn(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return fn(ctx)
}
