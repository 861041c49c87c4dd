package controlops_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// wakes records the pods woken.
type wakes struct {
	noForcedEnds
	mu    sync.Mutex
	names []string
}

func (w *wakes) Start(context.Context, controlapi.PodRef) error                   { return nil }
func (w *wakes) Running(context.Context, string, string) (bool, error)            { return true, nil }
func (w *wakes) RunningPods(context.Context) (map[controlapi.PodName]bool, error) { return nil, nil }
func (w *wakes) Signal(_ context.Context, _, name, signal string, _ any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if signal == podcontract.SignalWake {
		w.names = append(w.names, name)
	}
	return nil
}

// noForcedEnds is the part of a test's Lifecycles a forced delete asks:
// no lifecycle fails its workflow tasks.
type noForcedEnds struct{}

func (noForcedEnds) FailingTasks(context.Context, string, string) (bool, error) { return false, nil }
func (noForcedEnds) Terminate(context.Context, string, string, string) error    { return nil }

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
		mk(name, podcontract.ReasonUnschedulable)
		if len(want) < 20 {
			want = append(want, name)
		}
	}
	w := &wakes{}
	if n := controlops.WakeUnschedulable(ctx, st, w); n != 20 || !slices.Equal(w.names, want) {
		t.Fatalf("woke %d: %v; want the 20 oldest %v", n, w.names, want)
	}
}

// waiter creates a pod bound to node with status phase and reason.
func waiter(t *testing.T, st *store.Store, name, node, image, phase, reason string) *model.Pod {
	t.Helper()
	p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
		Spec: model.PodSpec{NodeName: node, Containers: []model.Container{{Name: "a", Image: image, Command: []string{"c"}}}}}
	model.DefaultPod(p)
	p.Status = model.PodStatus{Phase: phase, Reason: reason}
	if err := st.CreatePod(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// A pull's end wakes every pod on the node that is not running yet and
// whose zone is made from the image, whatever its status says: a pod that
// found the image missing may not have written ImagePulling when the pull
// ends (the race), and it must not wait for its next periodic look.
func TestWakeImageWaitersChoosesThePodsThatNeedTheImage(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	waiter(t, st, "pulling", "n1", "base", model.PodPending, podcontract.ReasonImagePulling)
	waiter(t, st, "backing-off", "n1", "base", model.PodPending, podcontract.ReasonImagePullBackOff)
	waiter(t, st, "not-yet-waiting", "n1", "base", model.PodPending, "") // bound; its ImagePulling status not written yet
	waiter(t, st, "no-phase-yet", "n1", "base", "", "")                  // bound; no status written at all
	waiter(t, st, "running", "n1", "base", model.PodRunning, "")
	waiter(t, st, "finished", "n1", "base", model.PodFailed, "Error")
	waiter(t, st, "other-image", "n1", "other", model.PodPending, podcontract.ReasonImagePulling)
	waiter(t, st, "other-node", "n2", "base", model.PodPending, podcontract.ReasonImagePulling)
	w := &wakes{}
	ctl := controlops.NewControl(st, w)
	n, err := ctl.WakeImageWaiters(ctx, controlapi.ImageNodeInput{Image: "base", Node: "n1"})
	slices.Sort(w.names)
	if want := []string{"backing-off", "no-phase-yet", "not-yet-waiting", "pulling"}; err != nil || n != 4 || !slices.Equal(w.names, want) {
		t.Fatalf("woke %d %v (%v); want %v", n, w.names, err, want)
	}
}

// An address released on a full node wakes the pods bound there that hold
// none (the IP-exhausted waiters, whatever their status says yet); pods
// holding one, running ones and another node's are left alone.
func TestReleasePodIPWakesThePodsWaitingForAnAddress(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	for _, name := range []string{"n1", "n2"} {
		n := &model.Node{Metadata: model.ObjectMeta{Name: name}, Spec: model.NodeSpec{PodCIDR: "10.0.0.0/29"}}
		model.DefaultNode(n)
		if err := st.Nodes().Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	w := &wakes{}
	ctl := controlops.NewControl(st, w)
	ref := func(p *model.Pod) controlapi.PodRef {
		return controlapi.PodRef{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}
	}
	allocate := func(p *model.Pod) controlapi.AllocateResult {
		t.Helper()
		res, err := ctl.AllocatePodIP(ctx, controlapi.AllocateInput{Pod: ref(p), Node: p.Spec.NodeName})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// A /29 holds 5 pods besides the gateway.
	var holders []*model.Pod
	for i := range 5 {
		phase := model.PodRunning
		if i == 4 {
			phase = model.PodPending // holds its address, waits for its image
		}
		p := waiter(t, st, fmt.Sprintf("holder-%d", i), "n1", "base", phase, "")
		if res := allocate(p); res.IP == "" {
			t.Fatalf("%s got no address: %s", p.Metadata.Name, res.Exhausted)
		}
		holders = append(holders, p)
	}
	exhausted := waiter(t, st, "exhausted", "n1", "base", model.PodPending, "IPExhausted")
	notYet := waiter(t, st, "not-yet-waiting", "n1", "base", model.PodPending, "")
	waiter(t, st, "other-node", "n2", "base", model.PodPending, "IPExhausted")
	for _, p := range []*model.Pod{exhausted, notYet} {
		if res := allocate(p); res.Exhausted == "" {
			t.Fatalf("%s got %s from a full node", p.Metadata.Name, res.IP)
		}
	}
	if len(w.names) != 0 {
		t.Fatalf("woke %v before any address was freed", w.names)
	}
	if err := ctl.ReleasePodIP(ctx, ref(holders[0])); err != nil {
		t.Fatal(err)
	}
	slices.Sort(w.names)
	if want := []string{"exhausted", "not-yet-waiting"}; !slices.Equal(w.names, want) {
		t.Fatalf("a release woke %v; want %v", w.names, want)
	}
	if res := allocate(exhausted); res.IP == "" {
		t.Fatalf("the woken pod found no address: %s", res.Exhausted)
	}
	w.names = nil
	if err := ctl.ReleasePodIP(ctx, ref(holders[0])); err != nil || len(w.names) != 0 {
		t.Fatalf("releasing nothing woke %v (%v)", w.names, err)
	}
}
