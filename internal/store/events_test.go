package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

func events(t *testing.T, s *store.Store) *model.List[model.Event] {
	t.Helper()
	list, err := s.Events().List(context.Background(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func TestARepeatedEventIsCountedOnOneRow(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	from := events(t, s).Metadata.ResourceVersion
	var rv int64
	fmt.Sscan(from, &rv)
	w, err := s.Events().Watch(ctx, store.WatchOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	web := model.ObjectReference{Kind: model.KindPod, Namespace: "default", Name: "web", UID: "6f1c2a3e-0000-4000-8000-000000000001"}
	before := time.Now()
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.RecordEvent(ctx, web, model.EventWarning, "BackOff", "restarting failed container", "test"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	list := events(t, s)
	if len(list.Items) != 1 {
		t.Fatalf("100 recordings of one event made %d rows, want 1", len(list.Items))
	}
	ev := list.Items[0]
	if ev.Count != 100 || ev.FirstTimestamp == nil || ev.LastTimestamp == nil ||
		ev.FirstTimestamp.Before(before.Truncate(time.Microsecond)) || ev.LastTimestamp.Before(*ev.FirstTimestamp) {
		t.Fatalf("counted event: count %d, first %v, last %v; want 100 since %v", ev.Count, ev.FirstTimestamp, ev.LastTimestamp, before)
	}
	// Watchers saw it added once and then counted, in order.
	seen := collect(t, w, 100)
	for i, we := range seen {
		var got model.Event
		if err := json.Unmarshal(we.Object, &got); err != nil {
			t.Fatal(err)
		}
		want := "MODIFIED"
		if i == 0 {
			want = "ADDED"
		}
		if we.Type != want || got.Count != i+1 || got.Metadata.Name != ev.Metadata.Name {
			t.Fatalf("watch event %d: %s %s count %d, want %s %s count %d", i, we.Type, got.Metadata.Name, got.Count, want, ev.Metadata.Name, i+1)
		}
	}

	// What differs is another event: the message, the reason, the object.
	for _, e := range []struct {
		obj             model.ObjectReference
		reason, message string
	}{
		{web, "BackOff", "back-off 20s restarting failed container"},
		{web, "Unhealthy", "restarting failed container"},
		{model.ObjectReference{Kind: model.KindPod, Namespace: "default", Name: "web", UID: "6f1c2a3e-0000-4000-8000-000000000002"}, "BackOff", "restarting failed container"},
		{model.ObjectReference{Kind: model.KindPersistentVolumeClaim, Namespace: "default", Name: "web"}, "BackOff", "restarting failed container"},
	} {
		if err := s.RecordEvent(ctx, e.obj, model.EventWarning, e.reason, e.message, "test"); err != nil {
			t.Fatal(err)
		}
	}
	list = events(t, s)
	if len(list.Items) != 5 {
		t.Fatalf("%d events after four different ones, want 5: %+v", len(list.Items), list.Items)
	}
	for _, e := range list.Items {
		if e.Metadata.Name != ev.Metadata.Name && e.Count != 1 {
			t.Errorf("event %s (%s %q) counted %d, want 1", e.Metadata.Name, e.Reason, e.Message, e.Count)
		}
	}
}

func TestExpiryDeletesInBatchesAndEveryDeletionReachesWatchers(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	const old = 1200
	node := func(i int) model.ObjectReference {
		return model.ObjectReference{Kind: model.KindNode, Name: fmt.Sprintf("n%d", i)}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < old; i += 8 {
				if err := s.RecordEvent(ctx, node(i), model.EventNormal, "Probe", "observed", "test"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// One more occurrence of an old event after the cutoff keeps it: events
	// expire by when they were last seen.
	time.Sleep(50 * time.Millisecond)
	cutoff := time.Now()
	time.Sleep(50 * time.Millisecond)
	if err := s.RecordEvent(ctx, node(7), model.EventNormal, "Probe", "observed", "test"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordEvent(ctx, node(7), model.EventNormal, "Fresh", "after the cutoff", "test"); err != nil {
		t.Fatal(err)
	}
	list := events(t, s)
	if len(list.Items) != old+1 {
		t.Fatalf("%d events, want %d", len(list.Items), old+1)
	}
	expiring := map[string]bool{}
	for _, e := range list.Items {
		if e.LastTimestamp.Before(cutoff) {
			expiring[e.Metadata.Name] = true
		}
	}
	if len(expiring) != old-1 {
		t.Fatalf("%d events last seen before the cutoff, want %d", len(expiring), old-1)
	}
	var rv int64
	fmt.Sscan(list.Metadata.ResourceVersion, &rv)
	w, err := s.Events().Watch(ctx, store.WatchOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)

	n, err := s.ExpireEvents(ctx, time.Since(cutoff))
	if err != nil || n != old-1 {
		t.Fatalf("expired %d events (%v), want %d", n, err, old-1)
	}
	var batches int
	if err := s.Pool().QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM changes WHERE kind = $1 AND type = 'DELETED'`,
		model.KindEvent).Scan(&batches); err != nil {
		t.Fatal(err)
	}
	if batches > 3 {
		t.Errorf("expiry took %d transactions, want at most 3", batches)
	}
	var last int64
	for _, we := range collect(t, w, old-1) {
		var e model.Event
		if err := json.Unmarshal(we.Object, &e); err != nil {
			t.Fatal(err)
		}
		if we.Type != "DELETED" || !expiring[e.Metadata.Name] || we.ResourceVersion <= last || e.Metadata.ResourceVersion != fmt.Sprint(we.ResourceVersion) {
			t.Fatalf("watch event %s %s at %d (object at %s) after %d: want each expired event DELETED once, at its own increasing version",
				we.Type, e.Metadata.Name, we.ResourceVersion, e.Metadata.ResourceVersion, last)
		}
		delete(expiring, e.Metadata.Name)
		last = we.ResourceVersion
	}
	left := events(t, s).Items
	if len(left) != 2 {
		t.Fatalf("%d events left, want the two seen after the cutoff: %+v", len(left), left)
	}
	for _, e := range left {
		if e.Reason == "Probe" && e.Count != 2 {
			t.Errorf("the old event seen again has count %d, want 2", e.Count)
		}
	}
}

func TestSimilarEventsAreCombinedPastTenInTheWindow(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	web := model.ObjectReference{Kind: model.KindPod, Namespace: "default", Name: "web", UID: "6f1c2a3e-0000-4000-8000-000000000001"}
	record := func(reason, message string) {
		t.Helper()
		if err := s.RecordEvent(ctx, web, model.EventWarning, reason, message, "test"); err != nil {
			t.Fatal(err)
		}
	}
	byMessage := func() map[string]model.Event {
		t.Helper()
		out := map[string]model.Event{}
		for _, e := range events(t, s).Items {
			out[e.Message] = e
		}
		return out
	}
	for i := range 9 {
		record("Unhealthy", fmt.Sprintf("probe output %d", i))
	}
	record("Unhealthy", "probe output 0") // a repeat is not another message
	if got := byMessage(); len(got) != 9 || got["probe output 0"].Count != 2 {
		t.Fatalf("nine messages, one twice: %+v", got)
	}
	// The tenth message starts the combination; later ones, and repeats
	// of earlier ones, count on it with their message.
	record("Unhealthy", "probe output 9")
	record("Unhealthy", "probe output 10")
	record("Unhealthy", "probe output 1")
	got := byMessage()
	combined, ok := got["(combined from similar events): probe output 1"]
	if len(got) != 10 || !ok || combined.Count != 3 || combined.Reason != "Unhealthy" || got["probe output 1"].Count != 1 {
		t.Fatalf("after ten messages: %+v; want the nine first and one combined event counted 3 with the latest message", got)
	}
	// Once the window passes without a similar event, messages stand
	// alone again.
	if _, err := s.Pool().Exec(ctx, "UPDATE events SET last_seen = last_seen - interval '11 minutes'"); err != nil {
		t.Fatal(err)
	}
	record("Unhealthy", "probe output 12")
	if got := byMessage()["probe output 12"]; got.Count != 1 {
		t.Fatalf("a message after the window: %+v; want an event of its own", got)
	}
	// Another reason is not similar.
	record("BackOff", "probe output 11")
	if got := byMessage()["probe output 11"]; got.Reason != "BackOff" || got.Count != 1 {
		t.Fatalf("an event of another reason: %+v", got)
	}
}
