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
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
)

func newDeployment(t *testing.T, st *store.Store, name, image string, replicas int32) *model.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &model.Deployment{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
		Spec: model.DeploymentSpec{Replicas: &replicas, Selector: &model.LabelSelector{MatchLabels: labels},
			Template: model.PodTemplate{Metadata: model.TemplateMeta{Labels: labels},
				Spec: model.PodSpec{Containers: []model.Container{{Name: "app", Image: image, Command: []string{"sleep", "1000"}}}}}}}
	model.DefaultDeployment(d)
	if errs := model.ValidateDeployment(d); len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, err := st.CreateDeployment(context.Background(), d, store.PodImages{}); err != nil {
		t.Fatal(err)
	}
	return d
}

func newJob(t *testing.T, st *store.Store, name, image string, parallelism int32) *model.Job {
	t.Helper()
	j := &model.Job{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
		Spec: model.JobSpec{Parallelism: &parallelism, Completions: &parallelism,
			Template: model.PodTemplate{Spec: model.PodSpec{Containers: []model.Container{{Name: "app", Image: image, Command: []string{"true"}}}}}}}
	model.DefaultJob(j)
	if errs := model.ValidateJob(j); len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, err := st.CreateJob(context.Background(), j, store.PodImages{}); err != nil {
		t.Fatal(err)
	}
	return j
}

func newImage(t *testing.T, st *store.Store, name string) {
	t.Helper()
	if err := st.Images().Create(context.Background(), &model.Image{Metadata: model.ObjectMeta{Name: name}, Spec: model.ImageSpec{Kind: model.ImageZoneTemplate}}); err != nil {
		t.Fatal(err)
	}
}

// podsOf counts the pods whose controller is the named object.
func podsOf(t *testing.T, st *store.Store, kind, name string) int {
	t.Helper()
	pods, err := st.Pods().ListAll(context.Background(), store.ListOptions{Namespace: model.DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods {
		if o := model.ControllerOf(&p.Metadata); o != nil && o.Kind == kind && o.Name == name {
			n++
		}
	}
	return n
}

// failedCreates lists the FailedCreate events of the named object.
func failedCreates(t *testing.T, st *store.Store, kind, name string) []string {
	t.Helper()
	evs, err := st.Events().ListAll(context.Background(), store.ListOptions{Namespace: model.DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == model.ReasonFailedCreate {
			out = append(out, e.Message)
		}
	}
	return out
}

// A deployment or a job whose template names an image missing from the
// catalog, or being deleted, creates no pod: it says why in a
// ReplicaFailure condition and one FailedCreate event, asks to be synced
// again after a back-off, and creates its pods once the image is back.
func TestControllersCreateNoPodOfAMissingImage(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	ctl := controlops.NewControl(st, nil)
	ref := controlapi.DeploymentRef{Namespace: model.DefaultNamespace, Name: "web"}
	newDeployment(t, st, "web", "base", 2)

	for range 2 {
		res, err := ctl.SyncDeployment(ctx, ref)
		if err != nil {
			t.Fatalf("sync with the image missing: %v", err)
		}
		if res.WakeAfter <= 0 || res.WakeAfter > 5*time.Second {
			t.Fatalf("sync with the image missing asks to be woken after %s; want a retry within 5s", res.WakeAfter)
		}
	}
	if n := podsOf(t, st, model.KindDeployment, "web"); n != 0 {
		t.Fatalf("%d pods of a missing image", n)
	}
	d, err := st.Deployments().Get(ctx, ref.Namespace, ref.Name)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Status.Condition(model.ConditionReplicaFailure)
	if c == nil || c.Status != model.ConditionTrue || c.Reason != model.ReasonFailedCreate ||
		!strings.Contains(c.Message, "spec.template.spec.containers[0].image") || !strings.Contains(c.Message, `"base"`) {
		t.Fatalf("ReplicaFailure condition: %+v; want True, FailedCreate, naming the image and its field", c)
	}
	if evs := failedCreates(t, st, model.KindDeployment, "web"); len(evs) != 1 {
		t.Fatalf("FailedCreate events after two failed syncs: %q; want one", evs)
	}

	newImage(t, st, "base")
	if _, err := ctl.SyncDeployment(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if n := podsOf(t, st, model.KindDeployment, "web"); n != 2 {
		t.Fatalf("%d pods once the image is back; want 2", n)
	}
	if d, err = st.Deployments().Get(ctx, ref.Namespace, ref.Name); err != nil || d.Status.Condition(model.ConditionReplicaFailure) != nil {
		t.Fatalf("ReplicaFailure stays once pods are created: %+v %v", d.Status.Conditions, err)
	}

	// A job of an image being deleted.
	newImage(t, st, "batch")
	if _, err := st.MarkImageDeleting(ctx, "batch", ""); err != nil {
		t.Fatal(err)
	}
	jref := controlapi.JobRef{Namespace: model.DefaultNamespace, Name: "sum"}
	newJob(t, st, "sum", "batch", 3)
	res, err := ctl.SyncJob(ctx, jref)
	if err != nil || res.WakeAfter <= 0 {
		t.Fatalf("job sync with its image deleting: %+v %v; want no error and a retry", res, err)
	}
	j, err := st.Jobs().Get(ctx, jref.Namespace, jref.Name)
	if err != nil {
		t.Fatal(err)
	}
	jc := j.Status.Condition(model.ConditionReplicaFailure)
	if n := podsOf(t, st, model.KindJob, "sum"); n != 0 || j.Status.Active != 0 || jc == nil || jc.Reason != model.ReasonFailedCreate ||
		!strings.Contains(jc.Message, "being deleted") || j.Status.Finished() != nil {
		t.Fatalf("job of a deleting image: %d pods, status %+v; want none active and a FailedCreate condition", n, j.Status)
	}
	if evs := failedCreates(t, st, model.KindJob, "sum"); len(evs) != 1 {
		t.Fatalf("FailedCreate events of the job: %q; want one", evs)
	}
	if _, err := st.Images().Delete(ctx, "", "batch", ""); err != nil {
		t.Fatal(err)
	}
	newImage(t, st, "batch")
	if _, err := ctl.SyncJob(ctx, jref); err != nil {
		t.Fatal(err)
	}
	j, err = st.Jobs().Get(ctx, jref.Namespace, jref.Name)
	if n := podsOf(t, st, model.KindJob, "sum"); err != nil || n != 3 || j.Status.Active != 3 || j.Status.Condition(model.ConditionReplicaFailure) != nil {
		t.Fatalf("job once its image is back: %d pods, status %+v, %v; want 3 active and no ReplicaFailure", n, j.Status, err)
	}
}

// Pods a controller creates while their image is being deleted are
// either refused (the controller says so) or counted by the deletion:
// never a pod naming a deleted image.
func TestControllerPodCreatesDoNotRaceImageDeletion(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	ctl := controlops.NewControl(st, nil)
	const rounds, replicas = 16, 4
	for round := range rounds {
		img := fmt.Sprintf("img-%d", round)
		newImage(t, st, img)
		dep, job := fmt.Sprintf("d%d", round), fmt.Sprintf("j%d", round)
		newDeployment(t, st, dep, img, replicas)
		newJob(t, st, job, img, replicas)
		var wg sync.WaitGroup
		var depErr, jobErr, markErr error
		wg.Add(3)
		go func() {
			defer wg.Done()
			_, depErr = ctl.SyncDeployment(ctx, controlapi.DeploymentRef{Namespace: model.DefaultNamespace, Name: dep})
		}()
		go func() {
			defer wg.Done()
			_, jobErr = ctl.SyncJob(ctx, controlapi.JobRef{Namespace: model.DefaultNamespace, Name: job})
		}()
		go func() {
			defer wg.Done()
			// A little later each round, so that some rounds mark
			// before the syncs' creates and some after.
			time.Sleep(time.Duration(round) * 150 * time.Microsecond)
			_, markErr = st.MarkImageDeleting(ctx, img, "")
		}()
		wg.Wait()
		if depErr != nil || jobErr != nil {
			t.Fatalf("round %d: syncs: %v, %v", round, depErr, jobErr)
		}
		users, err := st.PodsUsingImage(ctx, img)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case markErr == nil && len(users) > 0:
			t.Fatalf("round %d: image %s marked deleting while pods %v use it", round, img, users)
		case markErr != nil && len(users) == 0:
			t.Fatalf("round %d: deletion refused (%v) yet no pod uses the image", round, markErr)
		}
		d, err := st.Deployments().Get(ctx, model.DefaultNamespace, dep)
		if err != nil {
			t.Fatal(err)
		}
		if n := podsOf(t, st, model.KindDeployment, dep); n < replicas && d.Status.Condition(model.ConditionReplicaFailure) == nil {
			t.Fatalf("round %d: deployment has %d of %d pods and no ReplicaFailure condition", round, n, replicas)
		}
		j, err := st.Jobs().Get(ctx, model.DefaultNamespace, job)
		if err != nil {
			t.Fatal(err)
		}
		if n := podsOf(t, st, model.KindJob, job); int32(n) != j.Status.Active || (n < replicas && j.Status.Condition(model.ConditionReplicaFailure) == nil) {
			t.Fatalf("round %d: job has %d of %d pods, status %+v; want active to count them and a ReplicaFailure when short", round, n, replicas, j.Status)
		}
	}
}

// Syncs of one deployment or job that overlap (a retried attempt started
// while the first, late with its heartbeat, still runs; or two control
// planes) create its pods once between them, not once each. Make
// oneSyncAtATime call fn without the lock to see it fail.
func TestOverlappingSyncsCreateEachPodOnce(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	newImage(t, st, "base")
	const replicas, syncs = 12, 4
	newDeployment(t, st, "web", "base", replicas)
	newJob(t, st, "batch", "base", replicas)
	var wg sync.WaitGroup
	errs := make(chan error, 2*syncs)
	for range syncs {
		// Each as its own control plane would.
		ctl := controlops.NewControl(st, nil)
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := ctl.SyncDeployment(ctx, controlapi.DeploymentRef{Namespace: model.DefaultNamespace, Name: "web"})
			errs <- err
		}()
		go func() {
			defer wg.Done()
			_, err := ctl.SyncJob(ctx, controlapi.JobRef{Namespace: model.DefaultNamespace, Name: "batch"})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	if n := podsOf(t, st, model.KindDeployment, "web"); n != replicas {
		t.Errorf("%d overlapping syncs made %d pods of a deployment of %d replicas", syncs, n, replicas)
	}
	if n := podsOf(t, st, model.KindJob, "batch"); n != replicas {
		t.Errorf("%d overlapping syncs made %d pods of a job of parallelism %d", syncs, n, replicas)
	}
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// lifecycles starts nothing, failing the first start.
type lifecycles struct {
	noForcedEnds
	mu      sync.Mutex
	started []string
	failed  string
}

func (l *lifecycles) Start(_ context.Context, ref controlapi.PodRef) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == "" {
		l.failed = ref.Name
		return errors.New("Temporal is not answering")
	}
	l.started = append(l.started, ref.Name)
	return nil
}

func (l *lifecycles) Running(context.Context, string, string) (bool, error) { return false, nil }

func (l *lifecycles) RunningPods(context.Context) (map[controlapi.PodName]bool, error) {
	return nil, nil
}

func (l *lifecycles) Signal(context.Context, string, string, string, any) error { return nil }

// A pod whose lifecycle could not start (Temporal not answering, the
// control plane stopping mid-sync) stays for the reconciler, and the next
// sync makes no other in its place: a control plane restarted mid-rollout
// made 31 pods of 30. Drop KeepWithoutLifecycle in createOwnedPod to see
// it fail.
func TestAPodWhoseLifecycleDidNotStartIsNotMadeAgain(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	newImage(t, st, "base")
	lc := &lifecycles{}
	ctl := controlops.NewControl(st, lc)
	const replicas = 3
	newDeployment(t, st, "web", "base", replicas)
	ref := controlapi.DeploymentRef{Namespace: model.DefaultNamespace, Name: "web"}
	if _, err := ctl.SyncDeployment(ctx, ref); err == nil {
		t.Fatal("a sync whose lifecycle start failed reported no error (it must be retried)")
	}
	if _, err := ctl.SyncDeployment(ctx, ref); err != nil {
		t.Fatal(err)
	}
	pods, err := st.Pods().ListAll(ctx, store.ListOptions{Namespace: model.DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	kept := false
	for _, p := range pods {
		names = append(names, p.Metadata.Name)
		kept = kept || p.Metadata.Name == lc.failed
	}
	if len(pods) != replicas || !kept {
		t.Fatalf("pods %v after a failed lifecycle start of %s; want %d, that one among them", names, lc.failed, replicas)
	}
	if made := len(lc.started) + 1; made != replicas {
		t.Fatalf("%d pods made (lifecycles started %v, failed %s); want %d", made, lc.started, lc.failed, replicas)
	}
}
