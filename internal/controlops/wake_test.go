package controlops_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/storetest"
)

// wakes records the pods woken.
type wakes struct {
	mu    sync.Mutex
	names []string
}

func (w *wakes) Start(context.Context, controlops.PodRef) error                   { return nil }
func (w *wakes) Running(context.Context, string, string) (bool, error)            { return true, nil }
func (w *wakes) RunningPods(context.Context) (map[controlops.PodName]bool, error) { return nil, nil }
func (w *wakes) Signal(_ context.Context, _, name, signal string, _ any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if signal == controlops.SignalWake {
		w.names = append(w.names, name)
	}
	return nil
}

// Room made wakes the pods no node fitted, the oldest first and a bounded
// number of them; pods pending for another reason are left alone.
func TestWakeUnschedulableWakesTheOldestFew(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	mk := func(name, reason string) {
		p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
			Spec: model.PodSpec{Containers: []model.Container{{Name: "a", Image: "i", Command: []string{"c"}}}}}
		model.DefaultPod(p)
		p.Status = model.PodStatus{Phase: model.PodPending, Reason: reason}
		if err := st.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	mk("pulling", "ImagePulling")
	var want []string
	for i := range 30 {
		name := fmt.Sprintf("w%02d", 29-i) // created in reverse name order
		mk(name, controlops.ReasonUnschedulable)
		if len(want) < 20 {
			want = append(want, name)
		}
	}
	w := &wakes{}
	if n := controlops.WakeUnschedulable(ctx, st, w); n != 20 || !slices.Equal(w.names, want) {
		t.Fatalf("woke %d: %v; want the 20 oldest %v", n, w.names, want)
	}
}
