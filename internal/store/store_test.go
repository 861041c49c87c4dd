package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newStore(t *testing.T) *store.Store { return storetest.New(t) }

func pod(name string, labels map[string]string) *model.Pod {
	p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace, Labels: labels},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "app", Image: "base", Command: []string{"sleep", "1000"}}}}}
	model.DefaultPod(p)
	p.Status.Phase = model.PodPending
	return p
}

func TestCreateGetAndDuplicate(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	p := pod("web", map[string]string{"app": "web"})
	if err := s.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if p.Metadata.UID == "" || p.Metadata.ResourceVersion == "" || p.Metadata.CreationTimestamp == nil {
		t.Fatalf("create did not fill uid, resourceVersion and creationTimestamp: %+v", p.Metadata)
	}
	got, err := s.Pods().Get(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.Metadata.UID != p.Metadata.UID || got.Metadata.ResourceVersion != p.Metadata.ResourceVersion || got.Spec.Containers[0].Command[1] != "1000" {
		t.Fatalf("read back %+v, want %+v", got, p)
	}
	if err := s.CreatePod(ctx, pod("web", nil)); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second create of the same name: got %v, want ErrAlreadyExists", err)
	}
	if _, err := s.Pods().Get(ctx, "default", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get of a missing pod: got %v, want ErrNotFound", err)
	}
	missingNS := pod("x", nil)
	missingNS.Metadata.Namespace = "nowhere"
	if err := s.CreatePod(ctx, missingNS); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("create in a missing namespace: got %v, want ErrNotFound", err)
	}
}

func TestConcurrentUpdatesOneWins(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	p := pod("web", nil)
	if err := s.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := *p
			mine.Metadata.Labels = map[string]string{"writer": fmt.Sprint(i)}
			errs[i] = s.Pods().Update(ctx, &mine)
		}()
	}
	wg.Wait()
	wins, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, store.ErrConflict):
			conflicts++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if wins != 1 || conflicts != 1 {
		t.Fatalf("two writers with the same resourceVersion: %d won, %d conflicted; want 1 and 1", wins, conflicts)
	}
	got, _ := s.Pods().Get(ctx, "default", "web")
	if got.Metadata.ResourceVersion == p.Metadata.ResourceVersion {
		t.Fatal("resourceVersion did not change on write")
	}
}

func TestLabelAndFieldSelectors(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	for _, c := range []struct {
		name, app, tier, node string
	}{{"a", "web", "front", "n1"}, {"b", "web", "db", "n2"}, {"c", "api", "", "n1"}, {"d", "", "", ""}} {
		p := pod(c.name, map[string]string{})
		if c.app != "" {
			p.Metadata.Labels["app"] = c.app
		}
		if c.tier != "" {
			p.Metadata.Labels["tier"] = c.tier
		}
		p.Spec.NodeName = c.node
		if err := s.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		labels, fields string
		want           string
	}{
		{"app=web", "", "ab"},
		{"app=web,tier!=db", "", "a"},
		{"tier!=db", "", "acd"},
		{"app in (web,api)", "", "abc"},
		{"app notin (web)", "", "cd"},
		{"tier", "", "ab"},
		{"!app", "", "d"},
		{"", "spec.nodeName=n1", "ac"},
		{"", "spec.nodeName=", "d"},
		{"app=web", "spec.nodeName!=n1", "b"},
		{"", "status.phase=Pending", "abcd"},
		{"", "status.phase=Running", ""},
	} {
		list, err := s.Pods().List(ctx, store.ListOptions{LabelSelector: tc.labels, FieldSelector: tc.fields})
		if err != nil {
			t.Fatalf("%q %q: %v", tc.labels, tc.fields, err)
		}
		got := ""
		for _, p := range list.Items {
			got += p.Metadata.Name
		}
		if got != tc.want {
			t.Errorf("labels %q fields %q: got %q, want %q", tc.labels, tc.fields, got, tc.want)
		}
	}
	if _, err := s.Pods().List(ctx, store.ListOptions{FieldSelector: "spec.bogus=x"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unknown field selector: got %v, want ErrInvalid", err)
	}
	if _, err := s.Pods().List(ctx, store.ListOptions{LabelSelector: "app in web"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("malformed label selector: got %v, want ErrInvalid", err)
	}
}

func TestPagination(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	for i := range 7 {
		if err := s.CreatePod(ctx, pod(fmt.Sprintf("p%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	opts := store.ListOptions{Limit: 3}
	pages := 0
	for {
		list, err := s.Pods().List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, p := range list.Items {
			names = append(names, p.Metadata.Name)
		}
		if list.Metadata.Continue == "" {
			break
		}
		opts.Continue = list.Metadata.Continue
	}
	if pages != 3 || fmt.Sprint(names) != "[p0 p1 p2 p3 p4 p5 p6]" {
		t.Fatalf("paged %d times through %v", pages, names)
	}
	if _, err := s.Pods().List(ctx, store.ListOptions{Limit: 2, Continue: "garbage!"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad continue token: got %v, want ErrInvalid", err)
	}
}

func TestClusterScopedListsPage(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	for _, n := range []string{"c", "a", "b"} {
		if err := s.Nodes().Create(ctx, &model.Node{Metadata: model.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := s.Nodes().List(ctx, store.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	rest, err := s.Nodes().List(ctx, store.ListOptions{Limit: 2, Continue: first.Metadata.Continue})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Items) != 2 || first.Items[0].Metadata.Name != "a" || len(rest.Items) != 1 || rest.Items[0].Metadata.Name != "c" {
		t.Fatalf("node pages: %v then %v", first.Items, rest.Items)
	}
}

func TestNamespaceDeleteRefusedWhileItHoldsPods(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	if err := s.EnsureNamespace(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	p := pod("web", nil)
	p.Metadata.Namespace = "team"
	if err := s.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteNamespace(ctx, "team", ""); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete of a namespace with pods: got %v, want ErrConflict", err)
	}
	if _, err := s.Pods().Delete(ctx, "team", "web", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteNamespace(ctx, "team", ""); err != nil {
		t.Fatalf("delete of an empty namespace: %v", err)
	}
}

func collect(t *testing.T, w *store.Watch, n int) []store.WatchEvent {
	t.Helper()
	var got []store.WatchEvent
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				t.Fatalf("watch ended after %d events: %v", len(got), w.Err())
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("got %d of %d watch events", len(got), n)
		}
	}
	return got
}

func TestWatchResumesWithoutGapsOrDuplicates(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	list, err := s.Pods().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var from int64
	fmt.Sscan(list.Metadata.ResourceVersion, &from)

	// Writers race while the watch starts; versions must arrive in order,
	// each exactly once.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.CreatePod(ctx, pod(fmt.Sprintf("w%02d", i), map[string]string{"app": "web"})); err != nil {
				t.Error(err)
			}
		}()
	}
	w, err := s.Pods().Watch(ctx, store.WatchOptions{ResourceVersion: from})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	wg.Wait()
	first := collect(t, w, 20)
	seen := map[string]bool{}
	var last int64
	for _, ev := range first {
		if ev.Type != "ADDED" || ev.ResourceVersion <= last {
			t.Fatalf("event %s at %d after %d: out of order or wrong type", ev.Type, ev.ResourceVersion, last)
		}
		last = ev.ResourceVersion
		var p model.Pod
		_ = json.Unmarshal(ev.Object, &p)
		if seen[p.Metadata.Name] {
			t.Fatalf("duplicate event for %s", p.Metadata.Name)
		}
		seen[p.Metadata.Name] = true
	}
	w.Stop()

	// Resume from the tenth event: exactly the last ten again, then live ones.
	resume := first[9].ResourceVersion
	w2, err := s.Pods().Watch(ctx, store.WatchOptions{ResourceVersion: resume, LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	replayed := collect(t, w2, 10)
	for i, ev := range replayed {
		if ev.ResourceVersion != first[10+i].ResourceVersion {
			t.Fatalf("resumed event %d has version %d, want %d", i, ev.ResourceVersion, first[10+i].ResourceVersion)
		}
	}
	p, _ := s.Pods().Get(ctx, "default", "w00")
	if _, err := s.Pods().Delete(ctx, "default", p.Metadata.Name, ""); err != nil {
		t.Fatal(err)
	}
	other := pod("other", map[string]string{"app": "db"})
	if err := s.CreatePod(ctx, other); err != nil {
		t.Fatal(err)
	}
	live := collect(t, w2, 1)
	if live[0].Type != "DELETED" {
		t.Fatalf("live event %s, want DELETED (the app=db pod must be filtered out)", live[0].Type)
	}
	select {
	case ev := <-w2.Events:
		t.Fatalf("unexpected event past the selector: %s %s", ev.Type, ev.Object)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestWatchFromCompactedHistoryExpires(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	for i := range 3 {
		if err := s.CreatePod(ctx, pod(fmt.Sprintf("p%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Compact(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("compaction removed nothing")
	}
	if _, err := s.Pods().Watch(ctx, store.WatchOptions{ResourceVersion: 1}); !errors.Is(err, store.ErrExpired) {
		t.Fatalf("watch from compacted history: got %v, want ErrExpired", err)
	}
}

func TestListAllReadsEveryPage(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	for i := range 7 {
		if err := s.CreatePod(ctx, pod(fmt.Sprintf("p%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Pods().ListAll(ctx, store.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 7 || all[0].Metadata.Name != "p0" || all[6].Metadata.Name != "p6" {
		t.Fatalf("ListAll over pages of 3 gave %d pods", len(all))
	}
}

func TestModifyRetriesAfterAConcurrentWrite(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	if err := s.CreatePod(ctx, pod("web", nil)); err != nil {
		t.Fatal(err)
	}
	calls := 0
	got, err := s.Pods().Modify(ctx, "default", "web", func(p *model.Pod) bool {
		calls++
		if calls == 1 { // someone else writes between our read and our write
			other, err := s.Pods().Get(ctx, "default", "web")
			if err != nil {
				t.Fatal(err)
			}
			other.Metadata.Labels = map[string]string{"by": "other"}
			if err := s.Pods().Update(ctx, other); err != nil {
				t.Fatal(err)
			}
		}
		p.Status.Phase = model.PodRunning
		return true
	})
	if err != nil || calls != 2 {
		t.Fatalf("Modify: err %v after %d calls; want a second read after the conflict", err, calls)
	}
	stored, _ := s.Pods().Get(ctx, "default", "web")
	if stored.Status.Phase != model.PodRunning || stored.Metadata.Labels["by"] != "other" || got.Metadata.ResourceVersion != stored.Metadata.ResourceVersion {
		t.Fatalf("stored %+v %+v; want both writes kept", stored.Status, stored.Metadata.Labels)
	}
	if _, err := s.Pods().Modify(ctx, "default", "gone", func(*model.Pod) bool { return true }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Modify of a missing pod: %v; want ErrNotFound", err)
	}
}

// Writers that conflict read the current row inside their own
// transaction: were it read through the pool while the change lock is
// held, writers holding every other connection and waiting for the lock
// would leave the holder waiting for a connection for ever.
func TestConflictingUpdatesDoNotExhaustThePool(t *testing.T) {
	s := newStore(t) // a pool of 16 connections
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	p := pod("web", nil)
	if err := s.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	stale := *p
	fresh := *p
	if err := s.Pods().Update(ctx, &fresh); err != nil {
		t.Fatal(err)
	}
	const writers = 64
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := stale
			mine.Metadata.Labels = map[string]string{"writer": fmt.Sprint(i)}
			errs[i] = s.Pods().Update(ctx, &mine)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("writer %d with a stale resourceVersion: got %v, want ErrConflict (a deadline here is a pool deadlock)", i, err)
		}
	}
}

// UpdateMany writes several objects in one transaction: each written one
// gets a version of its own, stored and announced to watchers as its own
// change, and one whose version is stale or that is gone is left out with
// its error while the others are written.
func TestUpdateManyWritesEachAndLeavesTheStaleOut(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	var pods []*model.Pod
	for i := range 4 {
		p := pod(fmt.Sprintf("m%d", i), nil)
		if err := s.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	list, err := s.Pods().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var from int64
	fmt.Sscan(list.Metadata.ResourceVersion, &from)
	w, err := s.Pods().Watch(ctx, store.WatchOptions{ResourceVersion: from})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	stale := *pods[2]
	if err := s.Pods().Update(ctx, pods[2]); err != nil { // stale is now a version behind
		t.Fatal(err)
	}
	if _, err := s.Pods().Delete(ctx, "default", "m3", ""); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		p.Spec.NodeName = "n1"
	}
	stale.Spec.NodeName = "n1"
	failed, err := s.Pods().UpdateMany(ctx, []*model.Pod{pods[0], pods[1], &stale, pods[3]})
	if err != nil {
		t.Fatal(err)
	}
	if failed[0] != nil || failed[1] != nil || !errors.Is(failed[2], store.ErrConflict) || !errors.Is(failed[3], store.ErrNotFound) {
		t.Fatalf("failed %v: want m0 and m1 written, m2 a conflict, m3 not found", failed)
	}
	for _, name := range []string{"m0", "m1"} {
		got, err := s.Pods().Get(ctx, "default", name)
		if err != nil || got.Spec.NodeName != "n1" {
			t.Fatalf("%s after UpdateMany: %+v %v", name, got, err)
		}
	}
	if pods[0].Metadata.ResourceVersion == pods[1].Metadata.ResourceVersion {
		t.Fatalf("m0 and m1 share version %s", pods[0].Metadata.ResourceVersion)
	}
	// m2's own update, m3's deletion, then m0 and m1, each once, in order.
	evs := collect(t, w, 4)
	var last int64
	for i, ev := range evs {
		var p model.Pod
		_ = json.Unmarshal(ev.Object, &p)
		if ev.ResourceVersion <= last || p.Metadata.ResourceVersion != strconv.FormatInt(ev.ResourceVersion, 10) {
			t.Fatalf("event %d (%s %s at %d, object at %s) after %d", i, ev.Type, p.Metadata.Name, ev.ResourceVersion, p.Metadata.ResourceVersion, last)
		}
		last = ev.ResourceVersion
		if i >= 2 && (ev.Type != "MODIFIED" || p.Spec.NodeName != "n1" || p.Metadata.ResourceVersion != pods[i-2].Metadata.ResourceVersion) {
			t.Fatalf("event %d: %s of %s on %q at %s; want m%d's write on n1 at %s", i, ev.Type, p.Metadata.Name, p.Spec.NodeName, p.Metadata.ResourceVersion, i-2, pods[i-2].Metadata.ResourceVersion)
		}
	}
}

// The feed answers the notifications that piled up while it read with
// one catch-up, not one each: every catch-up is a barrier that holds
// every writer back. (Remove the loop after the wait in feed.listen to
// see about one catch-up a write.)
func TestTheFeedCatchesUpOnceForNotificationsThatPiledUp(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	w, err := s.Pods().Watch(ctx, store.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	before := s.FeedCatchUps()
	const writes = 300
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := g; i < writes; i += 16 {
				if err := s.CreatePod(ctx, pod(fmt.Sprintf("c%03d", i), nil)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	collect(t, w, writes)
	// The feed goes on answering notifications after their changes are
	// out (and catches up once a second when idle): counted 2 s later.
	time.Sleep(2 * time.Second)
	if n := s.FeedCatchUps() - before; n > writes/2 {
		t.Errorf("%d catch-ups for %d writes; want the piled-up notifications answered together", n, writes)
	} else {
		t.Logf("%d catch-ups for %d writes", n, writes)
	}
}

// A list at any version (resourceVersion=0) takes no barrier once the
// feed runs, holds every pod written before it, and a watch from its
// version misses no later write. Drop the AnyVersion branch of List to
// see it take the barrier.
func TestAListAtAnyVersionHoldsNoWriterBack(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	if err := s.CreatePod(ctx, pod("before-feed", nil)); err != nil {
		t.Fatal(err)
	}
	// Nothing follows the feed yet: the list takes the barrier.
	before := s.SettledReads()
	if _, err := s.Pods().List(ctx, store.ListOptions{AnyVersion: true}); err != nil {
		t.Fatal(err)
	}
	if n := s.SettledReads() - before; n != 1 {
		t.Fatalf("without a feed, a list at any version took %d barriers; want 1", n)
	}
	w, err := s.Pods().Watch(ctx, store.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := range 5 {
		if err := s.CreatePod(ctx, pod(fmt.Sprintf("a%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	before = s.SettledReads()
	list, err := s.Pods().List(ctx, store.ListOptions{AnyVersion: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.SettledReads() - before; n != 0 {
		t.Fatalf("a list at any version took %d barriers; want none", n)
	}
	if len(list.Items) != 6 {
		t.Fatalf("the list holds %d pods; want the 6 written before it", len(list.Items))
	}
	rv, err := strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePod(ctx, pod("after", nil)); err != nil {
		t.Fatal(err)
	}
	from, err := s.Pods().Watch(ctx, store.WatchOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer from.Stop()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-from.Events:
			var p model.Pod
			if err := json.Unmarshal(ev.Object, &p); err != nil {
				t.Fatal(err)
			}
			if p.Metadata.Name == "after" {
				return
			}
		case <-timeout:
			t.Fatalf("a watch from the list's version %d never delivered the pod written after it", rv)
		}
	}
}
