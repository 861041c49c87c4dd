package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
)

// revisionOf stores revision n of deployment d with hash, as the
// deployment's sync makes it (no workflow runs in these tests).
func revisionOf(t *testing.T, st *store.Store, d model.Deployment, hash string, n int64, annotations ...map[string]string) {
	t.Helper()
	yes := true
	labels := map[string]string{model.LabelPodTemplateHash: hash}
	for k, v := range d.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	r := &model.ControllerRevision{Metadata: model.ObjectMeta{Name: d.Metadata.Name + "-" + hash, Namespace: d.Metadata.Namespace, Labels: labels,
		Annotations:     append(annotations, nil)[0],
		OwnerReferences: []model.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Metadata.Name, UID: d.Metadata.UID, Controller: &yes}}},
		ControllerRevisionData: model.ControllerRevisionData{Data: d.Spec.Template, Revision: n}}
	if err := st.ControllerRevisions().Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

// ReplicaSets are read from the revisions, selected by their own
// labels (the template's), and never written.
func TestReplicaSetsAreReadOnlyViewsOfTheRevisions(t *testing.T) {
	url := pgtest.NewDatabase(t)
	c := serveStore(t, url)
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	base := "/apis/apps/v1/namespaces/default/replicasets"
	create := func(name, tier string) model.Deployment {
		t.Helper()
		r := c.json("POST", "/apis/apps/v1/namespaces/default/deployments", `{"metadata":{"name":"`+name+`"},"spec":{"replicas":2,
			"selector":{"matchLabels":{"app":"`+name+`"}},"template":{"metadata":{"labels":{"app":"`+name+`","tier":"`+tier+`"}},
			"spec":{"containers":[{"name":"app","image":"omnios","command":["sleep","3600"]}]}}}}`)
		if r.code != http.StatusCreated {
			t.Fatalf("create deployment: %d %s", r.code, r.body)
		}
		return decodeDeployment(t, r)
	}
	web, db := create("web", "front"), create("db", "back")
	revisionOf(t, st, web, "aaa", 1)
	revisionOf(t, st, db, "ddd", 1)

	// The watch selects by the template's tier, which the revisions'
	// labels (the selector's) do not carry.
	w := c.watch(base+"?watch=true&labelSelector=tier%3Dfront", "")
	if ev := w.next(t); ev.Type != "ADDED" || ev.Object.Metadata.Name != "web-aaa" {
		t.Fatalf("first event: %+v", ev)
	}
	revisionOf(t, st, db, "eee", 2)
	revisionOf(t, st, web, "bbb", 2)
	if ev := w.next(t); ev.Type != "ADDED" || ev.Object.Metadata.Name != "web-bbb" || ev.Object.Metadata.Labels["tier"] != "front" {
		t.Fatalf("a new revision of web is an ADDED ReplicaSet (db's are not watched): %+v", ev)
	}

	var list model.List[model.ReplicaSet]
	r := c.json("GET", base+"?labelSelector=app%3Dweb", nil)
	if r.code != http.StatusOK || json.Unmarshal(r.body, &list) != nil || list.Kind != "ReplicaSetList" || list.APIVersion != "apps/v1" ||
		len(list.Items) != 2 || list.Metadata.ResourceVersion == "" {
		t.Fatalf("list by the deployment's selector: %d %s", r.code, r.body)
	}
	for _, rs := range list.Items {
		want := map[string]int32{"web-aaa": 0, "web-bbb": 2}[rs.Metadata.Name]
		if rs.Spec.Replicas == nil || *rs.Spec.Replicas != want || model.ControllerOf(&rs.Metadata).UID != web.Metadata.UID {
			t.Errorf("%s: replicas %v (want %d), owners %+v", rs.Metadata.Name, rs.Spec.Replicas, want, rs.Metadata.OwnerReferences)
		}
	}
	if r := c.json("GET", "/apis/apps/v1/replicasets?labelSelector=tier%3Dback", nil); r.code != http.StatusOK ||
		json.Unmarshal(r.body, &list) != nil || len(list.Items) != 2 || list.Items[0].Metadata.Name != "db-ddd" {
		t.Fatalf("list across namespaces by the template's label: %d %s", r.code, r.body)
	}
	if r := c.json("GET", base+"?fieldSelector=metadata.name%3Ddb-eee", nil); r.code != http.StatusOK ||
		json.Unmarshal(r.body, &list) != nil || len(list.Items) != 1 {
		t.Fatalf("list by name: %d %s", r.code, r.body)
	}

	var rs model.ReplicaSet
	if r := c.json("GET", base+"/web-bbb", nil); r.code != http.StatusOK || json.Unmarshal(r.body, &rs) != nil ||
		rs.Metadata.Annotations[model.AnnotationRevision] != "2" || rs.Spec.Template.Metadata.Labels[model.LabelPodTemplateHash] != "bbb" {
		t.Fatalf("get: %d %s", r.code, r.body)
	}

	for _, bad := range []struct {
		method, path string
		code         int
		says         string
	}{
		{"GET", base + "/web-zzz", http.StatusNotFound, `replicasets.apps "web-zzz" not found`},
		{"GET", "/apis/apps/v1/namespaces/nowhere/replicasets", http.StatusNotFound, "nowhere"},
		{"GET", base + "?labelSelector=app+in+%28", http.StatusBadRequest, "labelSelector"},
		{"GET", base + "?fieldSelector=spec.replicas%3D2", http.StatusBadRequest, "spec.replicas"},
		{"GET", base + "?continue=abc", http.StatusBadRequest, "continue"},
		{"POST", base, http.StatusMethodNotAllowed, "managed by their deployment"},
		{"PUT", base + "/web-bbb", http.StatusMethodNotAllowed, "managed by their deployment"},
		{"PATCH", base + "/web-bbb", http.StatusMethodNotAllowed, "managed by their deployment"},
		{"DELETE", base + "/web-bbb", http.StatusMethodNotAllowed, "managed by their deployment"},
	} {
		var body any
		if bad.method != "GET" && bad.method != "DELETE" {
			body = `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-bbb"}}`
		}
		r := c.json(bad.method, bad.path, body)
		if bad.method == "PATCH" {
			r = c.do(bad.method, bad.path, "application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`))
		}
		if r.code != bad.code || r.status().Code != bad.code || !strings.Contains(r.status().Message, bad.says) {
			t.Errorf("%s %s: %d %s, want %d saying %q", bad.method, bad.path, r.code, r.body, bad.code, bad.says)
		}
	}
	// Refused, the revision is still there.
	if r := c.json("GET", base+"/web-bbb", nil); r.code != http.StatusOK {
		t.Errorf("after the refused delete: %d %s", r.code, r.body)
	}
}

// Rolling back brings the revision's annotations back with its
// template (its change-cause among them), as kubectl rollout undo does
// from a ReplicaSet; the deployment keeps its own (its last-applied
// configuration). A revision that kept none leaves them alone. (Drop
// the AnnotationsAfterRollback line in rollbackDeployment to see the
// change-cause stay "now".)
func TestRollbackBringsTheRevisionsAnnotationsBack(t *testing.T) {
	url := pgtest.NewDatabase(t)
	c := serveStore(t, url)
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	base := "/apis/apps/v1/namespaces/default/deployments"
	r := c.json("POST", base, `{"metadata":{"name":"web","annotations":{"kubernetes.io/change-cause":"now","kubectl.kubernetes.io/last-applied-configuration":"{}"}},
		"spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
		"spec":{"containers":[{"name":"app","image":"omnios","command":["sleep","3600"]}]}}}}`)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	d := decodeDeployment(t, r)
	revisionOf(t, st, d, "aaa", 1, map[string]string{model.AnnotationChangeCause: "then", "team": "a", model.AnnotationRevision: "9"})
	bare := d
	bare.Spec.Template.Spec.Containers = []model.Container{{Name: "app", Image: "omnios", Command: []string{"sleep", "1"}}}
	revisionOf(t, st, bare, "bbb", 2)

	r = c.json("POST", base+"/web/rollback", `{"revision":1}`)
	got := decodeDeployment(t, r).Metadata.Annotations
	if r.code != http.StatusOK || len(got) != 3 || got[model.AnnotationChangeCause] != "then" || got["team"] != "a" ||
		got["kubectl.kubernetes.io/last-applied-configuration"] != "{}" {
		t.Fatalf("after rolling back to revision 1: %d annotations %v", r.code, got)
	}
	r = c.json("POST", base+"/web/rollback", `{"revision":2}`)
	if d := decodeDeployment(t, r); r.code != http.StatusOK || d.Metadata.Annotations[model.AnnotationChangeCause] != "then" ||
		d.Spec.Template.Spec.Containers[0].Command[1] != "1" {
		t.Fatalf("after rolling back to revision 2, which kept no annotations: %d %s", r.code, r.body)
	}
}

// kubectl rollout undo patches the deployment with the ReplicaSet's
// template as Kubernetes' types write it, "creationTimestamp": null in
// its metadata: accepted, and not kept. (Drop CreationTimestamp from
// model.TemplateMeta to see the patch refused as an unknown field.)
func TestUndoPatchOfAKubernetesTemplateIsAccepted(t *testing.T) {
	c := newAPI(t)
	base := "/apis/apps/v1/namespaces/default/deployments"
	if r := c.json("POST", base, fmt.Sprintf(deploymentJSON, "web")); r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	patch := `[{"op":"replace","path":"/spec/template","value":{"metadata":{"creationTimestamp":null,"labels":{"app":"web"}},
		"spec":{"containers":[{"name":"app","image":"omnios","command":["sleep","1"],"resources":{}}]}}},
		{"op":"replace","path":"/metadata/annotations","value":{"kubernetes.io/change-cause":"undone"}}]`
	r := c.do("PATCH", base+"/web", "application/json-patch+json", []byte(patch))
	d := decodeDeployment(t, r)
	if r.code != http.StatusOK || d.Spec.Template.Spec.Containers[0].Command[1] != "1" || d.Metadata.Annotations[model.AnnotationChangeCause] != "undone" {
		t.Fatalf("undo's patch: %d %s", r.code, r.body)
	}
	if strings.Contains(string(c.json("GET", base+"/web", nil).body), "creationTimestamp\":null") {
		t.Errorf("the template kept a creationTimestamp: %s", r.body)
	}
	// A typo is still refused.
	typo := `[{"op":"add","path":"/spec/template/metadata/creationTimestmp","value":null}]`
	if r := c.do("PATCH", base+"/web", "application/json-patch+json", []byte(typo)); r.code != http.StatusBadRequest || !strings.Contains(r.status().Message, "creationTimestmp") {
		t.Errorf("a misspelt template field: %d %s", r.code, r.body)
	}
}
