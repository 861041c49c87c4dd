// Package informer follows kinds of the store for a controller: it lists
// them, watches each from its list's resource version, hands every object
// and every change, decoded once, to the kind's typed handlers, gathers a
// burst of changes into one flush, resyncs on a period, and starts over
// after a back-off when a watch ends or fails.
//
// Handlers and hooks all run on the goroutine of Run, one at a time, so
// the state they share needs no lock.
package informer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// The types of a change, as the store's watches name them.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
)

// Event is one change to an object of type T.
type Event[T any] struct {
	Type            string // Added, Modified or Deleted
	Object          *T     // as written; as it was last, when Deleted
	ResourceVersion int64
}

// Resource is what the informer needs of a kind; store.Resource is one.
type Resource[T any] interface {
	Kind() string
	List(ctx context.Context, o store.ListOptions) (*model.List[T], error)
	Watch(ctx context.Context, o store.WatchOptions) (*store.Watch, error)
}

// Handlers receive one kind's objects. An error from either starts the
// informer over (after Backoff, with new lists).
type Handlers[T any] struct {
	// Listed receives every object of the kind at each list, the first
	// and each after a start over, before any change after it: it
	// replaces what the follower knew of the kind. Nil: the list only
	// gives the version to watch from.
	Listed func(ctx context.Context, items []T) error
	// Changed receives each change after the list once, in the kind's
	// version order.
	Changed func(ctx context.Context, ev Event[T]) error
}

// Source is one kind an informer follows; Kind makes one.
type Source interface {
	list(ctx context.Context) (after int64, deliver func(context.Context) error, err error)
	watch(ctx context.Context, after int64) (*store.Watch, error)
	forward(w *store.Watch, out chan<- change, done <-chan struct{}, log *slog.Logger)
}

// Kind is a source that follows r with h.
func Kind[T any](r Resource[T], h Handlers[T]) Source { return &kind[T]{r: r, h: h} }

// change is one decoded change on its way to its handler, or the end of
// a watch (apply nil, err why).
type change struct {
	apply func(context.Context) error
	err   error
}

// run applies c, or returns the watch's end it carries.
func (c change) run(ctx context.Context) error {
	if c.apply == nil {
		return c.err
	}
	return c.apply(ctx)
}

type kind[T any] struct {
	r Resource[T]
	h Handlers[T]
}

func (k *kind[T]) list(ctx context.Context) (int64, func(context.Context) error, error) {
	l, err := k.r.List(ctx, store.ListOptions{})
	if err != nil {
		return 0, nil, fmt.Errorf("list %s: %w", k.r.Kind(), err)
	}
	after, err := strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("list %s: resource version %q: %w", k.r.Kind(), l.Metadata.ResourceVersion, err)
	}
	deliver := func(ctx context.Context) error {
		if k.h.Listed == nil {
			return nil
		}
		return k.h.Listed(ctx, l.Items)
	}
	return after, deliver, nil
}

func (k *kind[T]) watch(ctx context.Context, after int64) (*store.Watch, error) {
	w, err := k.r.Watch(ctx, store.WatchOptions{ResourceVersion: after})
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", k.r.Kind(), err)
	}
	return w, nil
}

// forward decodes w's events and sends them to out, then the watch's
// end, until done is closed.
func (k *kind[T]) forward(w *store.Watch, out chan<- change, done <-chan struct{}, log *slog.Logger) {
	for ev := range w.Events {
		var obj T
		if err := json.Unmarshal(ev.Object, &obj); err != nil {
			log.Warn("informer: skipping a change that does not decode", "kind", k.r.Kind(), "resourceVersion", ev.ResourceVersion, "err", err)
			continue
		}
		e := Event[T]{Type: ev.Type, Object: &obj, ResourceVersion: ev.ResourceVersion}
		c := change{apply: func(ctx context.Context) error {
			if k.h.Changed == nil {
				return nil
			}
			return k.h.Changed(ctx, e)
		}}
		select {
		case out <- c:
		case <-done:
			return
		}
	}
	err := fmt.Errorf("%s watch ended", k.r.Kind())
	if werr := w.Err(); werr != nil {
		err = fmt.Errorf("%s watch: %w", k.r.Kind(), werr)
	}
	select {
	case out <- change{err: err}:
	case <-done:
	}
}

// Informer follows Sources until the context of Run ends.
type Informer struct {
	// Name starts the informer's log lines ("endpoints controller").
	Name    string
	Log     *slog.Logger
	Sources []Source
	// Start, when set, takes the place of the sources' lists (their
	// Listed handlers are not called): it reads what the follower needs,
	// in one snapshot of several kinds say, and returns the snapshot's
	// version, after which every source is watched.
	Start func(ctx context.Context) (int64, error)
	// Flush acts on what the handlers gathered: once after the lists,
	// then after each burst of changes. more: something is left to do, so
	// Flush runs again after Retry even without a change. An error starts
	// the informer over.
	Flush func(ctx context.Context) (more bool, err error)
	// Quiet and Window bound a burst: it ends after Quiet without a
	// change, or Window after its first (zero: no bound). A zero Quiet
	// takes only the changes that are already queued behind the first.
	Quiet, Window time.Duration
	// Retry is how long after a Flush that left work it runs again; zero:
	// DefaultRetry.
	Retry time.Duration
	// Resync is how often, counted from the lists, the informer lists
	// every source again as a safety net under the watches, without a
	// back-off; zero: never.
	Resync time.Duration
	// Resynced, when set, runs every Resync in place of the lists: a
	// safety net that needs no relist. The period then restarts when it
	// returns.
	Resynced func(ctx context.Context)
	// Backoff is the wait before starting over after a watch ended or
	// something failed; zero: DefaultBackoff.
	Backoff time.Duration
}

// Defaults of Informer.Retry and Informer.Backoff.
const (
	DefaultRetry   = time.Second
	DefaultBackoff = time.Second
)

// changesQueued is how many decoded changes may wait for the handlers:
// enough that a burst is seen whole when its first change is taken.
const changesQueued = 64

// errRelist ends a round of following for a resync.
var errRelist = errors.New("resync: list again")

// Run follows the sources until ctx ends: lists (or Start), watches,
// changes; after a failure or a watch's end it waits Backoff and starts
// over with new lists.
func (inf *Informer) Run(ctx context.Context) {
	log := inf.Log
	if log == nil {
		log = slog.Default()
	}
	backoff := inf.Backoff
	if backoff <= 0 {
		backoff = DefaultBackoff
	}
	for ctx.Err() == nil {
		err := inf.follow(ctx, log)
		if errors.Is(err, errRelist) {
			continue
		}
		if err != nil && ctx.Err() == nil {
			log.Warn(inf.Name+": starting over", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
		}
	}
}

// follow is one round: the lists, then the watches until one ends, a
// handler or Flush fails, a resync is due or ctx ends.
func (inf *Informer) follow(ctx context.Context, log *slog.Logger) error {
	after, listed, err := inf.listOrStart(ctx)
	if err != nil {
		return err
	}

	wctx, stop := context.WithCancel(ctx)
	var forwarders sync.WaitGroup
	// No forwarder outlives the round: stopping the watches ends theirs.
	defer forwarders.Wait()
	defer stop()
	r := &round{inf: inf, changes: make(chan change, changesQueued)}
	for i, s := range inf.Sources {
		w, err := s.watch(wctx, after[i])
		if err != nil {
			return err
		}
		forwarders.Go(func() { s.forward(w, r.changes, wctx.Done(), log) })
	}
	for _, deliver := range listed {
		if err := deliver(ctx); err != nil {
			return err
		}
	}

	if inf.Resync > 0 {
		r.timer = time.NewTimer(inf.Resync)
		defer r.timer.Stop()
	}
	return r.run(ctx)
}

// listOrStart reads where each source's watch starts: from Start's
// snapshot, or from each source's list, whose delivery to the handlers
// waits in listed until the watches run.
func (inf *Informer) listOrStart(ctx context.Context) (after []int64, listed []func(context.Context) error, err error) {
	after = make([]int64, len(inf.Sources))
	if inf.Start != nil {
		rv, err := inf.Start(ctx)
		if err != nil {
			return nil, nil, err
		}
		for i := range after {
			after[i] = rv
		}
		return after, nil, nil
	}
	for i, s := range inf.Sources {
		rv, deliver, err := s.list(ctx)
		if err != nil {
			return nil, nil, err
		}
		after[i] = rv
		listed = append(listed, deliver)
	}
	return after, listed, nil
}

// round is one round's flow of changes from the watches to the handlers.
type round struct {
	inf     *Informer
	changes chan change
	timer   *time.Timer // the resync's; nil: none
}

// run flushes, then applies bursts of changes, each followed by a Flush,
// until something fails or a resync relists.
func (r *round) run(ctx context.Context) error {
	inf := r.inf
	retryAfter := inf.Retry
	if retryAfter <= 0 {
		retryAfter = DefaultRetry
	}
	for {
		var retry <-chan time.Time
		if inf.Flush != nil {
			more, err := inf.Flush(ctx)
			if err != nil {
				return err
			}
			if more {
				retry = time.After(retryAfter)
			}
		}
		got, err := r.take(ctx, retry, nil, nil)
		if err != nil {
			return err
		}
		if !got {
			continue // the retry is due
		}
		if err := r.takeBurst(ctx); err != nil {
			return err
		}
	}
}

// takeBurst takes the changes that follow closely, so that one Flush
// covers them together.
func (r *round) takeBurst(ctx context.Context) error {
	var window <-chan time.Time
	if r.inf.Window > 0 {
		window = time.After(r.inf.Window)
	}
	for got := true; got; {
		var err error
		if r.inf.Quiet > 0 {
			got, err = r.take(ctx, nil, time.After(r.inf.Quiet), window)
		} else {
			got, err = r.takeQueued(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// take applies one change, or runs a resync, and reports true; false
// when retry, quiet or window fired first.
func (r *round) take(ctx context.Context, retry, quiet, window <-chan time.Time) (bool, error) {
	var resync <-chan time.Time
	if r.timer != nil {
		resync = r.timer.C
	}
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-resync:
		if r.inf.Resynced == nil {
			return false, errRelist
		}
		r.inf.Resynced(ctx)
		r.timer.Reset(r.inf.Resync)
		return true, nil
	case <-retry:
		return false, nil
	case <-quiet:
		return false, nil
	case <-window:
		return false, nil
	case c := <-r.changes:
		return true, c.run(ctx)
	}
}

// takeQueued applies a change only if one is already waiting.
func (r *round) takeQueued(ctx context.Context) (bool, error) {
	select {
	case c := <-r.changes:
		return true, c.run(ctx)
	default:
		return false, nil
	}
}
