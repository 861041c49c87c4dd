package controlops_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// podLifecycles starts with startErr and records what the pod service
// asks of the lifecycles; failing says they fail their workflow tasks.
type podLifecycles struct {
	mu         sync.Mutex
	startErr   error
	failing    bool
	signals    []string
	terminated []string
}

func (l *podLifecycles) Start(context.Context, controlapi.PodRef) error { return l.startErr }
func (l *podLifecycles) Running(context.Context, string, string) (bool, error) {
	return true, nil
}
func (l *podLifecycles) RunningPods(context.Context) (map[controlapi.PodName]bool, error) {
	return nil, nil
}
func (l *podLifecycles) Signal(_ context.Context, _, _, signal string, _ any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.signals = append(l.signals, signal)
	return nil
}
func (l *podLifecycles) FailingTasks(context.Context, string, string) (bool, error) {
	return l.failing, nil
}
func (l *podLifecycles) Terminate(_ context.Context, _, name, _ string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.terminated = append(l.terminated, name)
	return nil
}

func newPod(name string) *model.Pod {
	p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "a", Image: "base", Command: []string{"c"}}}}}
	model.DefaultPod(p)
	return p
}

// A pod created for a caller who hears the failure (an API create) does
// not stay without its lifecycle: the row goes again, and the error says
// it was the lifecycle's. Drop the row's deletion in Pods.Create to see
// it fail.
func TestAPodWhoseLifecycleCannotStartIsNotKept(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	newImage(t, st, "base")
	ctl := controlops.NewControl(st, &podLifecycles{startErr: errors.New("Temporal is not answering")})
	_, err := ctl.Pods().Create(ctx, newPod("web"), controlops.PodCreate{})
	if le := (*controlops.LifecycleError)(nil); !errors.As(err, &le) {
		t.Fatalf("create whose lifecycle did not start: %v; want a LifecycleError", err)
	}
	if _, err := st.Pods().Get(ctx, model.DefaultNamespace, "web"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the pod's row after its lifecycle failed to start: %v; want it gone", err)
	}
}

// Every pod's deletion takes the same way, a controller's as the API's:
// a forced one (grace 0) of a pod whose lifecycle fails its workflow
// tasks ends that lifecycle and removes the row, which the lifecycle
// never would. Drop the FailingTasks branch of Pods.terminate to see it
// fail.
func TestAForcedDeleteEndsAPodWhoseLifecycleIsStuck(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	newImage(t, st, "base")
	lc := &podLifecycles{failing: true}
	ctl := controlops.NewControl(st, lc)
	if _, err := ctl.Pods().Create(ctx, newPod("web"), controlops.PodCreate{}); err != nil {
		t.Fatal(err)
	}
	other := "another incarnation"
	if _, err := ctl.Pods().Delete(ctx, model.DefaultNamespace, "web", controlops.PodDelete{UID: &other}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete with another UID as precondition: %v; want a conflict", err)
	}
	zero := int64(0)
	if _, err := ctl.Pods().Delete(ctx, model.DefaultNamespace, "web", controlops.PodDelete{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if len(lc.signals) != 1 || lc.signals[0] != podcontract.SignalTerminate || len(lc.terminated) != 1 {
		t.Fatalf("signals %v, terminated %v; want one terminate signal, then the lifecycle ended", lc.signals, lc.terminated)
	}
	if _, err := st.Pods().Get(ctx, model.DefaultNamespace, "web"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the pod's row after a forced delete: %v; want it gone", err)
	}
}
