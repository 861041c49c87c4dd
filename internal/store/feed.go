package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

const notifyChannel = "zw_changes"

// change is one row of the change feed.
type change struct {
	ResourceVersion int64
	Kind            string
	Namespace       string
	Name            string
	Type            string
	Object          json.RawMessage
}

// WatchEvent is what a watcher receives.
type WatchEvent struct {
	Type            string          `json:"type"`
	Object          json.RawMessage `json:"object"`
	ResourceVersion int64           `json:"-"`
}

// WatchOptions say what to watch and from where.
type WatchOptions struct {
	Namespace     string
	LabelSelector string
	FieldSelector string
	// ResourceVersion resumes strictly after this version.
	ResourceVersion int64
}

// ErrWatcherTooSlow ends a watch whose reader fell behind; it resumes from
// the last version it saw.
var ErrWatcherTooSlow = errors.New("watch closed: the client fell behind; resume from the last resourceVersion")

// Watch is a stream of changes. Events is closed when the watch ends; Err
// then says why.
type Watch struct {
	Events <-chan WatchEvent
	events chan WatchEvent
	cancel context.CancelFunc
	mu     sync.Mutex
	err    error
}

// Stop ends the watch.
func (w *Watch) Stop() { w.cancel() }

// Err is why the watch ended, once Events is closed.
func (w *Watch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// feed holds one LISTEN connection per process and fans changes out to
// subscribers, reading them back from the changes table in version order.
type feed struct {
	s       *Store
	mu      sync.Mutex
	started bool
	last    int64 // newest version fanned out
	subs    map[*subscriber]struct{}
	stop    context.CancelFunc
	done    chan struct{}
	// catchUps counts the catch-ups, each a barrier to writers.
	catchUps atomic.Int64
}

type subscriber struct {
	kind string
	ch   chan change
	// overflow is closed when the subscriber's buffer filled up.
	overflow chan struct{}
}

func newFeed(s *Store) *feed { return &feed{s: s, subs: map[*subscriber]struct{}{}} }

// start begins listening; the caller holds f.mu.
func (f *feed) start(ctx context.Context) error {
	if f.started {
		return nil
	}
	last, err := f.s.settled(ctx)
	if err != nil {
		return err
	}
	f.last = last
	runCtx, cancel := context.WithCancel(context.Background())
	f.stop, f.done, f.started = cancel, make(chan struct{}), true
	go f.run(runCtx)
	return nil
}

// delivered is the version the feed has delivered every change up to,
// and whether it runs.
func (f *feed) delivered() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last, f.started
}

func (f *feed) close() {
	f.mu.Lock()
	stop, done := f.stop, f.done
	f.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// run listens for notifications and polls once a second as a safety net
// (a dropped connection loses notifications, never changes).
func (f *feed) run(ctx context.Context) {
	defer close(f.done)
	for ctx.Err() == nil {
		err := f.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		slog.Warn("change feed connection lost; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (f *feed) listen(ctx context.Context) error {
	pooled, err := f.s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The LISTEN connection must not go back to the pool still listening.
	conn := pooled.Hijack()
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	for {
		if err := f.catchUp(ctx); err != nil {
			return err
		}
		if _, err := notified(ctx, conn, time.Second); err != nil {
			return err
		}
		// The notifications already here are for changes the next
		// catch-up reads anyway: one barrier for them all, not one each,
		// since each barrier holds every writer back (order.go).
		for range maxCoalesced {
			if more, err := notified(ctx, conn, 0); err != nil {
				return err
			} else if !more {
				break
			}
		}
	}
}

// maxCoalesced bounds the notifications one catch-up answers, so that a
// steady stream of them does not hold its changes back.
const maxCoalesced = 1000

// notified waits up to d for a notification on conn (0: takes one only if
// it is already there); false when none came.
func notified(ctx context.Context, conn *pgx.Conn, d time.Duration) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, max(d, time.Millisecond))
	defer cancel()
	_, err := conn.WaitForNotification(wctx)
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return false, nil
	}
	return err == nil, err
}

// catchUp delivers every change after the last one fanned out, up to the
// versions settled now: one that commits later than a greater one is
// delivered before it, never skipped.
func (f *feed) catchUp(ctx context.Context) error {
	f.catchUps.Add(1)
	through, err := f.s.settled(ctx)
	if err != nil {
		return err
	}
	for {
		f.mu.Lock()
		last := f.last
		f.mu.Unlock()
		if last >= through {
			return nil
		}
		const page = 500
		batch, err := f.s.changesBetween(ctx, last, through, "", page)
		if err != nil {
			return err
		}
		f.mu.Lock()
		for _, c := range batch {
			for sub := range f.subs {
				if sub.kind != c.Kind {
					continue
				}
				select {
				case sub.ch <- c:
				default:
					delete(f.subs, sub)
					close(sub.overflow)
				}
			}
		}
		if len(batch) < page {
			// Every committed change up to through is out; the versions
			// between without one were rolled back.
			f.last = through
		} else {
			f.last = batch[len(batch)-1].ResourceVersion
		}
		f.mu.Unlock()
	}
}

// subscribe registers a subscriber and returns the version after which the
// feed will deliver to it.
func (f *feed) subscribe(ctx context.Context, kind string) (*subscriber, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.start(ctx); err != nil {
		return nil, 0, err
	}
	sub := &subscriber{kind: kind, ch: make(chan change, 4096), overflow: make(chan struct{})}
	f.subs[sub] = struct{}{}
	return sub, f.last, nil
}

func (f *feed) unsubscribe(sub *subscriber) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, sub)
}

// changesBetween reads the changes after version after and up to through,
// of kind (empty: every kind), in version order.
func (s *Store) changesBetween(ctx context.Context, after, through int64, kind string, limit int) ([]change, error) {
	rows, err := s.pool.Query(ctx, `SELECT resource_version, kind, namespace, name, type, object FROM changes
		WHERE resource_version > $1 AND resource_version <= $2 AND ($3 = '' OR kind = $3) ORDER BY resource_version LIMIT $4`, after, through, kind, limit)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (change, error) {
		var c change
		err := row.Scan(&c.ResourceVersion, &c.Kind, &c.Namespace, &c.Name, &c.Type, &c.Object)
		return c, err
	})
	return out, classify(err)
}

// Watch streams changes to objects of this kind that match the options,
// starting strictly after o.ResourceVersion. A version older than the
// compacted history is ErrExpired.
func (r Resource[T, PT]) Watch(ctx context.Context, o WatchOptions) (*Watch, error) {
	filter := watchFilter{}
	if r.info.namespaced {
		filter.namespace = o.Namespace
	}
	var err error
	if filter.labels, err = ParseLabelSelector(o.LabelSelector); err != nil {
		return nil, err
	}
	if filter.fields, err = ParseFieldSelector(o.FieldSelector, r.info.fields); err != nil {
		return nil, err
	}
	var compacted int64
	if err := r.s.pool.QueryRow(ctx, "SELECT through FROM changes_compacted").Scan(&compacted); err != nil {
		return nil, classify(err)
	}
	if o.ResourceVersion < compacted {
		return nil, fmt.Errorf("%w: resourceVersion %d is older than the retained history (from %d); list again", ErrExpired, o.ResourceVersion, compacted)
	}
	sub, live, err := r.s.feed.subscribe(ctx, r.info.kind)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	events := make(chan WatchEvent, 64)
	w := &Watch{Events: events, events: events, cancel: cancel}
	go w.stream(wctx, r.s, sub, filter, o.ResourceVersion, live)
	return w, nil
}

// watchFilter is which changes of its kind a watch asks for.
type watchFilter struct {
	namespace string // empty: all
	labels    LabelSelector
	fields    FieldSelector
}

func (f watchFilter) matches(c change) bool {
	if f.namespace != "" && c.Namespace != f.namespace {
		return false
	}
	if len(f.labels) == 0 && len(f.fields) == 0 {
		return true
	}
	var doc map[string]any
	if json.Unmarshal(c.Object, &doc) != nil {
		return false
	}
	meta, _ := doc["metadata"].(map[string]any)
	lbls := map[string]string{}
	if l, ok := meta["labels"].(map[string]any); ok {
		for k, v := range l {
			lbls[k], _ = v.(string)
		}
	}
	return f.labels.Matches(lbls) && f.fields.Matches(doc)
}

// stream sends the changes sub's kind after version sent that filter
// matches, until ctx ends or sub falls behind, then closes w.events.
// live is the feed's position when sub subscribed.
func (w *Watch) stream(ctx context.Context, s *Store, sub *subscriber, filter watchFilter, sent, live int64) {
	defer close(w.events)
	defer s.feed.unsubscribe(sub)
	send := func(c change) bool {
		if c.ResourceVersion <= sent {
			return true
		}
		sent = c.ResourceVersion
		if !filter.matches(c) {
			return true
		}
		select {
		case w.events <- WatchEvent{Type: c.Type, Object: c.Object, ResourceVersion: c.ResourceVersion}:
			return true
		case <-ctx.Done():
			return false
		}
	}
	// History between the requested version and the feed's position
	// comes from the table; everything after it from the feed.
	for sent < live {
		batch, err := s.changesBetween(ctx, sent, live, sub.kind, 500)
		if err != nil {
			w.setErr(err)
			return
		}
		for _, c := range batch {
			if !send(c) {
				return
			}
		}
		if len(batch) < 500 {
			break
		}
	}
	if sent < live {
		sent = live
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.overflow:
			w.setErr(ErrWatcherTooSlow)
			return
		case c := <-sub.ch:
			if !send(c) {
				return
			}
		}
	}
}

func (w *Watch) setErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

// Compact drops change history older than keep, never the newest row, and
// records how far it went so older resumes get ErrExpired.
func (s *Store) Compact(ctx context.Context, keep time.Duration) (int64, error) {
	var n int64
	err := s.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var through *int64
		err := tx.QueryRow(ctx, `SELECT max(resource_version) FROM changes
			WHERE created_at < now() - $1::interval AND resource_version < (SELECT max(resource_version) FROM changes)`,
			strconv.FormatInt(int64(keep/time.Second), 10)+" seconds").Scan(&through)
		if err != nil || through == nil {
			return err
		}
		tag, err := tx.Exec(ctx, "DELETE FROM changes WHERE resource_version <= $1", *through)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, "UPDATE changes_compacted SET through = greatest(through, $1)", *through)
		return err
	})
	return n, err
}

// ResourceVersion is the newest version handed out; a version above it is
// one the store has not reached yet. (A watch from a version at or below
// it that is still being committed waits for it: see order.go.)
func (s *Store) ResourceVersion(ctx context.Context) (int64, error) {
	var rv int64
	err := s.pool.QueryRow(ctx, "SELECT coalesce(pg_sequence_last_value('resource_version_seq'), 0)").Scan(&rv)
	return rv, classify(err)
}
