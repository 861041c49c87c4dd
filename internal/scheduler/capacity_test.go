package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/scheduler"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestParseCapacity(t *testing.T) {
	got, err := scheduler.ParseCapacity("image=omnios-r151054:4, size=large:2")
	if err != nil || len(got) != 2 || got[0] != (scheduler.CapacityLimit{Key: "image", Value: "omnios-r151054", Max: 4}) ||
		got[1] != (scheduler.CapacityLimit{Key: "size", Value: "large", Max: 2}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if got, err := scheduler.ParseCapacity(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %+v, %v", got, err)
	}
	for _, bad := range []string{"size=large", "size:2", "=large:2", "size=large:-1", "size=large:two"} {
		if _, err := scheduler.ParseCapacity(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A capacity of 2 for a label admits two pods carrying it; the third
// waits with reason CapacityExceeded, and when a slot frees it goes to
// the oldest waiting pod, not to a newer one that asks first.
func TestCapacityAdmitsInOrderOfArrival(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	if err := st.Nodes().Create(ctx, node("n0", "8", "16Gi", true)); err != nil {
		t.Fatal(err)
	}
	gpu := func(p *model.Pod) { p.Metadata.Labels = map[string]string{"lane": "gpu"} }
	for _, name := range []string{"a", "b", "c", "d"} {
		if err := st.CreatePod(ctx, pod(name, "100m", "64Mi", gpu)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // distinct creation times
	}
	if err := st.CreatePod(ctx, pod("other", "100m", "64Mi")); err != nil {
		t.Fatal(err)
	}
	capacity, _ := scheduler.ParseCapacity("lane=gpu:2")
	s := &scheduler.Scheduler{Store: st, Capacity: capacity}
	schedule := func(name string) scheduler.Decision {
		t.Helper()
		d, err := s.Schedule(ctx, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		if d.Node == "" {
			// The lifecycle records why the pod waits.
			if _, err := st.Pods().Modify(ctx, "default", name, func(p *model.Pod) bool { p.Status.Reason = d.Reason; return true }); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	for _, name := range []string{"a", "b"} {
		if d := schedule(name); d.Node != "n0" {
			t.Fatalf("%s: %+v; want placed", name, d)
		}
	}
	if d := schedule("c"); d.Node != "" || d.Reason != scheduler.ReasonCapacityExceeded {
		t.Fatalf("c beyond the capacity: %+v; want CapacityExceeded", d)
	}
	if d := schedule("other"); d.Node != "n0" {
		t.Fatalf("a pod without the label: %+v; want placed", d)
	}
	a, _ := st.Pods().Get(ctx, "default", "a")
	a.Status.Phase = model.PodSucceeded
	if err := st.Pods().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	if d := schedule("d"); d.Node != "" || d.Reason != scheduler.ReasonCapacityExceeded {
		t.Fatalf("d, newer than the waiting c, took the freed slot: %+v", d)
	}
	if d := schedule("c"); d.Node != "n0" {
		t.Fatalf("c, the oldest waiting: %+v; want placed", d)
	}
}
