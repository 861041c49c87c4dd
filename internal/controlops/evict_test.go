package controlops_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
)

// slowSignals takes a while over each signal, as a loaded Temporal does,
// notes the most it was given at once, and refuses the pods in fail.
type slowSignals struct {
	podLifecycles
	mu             sync.Mutex
	inFlight, most int
	fail           map[string]bool
}

func (l *slowSignals) Signal(_ context.Context, _, name, _ string, _ any) error {
	l.mu.Lock()
	l.inFlight++
	l.most = max(l.most, l.inFlight)
	l.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	if l.fail[name] {
		return errors.New("context deadline exceeded")
	}
	return nil
}

// A drained node's pods are told to leave side by side, and one that
// cannot be told does not keep the others from being told: the count says
// how many were. One signal after another (evictInFlight 1), a node of
// 130 pods took minutes on a loaded Temporal and the first failure left
// the rest untold.
func TestANodesPodsAreToldToLeaveSideBySide(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	for i := range 6 {
		p := &model.Pod{Metadata: model.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: model.DefaultNamespace},
			Spec: model.PodSpec{NodeName: "n1", Containers: []model.Container{{Name: "a", Image: "i", Command: []string{"c"}}}}}
		model.DefaultPod(p)
		p.Status.Phase = model.PodRunning
		if err := st.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	sig := &slowSignals{fail: map[string]bool{"p0": true}}
	told, err := controlops.NewControl(st, sig).EvictNodePods(ctx, controlapi.EvictInput{Node: "n1"})
	if told != 5 || err == nil || !strings.Contains(err.Error(), "1 could not be") {
		t.Errorf("evict with one pod refused: %d told, %v; want 5 told and an error counting the one", told, err)
	}
	if sig.most < 2 {
		t.Errorf("at most %d signal(s) at once; want the pods told side by side", sig.most)
	}
}
