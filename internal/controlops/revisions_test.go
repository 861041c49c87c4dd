package controlops_test

import (
	"context"
	"testing"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
)

// A deployment's current revision keeps the deployment's annotations
// (not its own: last-applied configuration, revision), as Kubernetes'
// new ReplicaSet does: each older revision still says why it was made
// (kubectl rollout history's CHANGE-CAUSE), and one annotated after its
// rollout says so too. A paused deployment's annotations wait, as its
// template does. (Drop the keepRevisionAnnotations call in run to see
// the later change-cause never reach revision 1.)
func TestRevisionsKeepTheirDeploymentsAnnotations(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	ctl := controlops.NewControl(st, nil)
	newImage(t, st, "base")
	ref := controlapi.DeploymentRef{Namespace: model.DefaultNamespace, Name: "web"}
	newDeployment(t, st, "web", "base", 0)
	change := func(fn func(d *model.Deployment)) {
		t.Helper()
		if _, err := st.Deployments().Modify(ctx, ref.Namespace, ref.Name, func(d *model.Deployment) bool { fn(d); return true }); err != nil {
			t.Fatal(err)
		}
		if _, err := ctl.SyncDeployment(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	annotations := func() map[int64]map[string]string {
		t.Helper()
		revs, err := st.ControllerRevisions().ListAll(ctx, store.ListOptions{Namespace: ref.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]map[string]string{}
		for _, r := range revs {
			out[r.Revision] = r.Metadata.Annotations
		}
		return out
	}
	change(func(d *model.Deployment) {
		d.Metadata.Annotations = map[string]string{model.AnnotationChangeCause: "first", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
	})
	if a := annotations(); len(a) != 1 || len(a[1]) != 1 || a[1][model.AnnotationChangeCause] != "first" {
		t.Fatalf("revision 1 was made with annotations %v; want only the change-cause", a)
	}
	change(func(d *model.Deployment) { d.Metadata.Annotations[model.AnnotationChangeCause] = "later" })
	if a := annotations(); a[1][model.AnnotationChangeCause] != "later" {
		t.Fatalf("the current revision after its deployment's change-cause changed: %v", a)
	}
	change(func(d *model.Deployment) {
		d.Metadata.Annotations[model.AnnotationChangeCause] = "second"
		d.Spec.Template.Spec.Containers[0].Command = []string{"sleep", "2"}
	})
	if a := annotations(); len(a) != 2 || a[1][model.AnnotationChangeCause] != "later" || a[2][model.AnnotationChangeCause] != "second" {
		t.Fatalf("after a new template: %v; want revision 1 later, revision 2 second", a)
	}
	change(func(d *model.Deployment) {
		d.Spec.Paused = true
		d.Metadata.Annotations[model.AnnotationChangeCause] = "paused"
	})
	if a := annotations(); a[2][model.AnnotationChangeCause] != "second" {
		t.Fatalf("a paused deployment's change-cause reached its revision: %v", a)
	}
}
