package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

var errAgain, errNever = errors.New("again"), errors.New("never")

// count calls fn's failures in order, then succeeds.
func count(calls *int, fails ...error) func(context.Context) error {
	return func(context.Context) error {
		*calls++
		if *calls <= len(fails) {
			return fails[*calls-1]
		}
		return nil
	}
}

func TestDoTriesUntilSuccessAttemptsOrAFailureForGood(t *testing.T) {
	ctx := context.Background()
	fast := Policy{Pause: time.Millisecond}
	calls := 0
	if err := Do(ctx, fast, count(&calls, errAgain, errAgain)); err != nil || calls != 3 {
		t.Errorf("two failures then success: %v after %d calls; want nil after 3", err, calls)
	}
	calls = 0
	limited := fast
	limited.Attempts = 2
	if err := Do(ctx, limited, count(&calls, errAgain, errAgain, errAgain)); !errors.Is(err, errAgain) || calls != 2 {
		t.Errorf("2 attempts: %v after %d calls; want the last failure after 2", err, calls)
	}
	calls = 0
	picky := fast
	picky.Retryable = func(err error) bool { return err == errAgain }
	if err := Do(ctx, picky, count(&calls, errAgain, errNever, errAgain)); !errors.Is(err, errNever) || calls != 2 {
		t.Errorf("a failure for good: %v after %d calls; want it after 2", err, calls)
	}
	var heard []int
	calls = 0
	told := fast
	told.OnRetry = func(attempt int, _ error) { heard = append(heard, attempt) }
	_ = Do(ctx, told, count(&calls, errAgain, errAgain))
	if len(heard) != 2 || heard[0] != 1 || heard[1] != 2 {
		t.Errorf("OnRetry heard %v; want attempts 1 and 2", heard)
	}
}

// A context that ends while Do waits ends it, with both reasons; each
// call has its own bound; pauses double up to the most.
func TestDoEndsWithItsContextAndBoundsEachCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	calls := 0
	err := Do(ctx, Policy{Pause: 10 * time.Millisecond}, func(context.Context) error { calls++; return errAgain })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errAgain) || calls < 2 {
		t.Errorf("until the context ends: %v after %d calls; want both the deadline and the last failure", err, calls)
	}

	var deadlines []time.Duration
	hung := func(ctx context.Context) error {
		d, _ := ctx.Deadline()
		deadlines = append(deadlines, time.Until(d))
		<-ctx.Done()
		return ctx.Err()
	}
	if err := Do(context.Background(), Policy{Pause: time.Millisecond, Attempts: 2, CallTimeout: 20 * time.Millisecond}, hung); !errors.Is(err, context.DeadlineExceeded) || len(deadlines) != 2 || deadlines[0] > 20*time.Millisecond {
		t.Errorf("hung calls: %v, deadlines %v; want two calls bounded to 20ms each", err, deadlines)
	}

	var pauses []time.Duration
	last := time.Now()
	_ = Do(context.Background(), Policy{Pause: 4 * time.Millisecond, MaxPause: 10 * time.Millisecond, Attempts: 5}, func(context.Context) error {
		pauses = append(pauses, time.Since(last))
		last = time.Now()
		return errAgain
	})
	// Pauses of 4, 8, 10, 10 ms: the last two at the cap, none shorter
	// than asked.
	for i, want := range []time.Duration{4, 8, 10, 10} {
		if got := pauses[i+1]; got < want*time.Millisecond {
			t.Errorf("pause %d: %v; want at least %vms", i+1, got, want)
		}
	}
}
