package roomfeed_test

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/roomfeed"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// A node uncordoned (through the store, as the API and node health write
// it) wakes the pods waiting for room with no call from the writer, and so
// does a pod leaving its node. Drop the room made in changeNode (or
// changePod) to see it fail.
func TestRoomMadeWakesTheWaitingPods(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	ready := []model.NodeCondition{{Type: model.NodeReady, Status: model.ConditionTrue}}
	n := &model.Node{Metadata: model.ObjectMeta{Name: "n1"}, Spec: model.NodeSpec{Unschedulable: true}, Status: model.NodeStatus{Conditions: ready}}
	if err := st.Nodes().Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	bound := &model.Pod{Metadata: model.ObjectMeta{Name: "bound", Namespace: model.DefaultNamespace},
		Spec: model.PodSpec{NodeName: "n1", Containers: []model.Container{{Name: "a", Image: "i", Command: []string{"c"}}}}}
	model.DefaultPod(bound)
	bound.Status.Phase = model.PodRunning
	if err := st.CreatePod(ctx, bound); err != nil {
		t.Fatal(err)
	}

	var woken atomic.Int32
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&roomfeed.Follower{Store: st, Wake: func(context.Context) int { woken.Add(1); return 0 }, Log: slog.New(slog.DiscardHandler)}).Run(runCtx)
	}()
	t.Cleanup(func() { stop(); <-done })
	expect := func(want int32, after string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for woken.Load() < want && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := woken.Load(); got < want {
			t.Fatalf("%d wakes after %s; want %d", got, after, want)
		}
	}
	expect(1, "the first lists (changes may have been missed before)")

	if _, err := st.Nodes().Modify(ctx, "", "n1", func(n *model.Node) bool { n.Spec.Unschedulable = false; return true }); err != nil {
		t.Fatal(err)
	}
	expect(2, "the node was uncordoned")

	if _, err := st.Pods().Delete(ctx, model.DefaultNamespace, "bound", ""); err != nil {
		t.Fatal(err)
	}
	expect(3, "a pod bound to a node was removed")
}
