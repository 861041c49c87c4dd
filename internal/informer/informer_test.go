package informer_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/informer"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// recorder is a follower of namespaces that writes down what it got.
type recorder struct {
	// gate, when set, holds the first change until it is closed.
	gate chan struct{}
	// failLists fails that many lists' handlers.
	failLists int

	mu      sync.Mutex
	lists   [][]string
	listAt  []time.Time
	events  []string
	pending int   // changes since the last flush
	flushes []int // the changes each flush covered
	resyncs int
}

func (r *recorder) handlers() informer.Handlers[model.Namespace] {
	return informer.Handlers[model.Namespace]{
		Listed: func(_ context.Context, items []model.Namespace) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			var names []string
			for _, ns := range items {
				names = append(names, ns.Metadata.Name)
			}
			r.lists = append(r.lists, names)
			r.listAt = append(r.listAt, time.Now())
			if r.failLists > 0 {
				r.failLists--
				return errors.New("the handler failed")
			}
			return nil
		},
		Changed: func(_ context.Context, ev informer.Event[model.Namespace]) error {
			if r.gate != nil {
				<-r.gate
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, ev.Type+" "+ev.Object.Metadata.Name)
			r.pending++
			return nil
		},
	}
}

func (r *recorder) flush(context.Context) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes = append(r.flushes, r.pending)
	r.pending = 0
	return false, nil
}

func (r *recorder) resynced(context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resyncs++
}

func (r *recorder) read(fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn()
}

// within waits until cond holds.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// run runs inf until the test ends, and fails it if Run does not return
// soon after its context ends.
func run(t *testing.T, inf *informer.Informer) {
	t.Helper()
	if inf.Log == nil {
		inf.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
}

func createNamespaces(t *testing.T, s *store.Store, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := s.EnsureNamespace(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
}

func deleteNamespace(t *testing.T, s *store.Store, name string) {
	t.Helper()
	if _, err := s.Namespaces().Delete(context.Background(), "", name, ""); err != nil {
		t.Fatal(err)
	}
}

// controlled is the namespaces of a store, with a say in the informer's
// lists and watches.
type controlled struct {
	store.Resource[model.Namespace, *model.Namespace]
	// beforeList and beforeWatch run before the nth list or watch (from 1).
	beforeList, beforeWatch func(n int)

	mu        sync.Mutex
	lists     int
	watches   []*store.Watch
	watchErrs []error
}

func (c *controlled) List(ctx context.Context, o store.ListOptions) (*model.List[model.Namespace], error) {
	c.mu.Lock()
	c.lists++
	n := c.lists
	c.mu.Unlock()
	if c.beforeList != nil {
		c.beforeList(n)
	}
	return c.Resource.List(ctx, o)
}

func (c *controlled) Watch(ctx context.Context, o store.WatchOptions) (*store.Watch, error) {
	c.mu.Lock()
	n := len(c.watches) + len(c.watchErrs) + 1
	c.mu.Unlock()
	if c.beforeWatch != nil {
		c.beforeWatch(n)
	}
	w, err := c.Resource.Watch(ctx, o)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.watchErrs = append(c.watchErrs, err)
		return nil, err
	}
	c.watches = append(c.watches, w)
	return w, nil
}

// end stops the newest watch, as a server that closes it.
func (c *controlled) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watches[len(c.watches)-1].Stop()
}

func TestListThenWatchDeliversEachChangeOnce(t *testing.T) {
	s, ctx := storetest.New(t), context.Background()
	createNamespaces(t, s, "a", "b")
	rec := &recorder{}
	run(t, &informer.Informer{Name: "test", Sources: []informer.Source{informer.Kind(s.Namespaces(), rec.handlers())}, Flush: rec.flush})
	within(t, 10*time.Second, "list", func() (ok bool) { rec.read(func() { ok = len(rec.lists) == 1 }); return })

	createNamespaces(t, s, "c")
	if _, err := s.Namespaces().Modify(ctx, "", "a", func(ns *model.Namespace) bool {
		ns.Metadata.Labels = map[string]string{"team": "x"}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	deleteNamespace(t, s, "b")
	within(t, 5*time.Second, "three changes", func() (ok bool) { rec.read(func() { ok = len(rec.events) >= 3 }); return })
	time.Sleep(300 * time.Millisecond) // nothing more may come
	rec.read(func() {
		if want := [][]string{{"a", "b", "default"}}; !equal(rec.lists, want) {
			t.Errorf("lists %v; want %v", rec.lists, want)
		}
		// The objects of the list come once, there, and not again from
		// the watch; each change after it once, in order.
		if want := []string{"ADDED c", "MODIFIED a", "DELETED b"}; !slices.Equal(rec.events, want) {
			t.Errorf("changes %v; want %v", rec.events, want)
		}
		if len(rec.flushes) == 0 || rec.flushes[0] != 0 || sum(rec.flushes) != 3 {
			t.Errorf("flushes %v; want one after the list, then the three changes", rec.flushes)
		}
	})
}

func TestAnEndedWatchStartsOverWithoutLosingAChange(t *testing.T) {
	s := storetest.New(t)
	createNamespaces(t, s, "a")
	// What changes between the end of the watch and the new list must be
	// in that list.
	res := &controlled{Resource: s.Namespaces(), beforeList: func(n int) {
		if n == 2 {
			if err := s.EnsureNamespace(context.Background(), "d"); err != nil {
				t.Error(err)
			}
			if _, err := s.Namespaces().Delete(context.Background(), "", "a", ""); err != nil {
				t.Error(err)
			}
		}
	}}
	rec := &recorder{}
	run(t, &informer.Informer{Name: "test", Sources: []informer.Source{informer.Kind[model.Namespace](res, rec.handlers())},
		Flush: rec.flush, Backoff: 50 * time.Millisecond})
	within(t, 10*time.Second, "list", func() (ok bool) { rec.read(func() { ok = len(rec.lists) == 1 }); return })

	res.end()
	within(t, 10*time.Second, "list after the watch ended", func() (ok bool) { rec.read(func() { ok = len(rec.lists) == 2 }); return })
	createNamespaces(t, s, "e")
	within(t, 5*time.Second, "change after the new list", func() (ok bool) { rec.read(func() { ok = len(rec.events) >= 1 }); return })
	time.Sleep(300 * time.Millisecond)
	rec.read(func() {
		if want := [][]string{{"a", "default"}, {"d", "default"}}; !equal(rec.lists, want) {
			t.Errorf("lists %v; want %v", rec.lists, want)
		}
		if want := []string{"ADDED e"}; !slices.Equal(rec.events, want) {
			t.Errorf("changes %v; want %v: the new watch resumes from the new list", rec.events, want)
		}
	})
}

func TestAWatchFromAnExpiredVersionListsAgain(t *testing.T) {
	s, ctx := storetest.New(t), context.Background()
	// Between the first list and its watch, two namespaces come and the
	// history is compacted past the list's version.
	res := &controlled{Resource: s.Namespaces(), beforeWatch: func(n int) {
		if n == 1 {
			for _, name := range []string{"x", "y"} {
				if err := s.EnsureNamespace(ctx, name); err != nil {
					t.Error(err)
				}
			}
			if _, err := s.Compact(ctx, 0); err != nil {
				t.Error(err)
			}
		}
	}}
	rec := &recorder{}
	run(t, &informer.Informer{Name: "test", Sources: []informer.Source{informer.Kind[model.Namespace](res, rec.handlers())},
		Flush: rec.flush, Backoff: 50 * time.Millisecond})
	within(t, 10*time.Second, "list after the expired watch", func() (ok bool) { rec.read(func() { ok = len(rec.lists) == 1 }); return })
	createNamespaces(t, s, "z")
	within(t, 5*time.Second, "change after the list", func() (ok bool) { rec.read(func() { ok = len(rec.events) >= 1 }); return })
	time.Sleep(300 * time.Millisecond)
	res.mu.Lock()
	errs := res.watchErrs
	res.mu.Unlock()
	if len(errs) != 1 || !errors.Is(errs[0], store.ErrExpired) {
		t.Fatalf("watch errors %v; want one ErrExpired", errs)
	}
	rec.read(func() {
		// The first list's handler is not called: its watch never began.
		if want := [][]string{{"default", "x", "y"}}; !equal(rec.lists, want) {
			t.Errorf("lists %v; want %v", rec.lists, want)
		}
		if want := []string{"ADDED z"}; !slices.Equal(rec.events, want) {
			t.Errorf("changes %v; want %v", rec.events, want)
		}
	})
}

func TestAFailingHandlerStartsOverAfterTheBackoff(t *testing.T) {
	s := storetest.New(t)
	rec := &recorder{failLists: 1}
	const backoff = 300 * time.Millisecond
	run(t, &informer.Informer{Name: "test", Sources: []informer.Source{informer.Kind(s.Namespaces(), rec.handlers())},
		Flush: rec.flush, Backoff: backoff})
	within(t, 10*time.Second, "second list", func() (ok bool) { rec.read(func() { ok = len(rec.lists) == 2 }); return })
	rec.read(func() {
		if gap := rec.listAt[1].Sub(rec.listAt[0]); gap < backoff {
			t.Errorf("listed again after %s; want the back-off of %s first", gap, backoff)
		}
		if len(rec.flushes) != 1 {
			t.Errorf("%d flushes; want 1, after the list that succeeded", len(rec.flushes))
		}
	})
}

// A burst of changes is flushed once: a quiet spell ends it or, with no
// Quiet, the end of the changes already queued.
func TestABurstOfChangesIsFlushedOnce(t *testing.T) {
	for _, quiet := range []time.Duration{300 * time.Millisecond, 0} {
		t.Run("quiet "+quiet.String(), func(t *testing.T) {
			s, ctx := storetest.New(t), context.Background()
			rec := &recorder{gate: make(chan struct{})}
			run(t, &informer.Informer{Name: "test", Sources: []informer.Source{informer.Kind(s.Namespaces(), rec.handlers())},
				Flush: rec.flush, Quiet: quiet, Window: time.Minute})
			within(t, 10*time.Second, "flush after the list", func() (ok bool) { rec.read(func() { ok = len(rec.flushes) == 1 }); return })

			// The first change of the burst waits in its handler until
			// the others are queued behind it.
			rv, err := s.ResourceVersion(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seen, err := s.Namespaces().Watch(ctx, store.WatchOptions{ResourceVersion: rv})
			if err != nil {
				t.Fatal(err)
			}
			defer seen.Stop()
			burst := []string{"n1", "n2", "n3", "n4", "n5"}
			createNamespaces(t, s, burst...)
			for range burst {
				select {
				case <-seen.Events:
				case <-time.After(10 * time.Second):
					t.Fatal("the feed did not deliver the burst")
				}
			}
			time.Sleep(500 * time.Millisecond) // from the feed to the informer's queue
			close(rec.gate)
			within(t, 5*time.Second, "flush after the burst", func() (ok bool) { rec.read(func() { ok = len(rec.flushes) >= 2 }); return })
			time.Sleep(quiet + 300*time.Millisecond)
			rec.read(func() {
				if want := []int{0, len(burst)}; !slices.Equal(rec.flushes, want) {
					t.Errorf("flushes %v; want %v (the list, then the burst at once)", rec.flushes, want)
				}
			})
			// A change alone is flushed alone.
			createNamespaces(t, s, "n6")
			within(t, 5*time.Second, "flush after one change", func() (ok bool) { rec.read(func() { ok = len(rec.flushes) >= 3 }); return })
			rec.read(func() {
				if want := []int{0, len(burst), 1}; !slices.Equal(rec.flushes, want) {
					t.Errorf("flushes %v; want %v", rec.flushes, want)
				}
			})
		})
	}
}

func TestResyncListsAgainOrRunsResynced(t *testing.T) {
	t.Run("relist", func(t *testing.T) {
		s := storetest.New(t)
		rec := &recorder{}
		warned := &countingHandler{}
		run(t, &informer.Informer{Name: "test", Log: slog.New(warned), Sources: []informer.Source{informer.Kind(s.Namespaces(), rec.handlers())},
			Flush: rec.flush, Resync: 100 * time.Millisecond, Backoff: time.Hour})
		within(t, 10*time.Second, "three lists", func() (ok bool) { rec.read(func() { ok = len(rec.lists) >= 3 }); return })
		if n := warned.count(); n != 0 {
			t.Errorf("%d warnings; a resync is no failure", n)
		}
	})
	t.Run("resynced", func(t *testing.T) {
		s := storetest.New(t)
		rec := &recorder{}
		run(t, &informer.Informer{Name: "test", Sources: []informer.Source{informer.Kind(s.Namespaces(), rec.handlers())},
			Flush: rec.flush, Resync: 100 * time.Millisecond, Resynced: rec.resynced})
		within(t, 10*time.Second, "three resyncs", func() (ok bool) { rec.read(func() { ok = rec.resyncs >= 3 }); return })
		rec.read(func() {
			if len(rec.lists) != 1 {
				t.Errorf("%d lists; want 1: Resynced takes the place of the lists", len(rec.lists))
			}
		})
	})
}

// Start takes the place of the lists: the sources are watched from its
// version.
func TestStartGivesTheVersionToWatchFrom(t *testing.T) {
	s := storetest.New(t)
	createNamespaces(t, s, "a")
	rec := &recorder{}
	var started int64
	run(t, &informer.Informer{Name: "test", Sources: []informer.Source{informer.Kind(s.Namespaces(), rec.handlers())},
		Start: func(ctx context.Context) (int64, error) {
			rv, err := s.ResourceVersion(ctx)
			rec.read(func() { started = rv })
			return rv, err
		}, Flush: rec.flush})
	within(t, 10*time.Second, "start", func() (ok bool) { rec.read(func() { ok = started > 0 && len(rec.flushes) == 1 }); return })
	createNamespaces(t, s, "b")
	within(t, 5*time.Second, "change", func() (ok bool) { rec.read(func() { ok = len(rec.events) >= 1 }); return })
	time.Sleep(300 * time.Millisecond)
	rec.read(func() {
		if len(rec.lists) != 0 || !slices.Equal(rec.events, []string{"ADDED b"}) {
			t.Errorf("lists %v, changes %v; want none, [ADDED b]", rec.lists, rec.events)
		}
	})
}

type countingHandler struct {
	mu sync.Mutex
	n  int
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) Handle(context.Context, slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

func equal(a, b [][]string) bool {
	return slices.EqualFunc(a, b, func(x, y []string) bool { return strings.Join(x, ",") == strings.Join(y, ",") })
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
