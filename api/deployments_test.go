package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

const deploymentJSON = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q},
 "spec":{"replicas":4,"selector":{"matchLabels":{"app":"web"}},
  "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"omnios","command":["sleep","3600"]}]}}}}`

func decodeDeployment(t *testing.T, r response) model.Deployment {
	t.Helper()
	var d model.Deployment
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return d
}

func TestDeploymentCRUDDefaultsAndGeneration(t *testing.T) {
	c := newAPI(t)
	base := "/apis/apps/v1/namespaces/default/deployments"
	r := c.json("POST", base, fmt.Sprintf(deploymentJSON, "web"))
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	d := decodeDeployment(t, r)
	ru := d.Spec.Strategy.RollingUpdate
	if d.APIVersion != "apps/v1" || d.Metadata.Generation != 1 || d.Spec.Strategy.Type != model.StrategyRollingUpdate ||
		ru == nil || ru.MaxSurge.String() != "25%" || ru.MaxUnavailable.String() != "25%" ||
		*d.Spec.ProgressDeadlineSeconds != 600 || *d.Spec.RevisionHistoryLimit != 10 || d.Spec.Template.Spec.RestartPolicy != model.RestartAlways {
		t.Fatalf("defaults not applied: %s", r.body)
	}
	if r := c.json("POST", base, fmt.Sprintf(deploymentJSON, "web")); r.code != http.StatusConflict {
		t.Fatalf("duplicate: %d %s", r.code, r.body)
	}

	// Labels alone keep the generation; a spec change counts one more.
	d.Metadata.Labels = map[string]string{"tier": "front"}
	r = c.json("PUT", base+"/web", d)
	if r.code != http.StatusOK || decodeDeployment(t, r).Metadata.Generation != 1 {
		t.Fatalf("label update: %d %s", r.code, r.body)
	}
	d = decodeDeployment(t, r)
	d.Spec.Template.Spec.Containers[0].Command = []string{"sleep", "7200"}
	r = c.json("PUT", base+"/web", d)
	if r.code != http.StatusOK || decodeDeployment(t, r).Metadata.Generation != 2 {
		t.Fatalf("template update: %d %s", r.code, r.body)
	}
	// The version read before is stale now.
	if r := c.json("PUT", base+"/web", d); r.code != http.StatusConflict {
		t.Fatalf("stale update: %d %s", r.code, r.body)
	}
	// The selector is immutable.
	d = decodeDeployment(t, c.json("GET", base+"/web", nil))
	d.Spec.Selector.MatchLabels = map[string]string{"app": "other"}
	d.Spec.Template.Metadata.Labels = map[string]string{"app": "other"}
	if r := c.json("PUT", base+"/web", d); r.code != http.StatusUnprocessableEntity || !slices.Contains(causeFields(r), "spec.selector") {
		t.Fatalf("selector change: %d %s", r.code, r.body)
	}

	var list model.List[model.Deployment]
	if r := c.json("GET", "/apis/apps/v1/deployments", nil); r.code != http.StatusOK || json.Unmarshal(r.body, &list) != nil || len(list.Items) != 1 || list.Kind != "DeploymentList" {
		t.Fatalf("list across namespaces: %d %s", r.code, r.body)
	}

	// Deleting cascades through the deployment's workflow: the row stays,
	// marked, until its pods are gone; the namespace cannot go meanwhile.
	r = c.json("DELETE", base+"/web", nil)
	if r.code != http.StatusOK || decodeDeployment(t, r).Metadata.DeletionTimestamp == nil {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if r := c.json("POST", base+"/web/restart", nil); r.code != http.StatusConflict {
		t.Fatalf("restart while deleting: %d %s", r.code, r.body)
	}
	if r := c.json("DELETE", "/api/v1/namespaces/default", nil); r.code != http.StatusConflict || !strings.Contains(string(r.body), "deployment") {
		t.Fatalf("namespace delete with a deployment in it: %d %s", r.code, r.body)
	}
}

func TestDeploymentValidationNamesTheField(t *testing.T) {
	c := newAPI(t)
	base := "/apis/apps/v1/namespaces/default/deployments"
	for _, tc := range []struct {
		name, body, field string
	}{
		{"no selector", `{"metadata":{"name":"a"},"spec":{"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.selector"},
		{"selector not matching the template", `{"metadata":{"name":"a"},"spec":{"selector":{"matchLabels":{"app":"b"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.template.metadata.labels"},
		{"both fenceposts zero", `{"metadata":{"name":"a"},"spec":{"selector":{"matchLabels":{"app":"a"}},"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":"0%"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.strategy.rollingUpdate.maxUnavailable"},
		{"a bad percentage", `{"metadata":{"name":"a"},"spec":{"selector":{"matchLabels":{"app":"a"}},"strategy":{"rollingUpdate":{"maxSurge":"lots"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.strategy.rollingUpdate.maxSurge"},
		{"negative replicas", `{"metadata":{"name":"a"},"spec":{"replicas":-1,"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.replicas"},
		{"restartPolicy Never", `{"metadata":{"name":"a"},"spec":{"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.template.spec.restartPolicy"},
		{"a container without a command", `{"metadata":{"name":"a"},"spec":{"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"omnios"}]}}}}`, "spec.template.spec.containers[0].command"},
		{"an image not in the catalog", `{"metadata":{"name":"a"},"spec":{"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"nope","command":["x"]}]}}}}`, "spec.template.spec.containers[0].image"},
		{"deadline not above minReadySeconds", `{"metadata":{"name":"a"},"spec":{"minReadySeconds":30,"progressDeadlineSeconds":30,"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.progressDeadlineSeconds"},
		{"a name too long for its pods", `{"metadata":{"name":"` + strings.Repeat("a", 47) + `"},"spec":{"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "metadata.name"},
		{"an unknown strategy", `{"metadata":{"name":"a"},"spec":{"selector":{"matchLabels":{"app":"a"}},"strategy":{"type":"BlueGreen"},"template":{"metadata":{"labels":{"app":"a"}},"spec":{"containers":[{"name":"c","image":"omnios","command":["x"]}]}}}}`, "spec.strategy.type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.json("POST", base, tc.body)
			if r.code != http.StatusUnprocessableEntity || !slices.Contains(causeFields(r), tc.field) {
				t.Fatalf("%d %s; want 422 naming %s", r.code, r.body, tc.field)
			}
		})
	}
	if r := c.json("POST", base, `{"apiVersion":"v1","kind":"Deployment","metadata":{"name":"a"}}`); r.code != http.StatusBadRequest {
		t.Fatalf("wrong apiVersion: %d %s", r.code, r.body)
	}
}

func TestDeploymentScaleSubresourceAndRolloutActions(t *testing.T) {
	c := newAPI(t)
	base := "/apis/apps/v1/namespaces/default/deployments"
	if r := c.json("POST", base, fmt.Sprintf(deploymentJSON, "web")); r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var sc model.Scale
	r := c.json("GET", base+"/web/scale", nil)
	if r.code != http.StatusOK || json.Unmarshal(r.body, &sc) != nil || sc.Spec.Replicas != 4 || sc.Status.Selector != "app=web" || sc.Kind != "Scale" {
		t.Fatalf("get scale: %d %s", r.code, r.body)
	}
	r = c.json("PUT", base+"/web/scale", `{"spec":{"replicas":7}}`)
	if r.code != http.StatusOK || json.Unmarshal(r.body, &sc) != nil || sc.Spec.Replicas != 7 {
		t.Fatalf("put scale: %d %s", r.code, r.body)
	}
	d := decodeDeployment(t, c.json("GET", base+"/web", nil))
	if *d.Spec.Replicas != 7 || d.Metadata.Generation != 2 {
		t.Fatalf("after scale: replicas %d generation %d", *d.Spec.Replicas, d.Metadata.Generation)
	}
	if r := c.json("PUT", base+"/web/scale", `{"spec":{"replicas":-3}}`); r.code != http.StatusUnprocessableEntity || !slices.Contains(causeFields(r), "spec.replicas") {
		t.Fatalf("negative scale: %d %s", r.code, r.body)
	}
	if r := c.json("PUT", base+"/web/scale", `{"metadata":{"resourceVersion":"1"},"spec":{"replicas":3}}`); r.code != http.StatusConflict {
		t.Fatalf("stale scale: %d %s", r.code, r.body)
	}

	// Restart puts a restartedAt annotation in the template.
	r = c.json("POST", base+"/web/restart", nil)
	if r.code != http.StatusOK || decodeDeployment(t, r).Spec.Template.Metadata.Annotations[model.AnnotationRestartedAt] == "" {
		t.Fatalf("restart: %d %s", r.code, r.body)
	}
	// Paused: no restart, no rollback; resumed: both are allowed again.
	if r := c.json("POST", base+"/web/pause", nil); r.code != http.StatusOK || !decodeDeployment(t, r).Spec.Paused {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	if r := c.json("POST", base+"/web/rollback", nil); r.code != http.StatusConflict {
		t.Fatalf("rollback while paused: %d %s", r.code, r.body)
	}
	if r := c.json("POST", base+"/web/resume", nil); r.code != http.StatusOK || decodeDeployment(t, r).Spec.Paused {
		t.Fatalf("resume: %d %s", r.code, r.body)
	}
	// No revision is kept yet (no workflow ran here): the rollback says so.
	if r := c.json("POST", base+"/web/rollback", `{"revision":3}`); r.code != http.StatusUnprocessableEntity || !slices.Contains(causeFields(r), "revision") {
		t.Fatalf("rollback to a revision not kept: %d %s", r.code, r.body)
	}
	if r := c.json("GET", base+"/nope/scale", nil); r.code != http.StatusNotFound {
		t.Fatalf("scale of a missing deployment: %d %s", r.code, r.body)
	}
}

// A deployment takes the three patch types as Kubernetes does: a
// strategic merge patch merges containers by name (kubectl set image and set env
// changes one and keeps the others; a merge patch would replace the
// list), a JSON patch edits by path (kubectl rollout undo), and its Scale
// takes a merge patch (kubectl scale). (Make patchWith apply strategic
// patches as merge patches to see the second container lost.)
func TestDeploymentPatches(t *testing.T) {
	c := newAPI(t)
	base := "/apis/apps/v1/namespaces/default/deployments"
	d := decodeDeployment(t, c.json("POST", base, fmt.Sprintf(deploymentJSON, "web")))
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, model.Container{Name: "side", Image: "omnios", Command: []string{"sleep", "1"}})
	if r := c.json("PUT", base+"/web", d); r.code != http.StatusOK {
		t.Fatalf("add a container: %d %s", r.code, r.body)
	}
	patch := func(path, ctype, body string) response { return c.do("PATCH", path, ctype, []byte(body)) }
	r := patch(base+"/web", "application/strategic-merge-patch+json", `{"spec":{"template":{"spec":{"containers":[{"name":"side","command":["other"]}]}}}}`)
	got := decodeDeployment(t, r)
	if cs := got.Spec.Template.Spec.Containers; r.code != http.StatusOK || len(cs) != 2 || cs[0].Command[0] == "other" || cs[1].Name != "side" || cs[1].Command[0] != "other" || got.Metadata.Generation != 3 {
		t.Fatalf("strategic merge patch of one container: %d %s", r.code, r.body)
	}
	r = patch(base+"/web", "application/strategic-merge-patch+json", `{"spec":{"template":{"spec":{"containers":[{"name":"side","$patch":"delete"}]}}}}`)
	if cs := decodeDeployment(t, r).Spec.Template.Spec.Containers; r.code != http.StatusOK || len(cs) != 1 || cs[0].Name == "side" {
		t.Fatalf("strategic delete of a container: %d %s", r.code, r.body)
	}
	r = patch(base+"/web", "application/json-patch+json", `[{"op":"replace","path":"/spec/template/spec/containers/0/command","value":["sleep","9"]}]`)
	if cs := decodeDeployment(t, r).Spec.Template.Spec.Containers; r.code != http.StatusOK || cs[0].Command[1] != "9" {
		t.Fatalf("JSON patch: %d %s", r.code, r.body)
	}
	if r := patch(base+"/web", "application/json-patch+json", `[{"op":"replace","path":"/spec/nope/0","value":1}]`); r.code != http.StatusUnprocessableEntity {
		t.Fatalf("a JSON patch of a missing path: %d %s", r.code, r.body)
	}
	if r := patch(base+"/web", "application/strategic-merge-patch+json", `{"spec":{"template":{"spec":{"containers":[{"name":"app","imagee":"x"}]}}}}`); r.code != http.StatusBadRequest {
		t.Fatalf("a patch with an unknown field: %d %s", r.code, r.body)
	}
	var sc model.Scale
	r = patch(base+"/web/scale", "application/merge-patch+json", `{"spec":{"replicas":2}}`)
	if r.code != http.StatusOK || json.Unmarshal(r.body, &sc) != nil || sc.Spec.Replicas != 2 {
		t.Fatalf("patch scale: %d %s", r.code, r.body)
	}
	if d := decodeDeployment(t, c.json("GET", base+"/web", nil)); *d.Spec.Replicas != 2 {
		t.Fatalf("replicas after the scale patch: %d", *d.Spec.Replicas)
	}

	// A dry run (kubectl diff, --dry-run=server) is the write checked,
	// answered and rolled back: nothing is created or changed, and what
	// would fail fails. A node's writes assign networks and start
	// workflows outside the store, so there a dry run is refused and
	// nothing done. (Make store.write ignore WithDryRun to
	// see the dry-run create make the deployment.)
	r = c.json("POST", base+"?dryRun=All", fmt.Sprintf(deploymentJSON, "shown"))
	if shown := decodeDeployment(t, r); r.code != http.StatusCreated || shown.Metadata.Name != "shown" || shown.Spec.Strategy.Type != model.StrategyRollingUpdate {
		t.Fatalf("a dry-run create: %d %s", r.code, r.body)
	}
	if r := c.json("GET", base+"/shown", nil); r.code != http.StatusNotFound {
		t.Fatalf("the dry-run create made the deployment: %d %s", r.code, r.body)
	}
	if r := c.json("POST", base+"?dryRun=All", fmt.Sprintf(deploymentJSON, "web")); r.code != http.StatusConflict {
		t.Fatalf("a dry-run create of a taken name: %d %s", r.code, r.body)
	}
	r = patch(base+"/web/scale?dryRun=All", "application/merge-patch+json", `{"spec":{"replicas":5}}`)
	if r.code != http.StatusOK || json.Unmarshal(r.body, &sc) != nil || sc.Spec.Replicas != 5 {
		t.Fatalf("a dry-run patch: %d %s", r.code, r.body)
	}
	if d := decodeDeployment(t, c.json("GET", base+"/web", nil)); *d.Spec.Replicas != 2 {
		t.Fatalf("the dry-run patch scaled the deployment to %d", *d.Spec.Replicas)
	}
	if r := c.json("POST", base+"?dryRun=Some", fmt.Sprintf(deploymentJSON, "other")); r.code != http.StatusBadRequest {
		t.Fatalf("dryRun=Some: %d %s", r.code, r.body)
	}
	if r := c.json("POST", "/api/v1/nodes?dryRun=All", `{"metadata":{"name":"dry"}}`); r.code != http.StatusBadRequest {
		t.Fatalf("a dry-run node create: %d %s", r.code, r.body)
	}
	if r := c.json("GET", "/api/v1/nodes/dry", nil); r.code != http.StatusNotFound {
		t.Fatalf("the refused dry run made the node: %d %s", r.code, r.body)
	}
}

// Patches that name no resourceVersion apply to the newest object, as
// Kubernetes applies them: concurrent ones all land (kubectl set env met
// a 409 when the deployment controller wrote the status in between). One
// that names a stale version is still a 409. (Make patchWith try once to
// see the concurrent patches refused.)
func TestConcurrentPatchesAllLand(t *testing.T) {
	c := newAPI(t)
	base := "/apis/apps/v1/namespaces/default/deployments"
	if r := c.json("POST", base, fmt.Sprintf(deploymentJSON, "web")); r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	const n = 4
	codes := make(chan int, n)
	for i := range n {
		go func() {
			r := c.do("PATCH", base+"/web", "application/merge-patch+json", fmt.Appendf(nil, `{"metadata":{"labels":{"k%d":"v"}}}`, i))
			codes <- r.code
		}()
	}
	for range n {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a concurrent patch: %d", code)
		}
	}
	if d := decodeDeployment(t, c.json("GET", base+"/web", nil)); len(d.Metadata.Labels) != n {
		t.Errorf("labels after %d concurrent patches: %v", n, d.Metadata.Labels)
	}
	if r := c.do("PATCH", base+"/web", "application/merge-patch+json", []byte(`{"metadata":{"resourceVersion":"1","labels":{"late":"v"}}}`)); r.code != http.StatusConflict {
		t.Errorf("a patch naming a stale version: %d %s", r.code, r.body)
	}
}
