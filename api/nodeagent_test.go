package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// reportTime is the time in the reports of these tests, so that the same
// report is the same to the second.
var reportTime = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// nodeStatus is a node's status report as its agent sends it.
func nodeStatus(name, podCIDR string, labels map[string]string) model.Node {
	now := reportTime
	return model.Node{TypeMeta: model.TypeMeta{APIVersion: "v1", Kind: "Node"},
		Metadata: model.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{model.AnnotationNodeZones: "none"}},
		Spec:     model.NodeSpec{PodCIDR: podCIDR},
		Status: model.NodeStatus{Capacity: model.ResourceList{"cpu": "8", "memory": "32Gi", "pods": "110"},
			Conditions: []model.NodeCondition{{Type: model.NodeReady, Status: model.ConditionTrue, Reason: "AgentReady",
				LastHeartbeatTime: &now, LastTransitionTime: &now}}}}
}

func (c *client) putStatus(n model.Node) (response, model.Node) {
	c.t.Helper()
	r := c.json("PUT", "/api/v1/nodes/"+n.Metadata.Name+"/status", n)
	var out model.Node
	_ = json.Unmarshal(r.body, &out)
	return r, out
}

func TestNodeStatusRegistersAndKeepsWhatTheOperatorOwns(t *testing.T) {
	c := newAPI(t)
	r, n1 := c.putStatus(nodeStatus("n1", "", map[string]string{"zonewright.io/brand-sparse": "true", "team": "ignored"}))
	if r.code != 201 || n1.Spec.PodCIDR != "10.88.0.0/24" || !n1.Ready() || n1.Metadata.Labels["team"] != "" {
		t.Fatalf("first status: %d %s; want 201, Ready, the first pod CIDR, no label the agent does not own", r.code, r.body)
	}
	if r, n2 := c.putStatus(nodeStatus("n2", "", nil)); r.code != 201 || n2.Spec.PodCIDR != "10.88.1.0/24" {
		t.Fatalf("second node: %d %s; want the next pod CIDR", r.code, r.body)
	}

	// The operator cordons n1; the node's next report keeps it so.
	if r := c.json("POST", "/api/v1/nodes/n1/cordon", nil); r.code != 200 {
		t.Fatalf("cordon: %d %s", r.code, r.body)
	}
	r, n1 = c.putStatus(nodeStatus("n1", "", map[string]string{"zonewright.io/brand-lx": "true"}))
	if r.code != 200 || !n1.Spec.Unschedulable || n1.Spec.PodCIDR != "10.88.0.0/24" {
		t.Fatalf("later status: %d %s; want the node still cordoned, its pod CIDR kept", r.code, r.body)
	}
	if n1.Metadata.Labels["zonewright.io/brand-sparse"] != "" || n1.Metadata.Labels["zonewright.io/brand-lx"] != "true" {
		t.Errorf("brand labels = %v; want the node's latest", n1.Metadata.Labels)
	}
	// The same report again writes nothing.
	rv := n1.Metadata.ResourceVersion
	if r, again := c.putStatus(nodeStatus("n1", "", map[string]string{"zonewright.io/brand-lx": "true"})); r.code != 200 || again.Metadata.ResourceVersion != rv {
		t.Errorf("unchanged status: %d, resourceVersion %s → %s; want no write", r.code, rv, again.Metadata.ResourceVersion)
	}

	// A status for another node's path, or a malformed one, is refused.
	other := nodeStatus("n2", "", nil)
	if r := c.json("PUT", "/api/v1/nodes/n1/status", other); r.code != 422 || !strings.Contains(string(r.body), "metadata.name") {
		t.Errorf("status of n2 at n1's path: %d %s; want 422 naming metadata.name", r.code, r.body)
	}
	if r := c.json("PUT", "/api/v1/nodes/n1/status", `{"kind":"Node","apiVersion":"v1","spec":{"podCIDR":"nonsense"}}`); r.code != 422 || !strings.Contains(string(r.body), "spec.podCIDR") {
		t.Errorf("bad pod CIDR: %d %s; want 422 naming spec.podCIDR", r.code, r.body)
	}
}

func TestPodCIDRsOfTwoNodesNeverOverlap(t *testing.T) {
	c := newAPI(t)
	if r, n := c.putStatus(nodeStatus("a", "10.20.0.0/24", nil)); r.code != 201 || n.Spec.PodCIDR != "10.20.0.0/24" {
		t.Fatalf("a asks 10.20.0.0/24: %d %s; want it granted", r.code, r.body)
	}
	// b asks for a range that contains a's: refused, and b not created.
	if r, _ := c.putStatus(nodeStatus("b", "10.20.0.0/16", nil)); r.code != 409 || r.status().Reason != "Conflict" || !strings.Contains(r.status().Message, "overlaps") {
		t.Fatalf("b asks an overlapping 10.20.0.0/16: %d %s; want 409 saying it overlaps", r.code, r.body)
	}
	if r := c.json("GET", "/api/v1/nodes/b", nil); r.code != 404 {
		t.Errorf("the refused node exists: %d %s", r.code, r.body)
	}
	// a may not move to another CIDR under its pods.
	if r, _ := c.putStatus(nodeStatus("a", "10.30.0.0/24", nil)); r.code != 409 {
		t.Errorf("a asks another CIDR: %d %s; want 409", r.code, r.body)
	}
	// A node created by a client: its status is ignored, its CIDR checked.
	body := `{"metadata":{"name":"c"},"spec":{"podCIDR":"10.20.0.128/25"},"status":{"capacity":{"cpu":"64"}}}`
	if r := c.json("POST", "/api/v1/nodes", body); r.code != 409 {
		t.Fatalf("create c inside a's CIDR: %d %s; want 409", r.code, r.body)
	}
	r := c.json("POST", "/api/v1/nodes", `{"metadata":{"name":"c"},"status":{"capacity":{"cpu":"64"},"conditions":[{"type":"Ready","status":"True"}]}}`)
	var created model.Node
	_ = json.Unmarshal(r.body, &created)
	if r.code != 201 || created.Spec.PodCIDR != "10.88.0.0/24" || len(created.Status.Capacity) != 0 || created.Ready() {
		t.Fatalf("create c: %d %s; want a pod CIDR assigned and no status from the client", r.code, r.body)
	}
	// A deleted node's CIDR is free again.
	if r := c.json("DELETE", "/api/v1/nodes/a", nil); r.code != 200 {
		t.Fatalf("delete a: %d %s", r.code, r.body)
	}
	if r, n := c.putStatus(nodeStatus("b", "10.20.0.0/16", nil)); r.code != 201 || n.Spec.PodCIDR != "10.20.0.0/16" {
		t.Fatalf("b asks 10.20.0.0/16 once a is gone: %d %s", r.code, r.body)
	}
}

func TestNodeLeaseIsRenewedWithoutWritingTheNode(t *testing.T) {
	c := newAPI(t)
	lease := func(name string, secs int) string {
		return fmt.Sprintf(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":%q},"spec":{"holderIdentity":%q,"leaseDurationSeconds":%d}}`, name, name, secs)
	}
	if r := c.json("PUT", "/api/v1/nodes/ghost/lease", lease("ghost", 40)); r.code != 404 {
		t.Errorf("lease of an unregistered node: %d %s; want 404", r.code, r.body)
	}
	_, n := c.putStatus(nodeStatus("n1", "", nil))
	for _, bad := range []string{lease("n1", 0), lease("n1", 100000), lease("n2", 40)} {
		if r := c.json("PUT", "/api/v1/nodes/n1/lease", bad); r.code != 422 || len(r.status().Details.Causes) == 0 {
			t.Errorf("lease %s: %d %s; want 422 naming the field", bad, r.code, r.body)
		}
	}
	var first, second model.Lease
	r := c.json("PUT", "/api/v1/nodes/n1/lease", lease("n1", 40))
	_ = json.Unmarshal(r.body, &first)
	if r.code != 200 || first.Kind != "Lease" || first.Spec.RenewTime == nil || first.Spec.LeaseDurationSeconds != 40 {
		t.Fatalf("renew: %d %s", r.code, r.body)
	}
	time.Sleep(10 * time.Millisecond)
	r = c.json("PUT", "/api/v1/nodes/n1/lease", lease("n1", 40))
	_ = json.Unmarshal(r.body, &second)
	if !second.Spec.RenewTime.After(*first.Spec.RenewTime) || !second.Spec.AcquireTime.Equal(*first.Spec.AcquireTime) {
		t.Errorf("second renewal: %+v after %+v; want a later renewTime, the same acquireTime", second.Spec, first.Spec)
	}
	var now model.Node
	_ = json.Unmarshal(c.json("GET", "/api/v1/nodes/n1", nil).body, &now)
	if now.Metadata.ResourceVersion != n.Metadata.ResourceVersion {
		t.Errorf("renewing the lease wrote the Node: resourceVersion %s → %s", n.Metadata.ResourceVersion, now.Metadata.ResourceVersion)
	}
	if r := c.json("GET", "/api/v1/nodes/n1/lease", nil); r.code != 200 || !strings.Contains(string(r.body), `"holderIdentity":"n1"`) {
		t.Errorf("get lease: %d %s", r.code, r.body)
	}
}

// A renewal that names the Node's version renews the lease only while
// the Node is at it, so an agent's one-request heartbeat cannot renew the
// lease of a Node declared lost since it last read it. (Make
// putNodeLease's version check 'if false' to see a stale one renewed.)
func TestNodeLeaseIsRenewedOnlyAtTheNodeVersionItNames(t *testing.T) {
	c := newAPI(t)
	_, n := c.putStatus(nodeStatus("n1", "", nil))
	renew := func(version string) (response, model.Lease) {
		in := model.Lease{TypeMeta: model.TypeMeta{APIVersion: model.APIVersionCoordination, Kind: model.KindLease},
			Metadata: model.ObjectMeta{Name: "n1"}, Spec: model.LeaseSpec{HolderIdentity: "n1", LeaseDurationSeconds: 40}}
		if version != "" {
			in.Metadata.Annotations = map[string]string{model.AnnotationLeaseNodeVersion: version}
		}
		r := c.json("PUT", "/api/v1/nodes/n1/lease", in)
		var l model.Lease
		_ = json.Unmarshal(r.body, &l)
		return r, l
	}
	// Without a version (an agent of an earlier release): renewed, and
	// the answer says the Node's version.
	r, first := renew("")
	if r.code != 200 || first.NodeVersion() != n.Metadata.ResourceVersion {
		t.Fatalf("renew naming no version: %d %s; want 200 answering version %s", r.code, r.body, n.Metadata.ResourceVersion)
	}
	r, at := renew(n.Metadata.ResourceVersion)
	if r.code != 200 || at.NodeVersion() != n.Metadata.ResourceVersion || !at.Spec.RenewTime.After(*first.Spec.RenewTime) {
		t.Fatalf("renew at the Node's version: %d %s; want renewed", r.code, r.body)
	}
	// The control plane changes the Node (here an operator's label; node
	// health declaring it lost is the same write).
	if r := c.do("PATCH", "/api/v1/nodes/n1", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"tier":"gold"}}}`)); r.code != 200 {
		t.Fatalf("label the node: %d %s", r.code, r.body)
	}
	r, _ = renew(n.Metadata.ResourceVersion)
	if r.code != 409 || !strings.Contains(r.status().Message, "read it again") {
		t.Errorf("renew at a stale version: %d %s; want 409 asking to read the Node again", r.code, r.body)
	}
	var kept model.Lease
	_ = json.Unmarshal(c.json("GET", "/api/v1/nodes/n1/lease", nil).body, &kept)
	if kept.Spec.RenewTime == nil || !kept.Spec.RenewTime.Equal(*at.Spec.RenewTime) {
		t.Errorf("a refused renewal moved renewTime from %v to %v", at.Spec.RenewTime, kept.Spec.RenewTime)
	}
}

func TestPodReportIsRefusedForAPodBoundElsewhereOrAnotherIncarnation(t *testing.T) {
	c := newAPI(t)
	for _, n := range []string{"n1", "n2"} {
		if r, _ := c.putStatus(nodeStatus(n, "", nil)); r.code != 201 {
			t.Fatalf("register %s: %d %s", n, r.code, r.body)
		}
	}
	pod := `{"metadata":{"name":"web"},"spec":{"nodeName":"n2","containers":[{"name":"a","image":"i","command":["c"]}]}}`
	r := c.json("POST", "/api/v1/namespaces/default/pods", pod)
	var p model.Pod
	_ = json.Unmarshal(r.body, &p)
	if r.code != 201 {
		t.Fatalf("create pod: %d %s", r.code, r.body)
	}
	report := func(node, uid string) response {
		return c.json("POST", "/api/v1/namespaces/default/pods/web/report", model.PodReport{UID: uid, Node: node, Seq: 1, Zone: "running"})
	}
	if r := report("n1", p.Metadata.UID); r.code != 409 || !strings.Contains(r.status().Message, "bound to node n2") {
		t.Errorf("n1 reports n2's pod: %d %s; want 409 saying where it is bound", r.code, r.body)
	}
	if r := report("n2", "another-uid"); r.code != 409 || !strings.Contains(r.status().Message, "incarnation") {
		t.Errorf("report of another incarnation: %d %s; want 409", r.code, r.body)
	}
	if r := report("", p.Metadata.UID); r.code != 422 || !strings.Contains(string(r.body), `"field":"node"`) {
		t.Errorf("report without a node: %d %s; want 422 naming node", r.code, r.body)
	}
	if r := c.json("POST", "/api/v1/namespaces/default/pods/ghost/report", model.PodReport{UID: "u", Node: "n2"}); r.code != 404 {
		t.Errorf("report of a missing pod: %d %s; want 404", r.code, r.body)
	}
	// The right node and incarnation pass the checks; with no lifecycles
	// on this API there is nobody to deliver to.
	if r := report("n2", p.Metadata.UID); r.code != 503 {
		t.Errorf("report from the pod's node: %d %s; want 503 (no lifecycles here)", r.code, r.body)
	}

	// Events: a node records them on its own pods only.
	ev := func(node string, obj model.ObjectReference) response {
		return c.json("POST", "/api/v1/nodes/"+node+"/events", model.Event{EventData: model.EventData{InvolvedObject: obj, Type: "Normal", Reason: "ZoneAdopted", Message: "kept"}})
	}
	web := model.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: p.Metadata.UID}
	if r := ev("n1", web); r.code != 409 {
		t.Errorf("n1 records an event on n2's pod: %d %s; want 409", r.code, r.body)
	}
	if r := ev("n1", model.ObjectReference{Kind: "Node", Name: "n2"}); r.code != 422 {
		t.Errorf("n1 records an event on n2: %d %s; want 422", r.code, r.body)
	}
	if r := ev("n2", web); r.code != 201 {
		t.Errorf("n2 records an event on its pod: %d %s", r.code, r.body)
	}
}
