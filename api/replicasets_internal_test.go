package api

import (
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

func rsFixture(now time.Time) (model.Deployment, []model.ControllerRevision, []model.Pod) {
	yes := true
	replicas := int32(3)
	d := model.Deployment{Metadata: model.ObjectMeta{Name: "web", Namespace: "team", UID: "d-uid", ResourceVersion: "40",
		Annotations: map[string]string{model.AnnotationRevision: "2"}},
		Spec: model.DeploymentSpec{Replicas: &replicas, MinReadySeconds: 10, Selector: &model.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	owner := []model.OwnerReference{{APIVersion: model.APIVersionApps, Kind: model.KindDeployment, Name: "web", UID: "d-uid", Controller: &yes}}
	rev := func(hash string, n int64, rv string) model.ControllerRevision {
		return model.ControllerRevision{Metadata: model.ObjectMeta{Name: "web-" + hash, Namespace: "team", UID: "r-" + hash, ResourceVersion: rv,
			Labels: map[string]string{"app": "web", model.LabelPodTemplateHash: hash}, OwnerReferences: owner,
			Annotations: map[string]string{model.AnnotationChangeCause: "image " + hash}},
			ControllerRevisionData: model.ControllerRevisionData{Revision: n, Data: model.PodTemplate{
				Metadata: model.TemplateMeta{Labels: map[string]string{"app": "web", "tier": "front"}},
				Spec:     model.PodSpec{Containers: []model.Container{{Name: "app", Image: "img-" + hash}}}}}}
	}
	readyFor := func(d time.Duration) []model.PodCondition {
		t := now.Add(-d)
		return []model.PodCondition{{Type: model.PodReady, Status: model.ConditionTrue, LastTransitionTime: &t}}
	}
	pod := func(name, hash string, conds []model.PodCondition) model.Pod {
		return model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: "team", ResourceVersion: "30", OwnerReferences: owner,
			Labels: map[string]string{"app": "web", model.LabelPodTemplateHash: hash}},
			Status: model.PodStatus{Phase: model.PodRunning, Conditions: conds}}
	}
	gone := now.Add(-time.Second)
	terminating := pod("web-old-t", "old", readyFor(time.Hour))
	terminating.Metadata.DeletionTimestamp = &gone
	failed := pod("web-new-f", "new", nil)
	failed.Status.Phase = model.PodFailed
	late := pod("web-new-late", "new", readyFor(time.Hour))
	late.Metadata.ResourceVersion = "55"
	pods := []model.Pod{
		pod("web-old-a", "old", readyFor(time.Hour)),
		terminating,
		late,
		pod("web-new-b", "new", readyFor(2*time.Second)), // ready, not yet available (minReadySeconds 10)
		pod("web-new-c", "new", nil),
		failed,
	}
	return d, []model.ControllerRevision{rev("old", 1, "10"), rev("new", 2, "20")}, pods
}

// A ReplicaSet is its revision as Kubernetes shapes it: the template's
// labels and the hash, the revision number, the deployment as its
// controller; its counts are its revision's active pods.
func TestReplicaSetsAreTheRevisionsWithTheirPods(t *testing.T) {
	now := time.Now()
	d, revs, pods := rsFixture(now)
	got := replicaSets([]model.Deployment{d}, revs, pods, now)
	if len(got) != 2 {
		t.Fatalf("%d ReplicaSets, want 2: %+v", len(got), got)
	}
	old, cur := got[0], got[1]
	if old.Kind != "ReplicaSet" || old.APIVersion != "apps/v1" || old.Metadata.Name != "web-old" || old.Metadata.UID != "r-old" {
		t.Errorf("old ReplicaSet's identity: %+v", old.Metadata)
	}
	if o := model.ControllerOf(&cur.Metadata); o == nil || o.UID != "d-uid" || o.Kind != "Deployment" || o.Name != "web" {
		t.Errorf("new ReplicaSet's controller: %+v", cur.Metadata.OwnerReferences)
	}
	if a := cur.Metadata.Annotations; a[model.AnnotationRevision] != "2" || a[model.AnnotationChangeCause] != "image new" || a[model.AnnotationDesiredReplicas] != "3" {
		t.Errorf("new ReplicaSet's annotations: %v", a)
	}
	if l := cur.Metadata.Labels; l["tier"] != "front" || l[model.LabelPodTemplateHash] != "new" || l["app"] != "web" {
		t.Errorf("new ReplicaSet's labels are not its template's and the hash: %v", l)
	}
	if l := cur.Spec.Template.Metadata.Labels; l[model.LabelPodTemplateHash] != "new" || l["tier"] != "front" {
		t.Errorf("new ReplicaSet's template labels: %v", l)
	}
	if revs[1].Data.Metadata.Labels[model.LabelPodTemplateHash] != "" {
		t.Errorf("deriving wrote the hash into the revision's own template")
	}
	if m := cur.Spec.Selector.MatchLabels; len(m) != 2 || m["app"] != "web" || m[model.LabelPodTemplateHash] != "new" {
		t.Errorf("new ReplicaSet's selector: %v", m)
	}
	if cur.Spec.Template.Spec.Containers[0].Image != "img-new" || old.Spec.Template.Spec.Containers[0].Image != "img-old" {
		t.Errorf("templates: new %+v old %+v", cur.Spec.Template.Spec, old.Spec.Template.Spec)
	}
	// The newest wants the deployment's replicas; the old one the pods
	// the deployment still keeps of it: the terminating one is not.
	if *cur.Spec.Replicas != 3 || *old.Spec.Replicas != 1 {
		t.Errorf("desired: new %d old %d, want 3 and 1", *cur.Spec.Replicas, *old.Spec.Replicas)
	}
	// The failed pod is not active; of three active, two Ready, one Ready
	// for minReadySeconds.
	if s := cur.Status; s.Replicas != 3 || s.ReadyReplicas != 2 || s.AvailableReplicas != 1 {
		t.Errorf("new ReplicaSet's status: %+v", s)
	}
	if s := old.Status; s.Replicas != 1 || s.ReadyReplicas != 1 || s.AvailableReplicas != 1 {
		t.Errorf("old ReplicaSet's status: %+v", s)
	}
	// Its version moves with its deployment and its pods.
	if cur.Metadata.ResourceVersion != "55" || old.Metadata.ResourceVersion != "40" {
		t.Errorf("resourceVersions: new %s old %s, want 55 and 40", cur.Metadata.ResourceVersion, old.Metadata.ResourceVersion)
	}
}

// What is not a deployment's revision is no ReplicaSet, and what is not
// its pod is not counted.
func TestReplicaSetsLeaveOutWhatTheDeploymentDoesNotControl(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name   string
		change func(d *model.Deployment, revs []model.ControllerRevision, pods []model.Pod) []model.Deployment
		want   []string
	}{
		{"a deployment of the same name since", func(d *model.Deployment, _ []model.ControllerRevision, _ []model.Pod) []model.Deployment {
			d.Metadata.UID = "another"
			return []model.Deployment{*d}
		}, nil},
		{"no deployment", func(*model.Deployment, []model.ControllerRevision, []model.Pod) []model.Deployment { return nil }, nil},
		{"a deployment of that name in another namespace", func(d *model.Deployment, _ []model.ControllerRevision, _ []model.Pod) []model.Deployment {
			d.Metadata.Namespace = "other"
			return []model.Deployment{*d}
		}, nil},
		{"a revision with no controller", func(d *model.Deployment, revs []model.ControllerRevision, _ []model.Pod) []model.Deployment {
			no := false
			revs[0].Metadata.OwnerReferences[0].Controller = &no
			return []model.Deployment{*d}
		}, []string{"web-new"}},
		{"a revision controlled by another kind", func(d *model.Deployment, revs []model.ControllerRevision, _ []model.Pod) []model.Deployment {
			revs[1].Metadata.OwnerReferences = []model.OwnerReference{{Kind: "StatefulSet", Name: "web", UID: "d-uid", Controller: revs[0].Metadata.OwnerReferences[0].Controller}}
			return []model.Deployment{*d}
		}, []string{"web-old"}},
		{"a revision without its hash", func(d *model.Deployment, revs []model.ControllerRevision, _ []model.Pod) []model.Deployment {
			delete(revs[0].Metadata.Labels, model.LabelPodTemplateHash)
			return []model.Deployment{*d}
		}, []string{"web-new"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, revs, pods := rsFixture(now)
			// Fresh owner references: the fixture's revisions share one slice.
			for i := range revs {
				revs[i].Metadata.OwnerReferences = append([]model.OwnerReference(nil), revs[i].Metadata.OwnerReferences...)
			}
			deps := c.change(&d, revs, pods)
			var names []string
			for _, rs := range replicaSets(deps, revs, pods, now) {
				names = append(names, rs.Metadata.Name)
			}
			if strings.Join(names, ",") != strings.Join(c.want, ",") {
				t.Errorf("ReplicaSets %v, want %v", names, c.want)
			}
		})
	}

	// Pods of another deployment (another uid), or of none, with the
	// same hash are not counted.
	d, revs, pods := rsFixture(now)
	yes := true
	for i := range pods {
		pods[i].Metadata.OwnerReferences = []model.OwnerReference{{Kind: model.KindDeployment, Name: "web", UID: "earlier", Controller: &yes}}
	}
	pods = append(pods, model.Pod{Metadata: model.ObjectMeta{Name: "loose", Labels: map[string]string{model.LabelPodTemplateHash: "new"}}})
	for _, rs := range replicaSets([]model.Deployment{d}, revs, pods, now) {
		if rs.Status.Replicas != 0 || *rs.Spec.Replicas != map[string]int32{"web-new": 3, "web-old": 0}[rs.Metadata.Name] {
			t.Errorf("%s counts pods that are not its deployment's: spec %d status %+v", rs.Metadata.Name, *rs.Spec.Replicas, rs.Status)
		}
	}
}

// Revisions without a deployment (it is gone) and a deleting
// deployment's newest revision want no pods; one without pods still has
// a desired count, never a missing one (kubectl dereferences it).
func TestReplicaSetOfAGoneOrDeletingDeploymentWantsNoPods(t *testing.T) {
	now := time.Now()
	d, revs, _ := rsFixture(now)
	if rs := replicaSetOf(nil, &revs[1], true, nil); rs.Spec.Replicas == nil || *rs.Spec.Replicas != 0 || rs.Metadata.Annotations[model.AnnotationRevision] != "2" {
		t.Errorf("without its deployment: %+v", rs)
	}
	d.Metadata.DeletionTimestamp = &now
	if rs := replicaSets([]model.Deployment{d}, revs, nil, now); len(rs) != 2 || *rs[1].Spec.Replicas != 0 {
		t.Errorf("of a deleting deployment: %+v", rs)
	}
}

// kubectl get rs prints DESIRED CURRENT READY AGE, and with -o wide the
// containers, images and selector.
func TestReplicaSetTable(t *testing.T) {
	now := time.Now()
	d, revs, pods := rsFixture(now)
	created := now.Add(-5 * time.Minute)
	revs[1].Metadata.CreationTimestamp = &created
	rs := replicaSets([]model.Deployment{d}, revs, pods, now)[1]
	tbl, ok := asTable("replicasets", rs, "", now)
	if !ok || len(tbl.Rows) != 1 {
		t.Fatalf("no table: %+v", tbl)
	}
	var names []string
	for _, c := range tbl.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if strings.Join(names, " ") != "NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR" {
		t.Errorf("columns: %v", names)
	}
	want := []any{"web-new", "3", "3", "2", "5m", "app", "img-new", "app=web,pod-template-hash=new"}
	for i, cell := range tbl.Rows[0].Cells {
		if cell != want[i] {
			t.Errorf("cell %s: %v, want %v", names[i], cell, want[i])
		}
	}
}
