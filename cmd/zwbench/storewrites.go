package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// StoreResults are the store's writes under concurrency, on a private
// PostgreSQL, while watchers check the change feed.
type StoreResults struct {
	SecondsPerLevel float64      `json:"secondsPerLevel"`
	Levels          []StoreLevel `json:"levels"`
	// Deadline is 64 writers each request with a 5 s deadline: no write
	// may run out of it (a lock or pool deadlock would).
	Deadline StoreLevel `json:"deadline"`
	// Watchers each started from a different resource version; every one
	// must have seen every successful write after its start exactly once,
	// in increasing resource version order.
	Watchers []WatcherVerdict `json:"watchers"`
}

// StoreLevel is one number of concurrent writers.
type StoreLevel struct {
	Writers      int         `json:"writers"`
	Writes       int         `json:"writes"`
	Errors       int         `json:"errors"`
	DeadlineHits int         `json:"deadlineExceeded"`
	PerSecond    float64     `json:"writesPerSecond"`
	Latency      Percentiles `json:"latencyMs"`
}

// WatcherVerdict is what one watcher saw against what the writers wrote.
type WatcherVerdict struct {
	From       int64  `json:"from"`
	Expected   int    `json:"expected"`
	Received   int    `json:"received"`
	Missing    int    `json:"missing"`
	Duplicates int    `json:"duplicates"`
	OutOfOrder int    `json:"outOfOrder"`
	Unexpected int    `json:"unexpected"`
	Err        string `json:"err,omitempty"`
}

func (v WatcherVerdict) ok() bool {
	return v.Missing == 0 && v.Duplicates == 0 && v.OutOfOrder == 0 && v.Unexpected == 0 && v.Err == "" && v.Received == v.Expected
}

// storeDeadline is each request's deadline in the deadline level.
const storeDeadline = 5 * time.Second

// storeSection measures pod creates and status updates through the typed
// store API with 1, 16 and 64 writers, each on pods of its own, then 64
// writers with a deadline on every request, while watchers started from
// different versions check that the feed has every write exactly once and
// in order.
func storeSection(ctx context.Context, perLevel time.Duration, log *slog.Logger) (*StoreResults, error) {
	st, done, err := privateStore(ctx, "store", log)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := st.EnsureNamespace(ctx, model.DefaultNamespace); err != nil {
		return nil, err
	}
	list, err := st.Pods().List(ctx, store.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	start, _ := strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64)

	res := &StoreResults{SecondsPerLevel: perLevel.Seconds()}
	var written versions
	watchCtx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	var watchers []*feedWatcher
	watch := func(from int64) error {
		w, err := newFeedWatcher(watchCtx, st, from)
		if err == nil {
			watchers = append(watchers, w)
		}
		return err
	}
	// One watcher from the list's version before any write, one from the
	// beginning of history.
	if err := watch(start); err != nil {
		return nil, err
	}
	if err := watch(0); err != nil {
		return nil, err
	}
	b := &storeBench{st: st, written: &written}
	for i, n := range []int{1, 16, 64} {
		if i == 1 {
			// One more from the newest write so far: its history comes
			// from the table, the rest live.
			if err := watch(written.max()); err != nil {
				return nil, err
			}
		}
		lvl, err := b.level(ctx, fmt.Sprintf("l%d", n), n, perLevel, 0)
		if err != nil {
			return nil, err
		}
		res.Levels = append(res.Levels, lvl)
	}
	if res.Deadline, err = b.level(ctx, "dl", 64, perLevel, storeDeadline); err != nil {
		return nil, err
	}
	// Every watcher must reach the newest write; then the counts are final.
	last := written.max()
	deadline := time.Now().Add(30 * time.Second)
	for _, w := range watchers {
		w.waitFor(last, deadline)
	}
	stopWatchers()
	all := written.sorted()
	for _, w := range watchers {
		res.Watchers = append(res.Watchers, w.verdict(all))
	}
	return res, nil
}

// versions collects the resource versions of successful writes.
type versions struct {
	mu sync.Mutex
	rv []int64
}

func (v *versions) add(rvs []int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rv = append(v.rv, rvs...)
}

func (v *versions) max() int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	var m int64
	for _, rv := range v.rv {
		m = max(m, rv)
	}
	return m
}

func (v *versions) sorted() []int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := slices.Clone(v.rv)
	slices.Sort(out)
	return out
}

type storeBench struct {
	st      *store.Store
	written *versions
}

// podsPerWriter is how many pods a writer creates before it only updates
// their status, round robin.
const podsPerWriter = 20

// level runs n writers for d. Each creates its pods and updates their
// status, one write after another; timeout > 0 gives every request that
// deadline.
func (b *storeBench) level(ctx context.Context, prefix string, n int, d time.Duration, timeout time.Duration) (StoreLevel, error) {
	lvl := StoreLevel{Writers: n}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
	)
	end := time.Now().Add(d)
	begin := time.Now()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				mine   []*model.Pod
				lat    []time.Duration
				rvs    []int64
				errs   int
				expire int
			)
			for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
				rctx, cancel := ctx, context.CancelFunc(func() {})
				if timeout > 0 {
					rctx, cancel = context.WithTimeout(ctx, timeout)
				}
				t0 := time.Now()
				var p *model.Pod
				var err error
				if len(mine) < podsPerWriter {
					p = benchPod(fmt.Sprintf("%s-w%d-%d", prefix, w, len(mine)))
					if err = b.st.CreatePod(rctx, p); err == nil {
						mine = append(mine, p)
					}
				} else {
					p = mine[i%podsPerWriter]
					now := time.Now().UTC()
					p.Status.Phase = model.PodRunning
					model.SetCondition(&p.Status.Conditions, model.PodCondition{Type: model.PodReady,
						Status: []string{model.ConditionTrue, model.ConditionFalse}[i%2], LastTransitionTime: &now}, now)
					err = b.st.Pods().Update(rctx, p)
				}
				lat = append(lat, time.Since(t0))
				if err != nil {
					errs++
					if errors.Is(rctx.Err(), context.DeadlineExceeded) {
						expire++
					}
				} else {
					rv, _ := strconv.ParseInt(p.Metadata.ResourceVersion, 10, 64)
					rvs = append(rvs, rv)
				}
				cancel()
			}
			b.written.add(rvs)
			mu.Lock()
			defer mu.Unlock()
			latencies = append(latencies, lat...)
			lvl.Writes += len(rvs)
			lvl.Errors += errs
			lvl.DeadlineHits += expire
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return lvl, err
	}
	lvl.PerSecond = float64(lvl.Writes) / time.Since(begin).Seconds()
	lvl.Latency = percentiles(latencies)
	return lvl, nil
}

func benchPod(name string) *model.Pod {
	p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace, Labels: map[string]string{"app": "bench"}},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "app", Image: "base", Command: []string{"sleep", "1000"}}}}}
	model.DefaultPod(p)
	p.Status.Phase = model.PodPending
	return p
}

// feedWatcher records every pod event of one watch.
type feedWatcher struct {
	from int64
	mu   sync.Mutex
	got  []int64
	err  error
	done chan struct{}
}

func newFeedWatcher(ctx context.Context, st *store.Store, from int64) (*feedWatcher, error) {
	w, err := st.Pods().Watch(ctx, store.WatchOptions{ResourceVersion: from})
	if err != nil {
		return nil, err
	}
	fw := &feedWatcher{from: from, done: make(chan struct{})}
	go func() {
		defer close(fw.done)
		for ev := range w.Events {
			fw.mu.Lock()
			fw.got = append(fw.got, ev.ResourceVersion)
			fw.mu.Unlock()
		}
		fw.mu.Lock()
		defer fw.mu.Unlock()
		if ctx.Err() == nil {
			fw.err = w.Err()
			if fw.err == nil {
				fw.err = errors.New("the watch ended")
			}
		}
	}()
	return fw, nil
}

// waitFor waits until the watcher has seen rv, it ended, or the deadline.
func (w *feedWatcher) waitFor(rv int64, deadline time.Time) {
	for time.Now().Before(deadline) {
		w.mu.Lock()
		reached := len(w.got) > 0 && w.got[len(w.got)-1] >= rv
		w.mu.Unlock()
		if reached {
			return
		}
		select {
		case <-w.done:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// verdict compares what the watcher saw with written (sorted): each
// version after its start once, in order, nothing else.
func (w *feedWatcher) verdict(written []int64) WatcherVerdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := WatcherVerdict{From: w.from, Received: len(w.got)}
	if w.err != nil {
		v.Err = w.err.Error()
	}
	want := map[int64]bool{}
	for _, rv := range written {
		if rv > w.from {
			want[rv] = true
		}
	}
	v.Expected = len(want)
	seen := map[int64]bool{}
	var prev int64
	for _, rv := range w.got {
		switch {
		case seen[rv]:
			v.Duplicates++
		case !want[rv]:
			v.Unexpected++
		}
		if rv <= prev {
			v.OutOfOrder++
		}
		prev = max(prev, rv)
		seen[rv] = true
	}
	for rv := range want {
		if !seen[rv] {
			v.Missing++
		}
	}
	return v
}

func (r *StoreResults) print(w io.Writer) {
	fmt.Fprintf(w, "\nstore writes: pod creates and status updates through the store, each writer on pods of its own, %.0f s a level\n", r.SecondsPerLevel)
	fmt.Fprintf(w, "  %-34s %10s %10s %10s %8s\n", "writers", "writes/s", "p50", "p99", "errors")
	row := func(name string, l StoreLevel) {
		fmt.Fprintf(w, "  %-34s %10.0f %7.2f ms %7.2f ms %8d\n", name, l.PerSecond, l.Latency.P50, l.Latency.P99, l.Errors)
	}
	for _, l := range r.Levels {
		row(strconv.Itoa(l.Writers), l)
	}
	row(fmt.Sprintf("%d, %s deadline each", r.Deadline.Writers, storeDeadline), r.Deadline)
	fmt.Fprintf(w, "  deadline exceeded: %d of %d requests\n", r.Deadline.DeadlineHits, r.Deadline.Writes+r.Deadline.Errors)
	for _, v := range r.Watchers {
		verdict := "ok: every write once, in order"
		if !v.ok() {
			verdict = fmt.Sprintf("FAILED: %d missing, %d duplicates, %d out of order, %d unexpected %s", v.Missing, v.Duplicates, v.OutOfOrder, v.Unexpected, v.Err)
		}
		fmt.Fprintf(w, "  watcher from %-8d %7d/%-7d events  %s\n", v.From, v.Received, v.Expected, verdict)
	}
}
