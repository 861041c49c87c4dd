package controlops_test

import (
	"context"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
)

// An autoRevert's events follow its write: a revert whose write fails
// tells no one it happened, and one that lands is in the deployment
// before its event is, so a reader who saw the event (zwctl rollout
// status, the docs' walkthrough) finds the reverted template. (Record
// the events before the deployment's Update in writeStatus to see the
// failed revert announced.)
func TestARevertIsAnnouncedOnlyOnceWritten(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	ctl := controlops.NewControl(st, nil)
	newImage(t, st, "base")
	ref := controlapi.DeploymentRef{Namespace: model.DefaultNamespace, Name: "web"}
	newDeployment(t, st, "web", "base", 1)
	change := func(fn func(d *model.Deployment)) {
		t.Helper()
		if _, err := st.Deployments().Modify(ctx, ref.Namespace, ref.Name, func(d *model.Deployment) bool { fn(d); return true }); err != nil {
			t.Fatal(err)
		}
	}
	sync := func() error {
		_, err := ctl.SyncDeployment(ctx, ref)
		return err
	}
	pods := func() []model.Pod {
		t.Helper()
		ps, err := st.Pods().ListAll(ctx, store.ListOptions{Namespace: ref.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	rolledBack := func() int {
		t.Helper()
		evs, err := st.Events().ListAll(ctx, store.ListOptions{Namespace: ref.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.InvolvedObject.Name == ref.Name && (e.Reason == model.ReasonRolledBack || e.Reason == "RolloutFailed") {
				n++
			}
		}
		return n
	}

	change(func(d *model.Deployment) { d.Spec.AutoRevert, d.Spec.ProgressDeadlineSeconds = true, new(int32(1)) })
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	// Revision 1's pod is Ready: its rollout completes, and it is the
	// revision a failed rollout returns to.
	ps := pods()
	if len(ps) != 1 {
		t.Fatalf("%d pods of one replica", len(ps))
	}
	if _, err := st.Pods().Modify(ctx, ref.Namespace, ps[0].Metadata.Name, func(p *model.Pod) bool {
		p.Spec.NodeName = "n1"
		p.Status.Phase = model.PodRunning
		p.Status.Conditions = []model.PodCondition{{Type: model.PodReady, Status: model.ConditionTrue}}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	// Revision 2's pod never becomes Ready, and the 1 s progress deadline
	// passes.
	change(func(d *model.Deployment) { d.Spec.Template.Spec.Containers[0].Command = []string{"false"} })
	for range 2 { // the pod's creation, then the count it makes, are progress
		if err := sync(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1100 * time.Millisecond)

	// The revert's write fails.
	if _, err := st.Pool().Exec(ctx, `
		CREATE FUNCTION refuse_template_change() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.spec IS DISTINCT FROM OLD.spec THEN RAISE EXCEPTION 'refused for the test'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_template_change BEFORE UPDATE ON deployments FOR EACH ROW EXECUTE FUNCTION refuse_template_change();`); err != nil {
		t.Fatal(err)
	}
	if err := sync(); err == nil {
		t.Fatal("the sync whose revert could not be written succeeded")
	}
	if n := rolledBack(); n != 0 {
		t.Fatalf("%d events say a rollout failed and was reverted; the revert was never written", n)
	}
	d, err := st.Deployments().Get(ctx, ref.Namespace, ref.Name)
	if err != nil || d.Spec.Template.Spec.Containers[0].Command[0] != "false" {
		t.Fatalf("the deployment after a revert that failed: %+v %v", d.Spec.Template.Spec.Containers, err)
	}

	// Written, it is announced.
	if _, err := st.Pool().Exec(ctx, `DROP TRIGGER refuse_template_change ON deployments`); err != nil {
		t.Fatal(err)
	}
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	d, err = st.Deployments().Get(ctx, ref.Namespace, ref.Name)
	if err != nil || d.Spec.Template.Spec.Containers[0].Command[0] != "sleep" {
		t.Fatalf("the deployment after the revert: %+v %v", d.Spec.Template.Spec.Containers, err)
	}
	if n := rolledBack(); n != 2 {
		t.Fatalf("%d RolloutFailed and DeploymentRolledBack events after the revert; want one of each", n)
	}
}

// A rollout whose new pods are all available is the deployment's stable
// revision while its old pods still terminate: what `rollout status`
// reports done is what a failed rollout after it returns to. (Ask
// rollout.Counts.Complete for no old pod at all to see revision 1 stay
// stable, and a revert skip the revision said done.)
func TestARolloutReportedDoneIsStableWhileOldPodsTerminate(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	ctl := controlops.NewControl(st, nil)
	newImage(t, st, "base")
	ref := controlapi.DeploymentRef{Namespace: model.DefaultNamespace, Name: "web"}
	newDeployment(t, st, "web", "base", 1)
	sync := func() *model.Deployment {
		t.Helper()
		if _, err := ctl.SyncDeployment(ctx, ref); err != nil {
			t.Fatal(err)
		}
		d, err := st.Deployments().Get(ctx, ref.Namespace, ref.Name)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// ready makes the deployment's pods of the current template Ready.
	ready := func() {
		t.Helper()
		ps, err := st.Pods().ListAll(ctx, store.ListOptions{Namespace: ref.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Metadata.DeletionTimestamp != nil {
				continue
			}
			if _, err := st.Pods().Modify(ctx, ref.Namespace, p.Metadata.Name, func(p *model.Pod) bool {
				p.Spec.NodeName, p.Status.Phase = "n1", model.PodRunning
				p.Status.Conditions = []model.PodCondition{{Type: model.PodReady, Status: model.ConditionTrue}}
				return true
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sync()
	ready()
	if d := sync(); d.Status.StableRevision == "" {
		t.Fatalf("revision 1 done: status %+v; want it stable", d.Status)
	}
	if _, err := st.Deployments().Modify(ctx, ref.Namespace, ref.Name, func(d *model.Deployment) bool {
		d.Spec.Template.Spec.Containers[0].Command = []string{"sleep", "2000"}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	old, err := st.Pods().ListAll(ctx, store.ListOptions{Namespace: ref.Namespace})
	if err != nil || len(old) != 1 {
		t.Fatalf("revision 1's pods: %d, %v", len(old), err)
	}
	sync() // revision 2's pod
	// Revision 1's pod terminates (its lifecycle, which stops its zone,
	// keeps it until the zone is gone; here there is none).
	if _, err := st.Pods().Modify(ctx, ref.Namespace, old[0].Metadata.Name, func(p *model.Pod) bool {
		now := time.Now()
		p.Metadata.DeletionTimestamp = &now
		return true
	}); err != nil {
		t.Fatal(err)
	}
	ready()
	d := sync()
	terminating := 0
	ps, err := st.Pods().ListAll(ctx, store.ListOptions{Namespace: ref.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Metadata.DeletionTimestamp != nil {
			terminating++
		}
	}
	if terminating != 1 || d.Status.UpdatedReplicas != 1 || d.Status.Replicas != 1 || d.Status.AvailableReplicas != 1 {
		t.Fatalf("%d pods terminating, status %+v; want revision 1's terminating and revision 2's available", terminating, d.Status)
	}
	p := d.Status.Condition(model.DeploymentProgressing)
	if d.Status.Revision != 2 || p == nil || p.Reason != model.ReasonNewReplicaSetAvailable {
		t.Fatalf("rollout status says done (%+v); want revision 2 stable, Progressing NewReplicaSetAvailable", d.Status)
	}
	revs, err := st.ControllerRevisions().ListAll(ctx, store.ListOptions{Namespace: ref.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range revs {
		if r.Revision == 2 && r.Metadata.Name != d.Status.StableRevision {
			t.Fatalf("stable revision %q; want revision 2, %q", d.Status.StableRevision, r.Metadata.Name)
		}
	}
}
