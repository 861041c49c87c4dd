// Package progress carries a caller's progress callback through a
// context, so that long work in a plain library (a zone install, an image
// download) can say it is alive without knowing who listens: a Temporal
// activity turns the reports into heartbeats, a direct caller gives none
// and nothing is reported.
package progress

import (
	"context"
	"sync"
	"time"
)

// Func receives progress reports; details is whatever the work reports
// (a sentence, a struct of bytes done and total).
type Func func(details any)

type key struct{}

// With returns a context whose work reports progress to fn.
func With(ctx context.Context, fn Func) context.Context {
	return context.WithValue(ctx, key{}, fn)
}

// From returns the context's progress callback, nil when there is none.
func From(ctx context.Context) Func {
	fn, _ := ctx.Value(key{}).(Func)
	return fn
}

// Report reports details to the context's callback, if it has one.
func Report(ctx context.Context, details any) {
	if fn := From(ctx); fn != nil {
		fn(details)
	}
}

// Every calls fn every interval, until ctx ends or stop is called; stop
// returns once fn has returned for the last time, so nothing is reported
// after it.
func Every(ctx context.Context, interval time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
