package store

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
)

func openStore(t *testing.T) *Store {
	t.Helper()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	if err := MigrateUp(ctx, url, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.EnsureNamespace(ctx, model.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	return s
}

func testPod(name string) *model.Pod {
	p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "app", Image: "base", Command: []string{"sleep", "1000"}}}}}
	model.DefaultPod(p)
	p.Status.Phase = model.PodPending
	return p
}

func version(obj model.Object) int64 {
	rv, _ := strconv.ParseInt(obj.GetMeta().ResourceVersion, 10, 64)
	return rv
}

// heldWrite creates a pod and takes its version in a transaction left
// open, as a write slow to commit.
func heldWrite(t *testing.T, ctx context.Context, s *Store, name string) (pgx.Tx, int64) {
	t.Helper()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	p := testPod(name)
	p.Metadata.UID = newUID()
	pend, err := s.Pods().createRows(ctx, tx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.stamp(ctx, tx, pend); err != nil {
		t.Fatal(err)
	}
	return tx, version(p)
}

// writeConcurrently has writers each create a pod and update it updates
// times, and returns the versions of the writes, each pod's in order.
func writeConcurrently(t *testing.T, ctx context.Context, s *Store, prefix string, writers, updates int) map[string][]int64 {
	t.Helper()
	var (
		mu      sync.Mutex
		written = map[string][]int64{}
		wg      sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := testPod(fmt.Sprintf("%s-%d", prefix, w))
			if err := s.CreatePod(ctx, p); err != nil {
				t.Error(err)
				return
			}
			rvs := []int64{version(p)}
			for i := range updates {
				p.Status.Message = fmt.Sprint("update ", i)
				if err := s.Pods().Update(ctx, p); err != nil {
					t.Error(err)
					return
				}
				rvs = append(rvs, version(p))
			}
			mu.Lock()
			defer mu.Unlock()
			written[p.Metadata.Name] = rvs
		}()
	}
	wg.Wait()
	return written
}

// received gathers a watch's versions until it has one at or past last.
func received(t *testing.T, w *Watch, last int64) []int64 {
	t.Helper()
	var got []int64
	timeout := time.After(30 * time.Second)
	for len(got) == 0 || got[len(got)-1] < last {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				t.Fatalf("watch ended after %d events: %v", len(got), w.Err())
			}
			got = append(got, ev.ResourceVersion)
		case <-timeout:
			t.Fatalf("watch stalled: %d events, the last %v, waiting for %d", len(got), got[max(0, len(got)-1):], last)
		}
	}
	return got
}

// A write that takes its version and commits after many later ones is
// delivered in its place, before them; one that rolls back holds nothing
// up. Every watcher sees every committed write once, in version order.
func TestFeedWaitsForALateCommitAndSkipsARollback(t *testing.T) {
	s := openStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	list, err := s.Pods().List(ctx, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	from, _ := strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64)
	var watches []*Watch
	for _, rv := range []int64{0, from} {
		w, err := s.Pods().Watch(ctx, WatchOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		watches = append(watches, w)
	}
	for _, commit := range []bool{false, true} {
		name := map[bool]string{false: "aborted", true: "slow"}[commit]
		held, heldRV := heldWrite(t, ctx, s, name)
		done := make(chan map[string][]int64)
		go func() { done <- writeConcurrently(t, ctx, s, "busy-"+name, 16, 5) }()
		// Through several rounds of the feed (it reads at least once a
		// second), nothing after the held version may be delivered.
		time.Sleep(2500 * time.Millisecond)
		for i, w := range watches {
			select {
			case ev := <-w.Events:
				t.Fatalf("watch %d delivered version %d while version %d was still to commit or roll back", i, ev.ResourceVersion, heldRV)
			default:
			}
		}
		if commit {
			err = held.Commit(ctx)
		} else {
			err = held.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		var round []int64
		writes := 16 * 6
		if commit {
			round = append(round, heldRV)
			writes++
		}
		for _, rvs := range <-done {
			round = append(round, rvs...)
		}
		slices.Sort(round)
		if len(round) != writes || round[0] < heldRV {
			t.Fatalf("%s round: writes %v, held version %d", name, round, heldRV)
		}
		for i, w := range watches {
			if got := received(t, w, round[len(round)-1]); !slices.Equal(got, round) {
				t.Fatalf("%s round: watch %d saw versions\n%v\nwant every committed write once, in order\n%v", name, i, got, round)
			}
		}
	}
}

// A list taken while writers race holds exactly the writes up to its
// version, and a watch from that version brings exactly the ones after.
func TestListVersionIsTheSnapshotAWatchResumesFrom(t *testing.T) {
	s := openStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	done := make(chan map[string][]int64)
	go func() { done <- writeConcurrently(t, ctx, s, "race", 12, 20) }()
	type snapshot struct {
		rv    int64
		pods  map[string]int64
		watch *Watch
	}
	var snaps []snapshot
	for range 6 {
		list, err := s.Pods().List(ctx, ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		snap := snapshot{pods: map[string]int64{}}
		snap.rv, _ = strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64)
		for _, p := range list.Items {
			snap.pods[p.Metadata.Name] = version(&p)
		}
		if snap.watch, err = s.Pods().Watch(ctx, WatchOptions{ResourceVersion: snap.rv}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(snap.watch.Stop)
		snaps = append(snaps, snap)
		time.Sleep(50 * time.Millisecond)
	}
	written := <-done
	var all []int64
	for _, rvs := range written {
		all = append(all, rvs...)
	}
	slices.Sort(all)
	for i, snap := range snaps {
		for name, rvs := range written {
			// The pod as of the list's version: its newest write at or
			// below it, or absent.
			var want int64
			for _, rv := range rvs {
				if rv <= snap.rv {
					want = rv
				}
			}
			if got := snap.pods[name]; got != want {
				t.Fatalf("list %d at version %d shows %s at version %d, want %d (its writes: %v)", i, snap.rv, name, got, want, rvs)
			}
		}
		var after []int64
		for _, rv := range all {
			if rv > snap.rv {
				after = append(after, rv)
			}
		}
		if len(after) == 0 {
			continue
		}
		if got := received(t, snap.watch, all[len(all)-1]); !slices.Equal(got, after) {
			t.Fatalf("watch from list %d's version %d saw\n%v\nwant\n%v", i, snap.rv, got, after)
		}
	}
}

// A write that waits for another's rows takes its version after that one
// committed: a name created again while its deletion commits is ADDED
// after the DELETED, in the feed as in the versions.
func TestAVersionIsTakenAfterTheRowsItWaitedFor(t *testing.T) {
	s := openStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	first := testPod("again")
	if err := s.CreatePod(ctx, first); err != nil {
		t.Fatal(err)
	}
	w, err := s.Pods().Watch(ctx, WatchOptions{ResourceVersion: version(first) - 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	gone, deletion, err := s.Pods().deleteRows(ctx, tx, model.DefaultNamespace, "again", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	second := testPod("again")
	created := make(chan error, 1)
	go func() { created <- s.CreatePod(ctx, second) }()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-created:
		t.Fatalf("the name was created again (%v) while its deletion was still to commit", err)
	default:
	}
	if err := s.stamp(ctx, tx, deletion); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if version(second) <= version(gone) {
		t.Fatalf("created again at version %d, deleted at %d: the creation took its version before the deletion it waited for", version(second), version(gone))
	}
	var got []string
	for len(got) < 3 {
		select {
		case ev := <-w.Events:
			var p model.Pod
			if err := json.Unmarshal(ev.Object, &p); err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.Type+" "+p.Metadata.UID)
		case <-ctx.Done():
			t.Fatalf("watch saw %v", got)
		}
	}
	if want := []string{"ADDED " + first.Metadata.UID, "DELETED " + first.Metadata.UID, "ADDED " + second.Metadata.UID}; !slices.Equal(got, want) {
		t.Fatalf("watch saw %v, want %v", got, want)
	}
}
