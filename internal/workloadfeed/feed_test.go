package workloadfeed_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
	"github.com/zonewright/zonewright/internal/workloadfeed"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// wakes records the wakes of one kind's workflows.
type wakes struct {
	mu    sync.Mutex
	names []string
}

func (w *wakes) Wake(_ context.Context, ns, name string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.names = append(w.names, ns+"/"+name)
	return nil
}
func (w *wakes) Ensure(context.Context, string, string) error { return nil }

func (w *wakes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.names)
}

// A deployment's workflow is woken by what it acts on (a new generation,
// a pod Ready, terminating or gone, a deletion), and not by its own writes
// (its status, the pods it creates), which would make it sync forever.
func TestWakesOnlyForChangesTheWorkflowActsOn(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	deps, jobs := &wakes{}, &wakes{}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&workloadfeed.Follower{Store: st, Deployments: deps, Jobs: jobs, Log: slog.New(slog.DiscardHandler),
			Gather: 10 * time.Millisecond, GatherWindow: 50 * time.Millisecond}).Run(runCtx)
	}()
	t.Cleanup(func() { stop(); <-done })

	d := &model.Deployment{Metadata: model.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: model.DeploymentSpec{Selector: &model.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := st.CreateDeployment(ctx, d, store.PodImages{}); err != nil {
		t.Fatal(err)
	}
	expect := func(w *wakes, want int, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for w.count() < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // nothing more may come
		if got := w.count(); got != want {
			t.Fatalf("after %s: %d wakes; want %d (%v)", what, got, want, w.names)
		}
	}
	expect(deps, 1, "the deployment's creation")

	// Its own status write: no wake.
	if _, err := st.Deployments().Modify(ctx, "default", "web", func(d *model.Deployment) bool { d.Status.Replicas = 1; return true }); err != nil {
		t.Fatal(err)
	}
	expect(deps, 1, "a status write")
	// A spec change: a wake.
	if _, err := st.Deployments().Modify(ctx, "default", "web", func(d *model.Deployment) bool { one := int32(1); d.Spec.Replicas = &one; return true }); err != nil {
		t.Fatal(err)
	}
	expect(deps, 2, "a spec change")

	// The pod it creates, and the pod's scheduling: no wake.
	yes := true
	p := &model.Pod{Metadata: model.ObjectMeta{Name: "web-abc-x", Namespace: "default", Labels: map[string]string{"app": "web"},
		OwnerReferences: []model.OwnerReference{{APIVersion: "apps/v1", Kind: model.KindDeployment, Name: "web", UID: d.Metadata.UID, Controller: &yes}}},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "c", Image: "i", Command: []string{"x"}}}}}
	if err := st.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pods().Modify(ctx, "default", "web-abc-x", func(p *model.Pod) bool { p.Spec.NodeName = "n1"; return true }); err != nil {
		t.Fatal(err)
	}
	expect(deps, 2, "its pod's creation and scheduling")
	// Ready: a wake. Terminating: a wake. Gone: a wake.
	if _, err := st.Pods().Modify(ctx, "default", "web-abc-x", func(p *model.Pod) bool {
		p.Status.Conditions = []model.PodCondition{{Type: model.PodReady, Status: model.ConditionTrue}}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	expect(deps, 3, "its pod becoming Ready")
	if _, err := st.Pods().Modify(ctx, "default", "web-abc-x", func(p *model.Pod) bool { now := time.Now(); p.Metadata.DeletionTimestamp = &now; return true }); err != nil {
		t.Fatal(err)
	}
	expect(deps, 4, "its pod terminating")
	if _, err := st.Pods().Delete(ctx, "default", "web-abc-x", ""); err != nil {
		t.Fatal(err)
	}
	expect(deps, 5, "its pod gone")

	// A job wakes the jobs' workflows, not the deployments'.
	j := &model.Job{Metadata: model.ObjectMeta{Name: "pi", Namespace: "default"}}
	if _, err := st.CreateJob(ctx, j, store.PodImages{}); err != nil {
		t.Fatal(err)
	}
	expect(jobs, 1, "a job's creation")
	expect(deps, 5, "a job's creation")
}

// A deployment or a job that could not create its pods (ReplicaFailure)
// is woken when a new image enters the catalog, as that may be the image
// it lacks; one that creates its pods is not.
func TestWakesThoseThatCannotCreatePodsWhenAnImageArrives(t *testing.T) {
	st, ctx := storetest.New(t), context.Background()
	deps, jobs := &wakes{}, &wakes{}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&workloadfeed.Follower{Store: st, Deployments: deps, Jobs: jobs, Log: slog.New(slog.DiscardHandler),
			Gather: 10 * time.Millisecond, GatherWindow: 50 * time.Millisecond}).Run(runCtx)
	}()
	t.Cleanup(func() { stop(); <-done })
	expect := func(w *wakes, want int, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for w.count() < want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // nothing more may come
		if got := w.count(); got != want {
			t.Fatalf("after %s: %d wakes; want %d (%v)", what, got, want, w.names)
		}
	}
	for _, name := range []string{"web", "ok"} {
		d := &model.Deployment{Metadata: model.ObjectMeta{Name: name, Namespace: "default"},
			Spec: model.DeploymentSpec{Selector: &model.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
		if _, err := st.CreateDeployment(ctx, d, store.PodImages{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.CreateJob(ctx, &model.Job{Metadata: model.ObjectMeta{Name: "pi", Namespace: "default"}}, store.PodImages{}); err != nil {
		t.Fatal(err)
	}
	expect(deps, 2, "the deployments' creation")
	expect(jobs, 1, "the job's creation")
	newImage := func(name string) {
		t.Helper()
		if err := st.Images().Create(ctx, &model.Image{Metadata: model.ObjectMeta{Name: name}, Spec: model.ImageSpec{Kind: model.ImageZoneTemplate}}); err != nil {
			t.Fatal(err)
		}
	}
	newImage("first")
	expect(deps, 2, "an image while none fails")

	now := time.Now()
	if _, err := st.Deployments().Modify(ctx, "default", "web", func(d *model.Deployment) bool {
		d.Status.SetCondition(model.DeploymentCondition{Type: model.ConditionReplicaFailure, Status: model.ConditionTrue, Reason: model.ReasonFailedCreate}, now)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Jobs().Modify(ctx, "default", "pi", func(j *model.Job) bool {
		model.SetCondition(&j.Status.Conditions, model.JobCondition{Type: model.ConditionReplicaFailure, Status: model.ConditionTrue, Reason: model.ReasonFailedCreate}, now)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	expect(deps, 2, "a ReplicaFailure status write")
	newImage("second")
	expect(deps, 3, "an image while web fails")
	expect(jobs, 2, "an image while the job fails")
	deps.mu.Lock()
	last := deps.names[len(deps.names)-1]
	deps.mu.Unlock()
	if last != "default/web" {
		t.Fatalf("woke %s; want default/web, the failing one", last)
	}
	if _, err := st.MarkImageDeleting(ctx, "second", ""); err != nil {
		t.Fatal(err)
	}
	expect(deps, 3, "an image being deleted")
}
