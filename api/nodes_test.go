package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

func (c *client) nodeEvents(node string) []model.Event {
	c.t.Helper()
	var list model.List[model.Event]
	r := c.json("GET", "/api/v1/events?fieldSelector=involvedObject.kind%3DNode,involvedObject.name%3D"+node, nil)
	_ = json.Unmarshal(r.body, &list)
	return list.Items
}

// countReason is how many times events with reason were recorded: a
// repeated event is one row that counts them.
func countReason(evs []model.Event, reason string) int {
	n := 0
	for _, e := range evs {
		if e.Reason == reason {
			n += e.Count
		}
	}
	return n
}

func TestNodeCordonDrainAndDeleteStatuses(t *testing.T) {
	c := newAPI(t)
	for _, r := range []struct{ method, path string }{
		{"POST", "/api/v1/nodes/ghost/cordon"}, {"POST", "/api/v1/nodes/ghost/uncordon"},
		{"POST", "/api/v1/nodes/ghost/drain"}, {"DELETE", "/api/v1/nodes/ghost"}, {"DELETE", "/api/v1/nodes/ghost?force=true"},
	} {
		if resp := c.json(r.method, r.path, nil); resp.code != 404 || resp.status().Reason != "NotFound" {
			t.Fatalf("%s %s: %d %s; want a 404 Status", r.method, r.path, resp.code, resp.body)
		}
	}
	node := `{"metadata":{"name":"n1"},"spec":{"podCIDR":"10.88.1.0/24"},"status":{"capacity":{"cpu":"8","memory":"32Gi","pods":"110"}}}`
	if r := c.json("POST", "/api/v1/nodes", node); r.code != 201 {
		t.Fatalf("create node: %d %s", r.code, r.body)
	}
	var n model.Node
	for range 2 {
		r := c.json("POST", "/api/v1/nodes/n1/cordon", nil)
		n = model.Node{}
		_ = json.Unmarshal(r.body, &n)
		if r.code != 200 || !n.Spec.Unschedulable || n.Kind != model.KindNode {
			t.Fatalf("cordon: %d %s; want the Node, unschedulable", r.code, r.body)
		}
	}
	if got := countReason(c.nodeEvents("n1"), "NodeNotSchedulable"); got != 1 {
		t.Fatalf("%d cordon events for two cordons; want 1 (the second changed nothing)", got)
	}
	r := c.json("POST", "/api/v1/nodes/n1/uncordon", nil)
	n = model.Node{}
	_ = json.Unmarshal(r.body, &n)
	if r.code != 200 || n.Spec.Unschedulable {
		t.Fatalf("uncordon: %d %s", r.code, r.body)
	}

	pod := `{"metadata":{"name":"bound"},"spec":{"nodeName":"n1","containers":[{"name":"a","image":"i","command":["c"]}]}}`
	if r := c.json("POST", "/api/v1/namespaces/default/pods", pod); r.code != 201 {
		t.Fatalf("create bound pod: %d %s", r.code, r.body)
	}
	if r := c.json("DELETE", "/api/v1/nodes/n1", nil); r.code != 409 || r.status().Reason != "Conflict" || !strings.Contains(r.status().Message, "pod") {
		t.Fatalf("delete of a node with a pod: %d %s; want 409 Conflict naming the pods", r.code, r.body)
	}
	if r := c.json("DELETE", "/api/v1/nodes/n1?force=yes", nil); r.code != 400 {
		t.Fatalf("force=yes: %d %s; want 400", r.code, r.body)
	}
	if r := c.json("DELETE", "/api/v1/nodes/n1?force=true&resourceVersion=1", nil); r.code != 409 {
		t.Fatalf("forced delete at a stale resourceVersion: %d %s; want 409", r.code, r.body)
	}

	r = c.json("POST", "/api/v1/nodes/n1/drain", nil)
	n = model.Node{}
	_ = json.Unmarshal(r.body, &n)
	if r.code != 200 || !n.Spec.Unschedulable {
		t.Fatalf("drain: %d %s; want the Node, cordoned", r.code, r.body)
	}
	if countReason(c.nodeEvents("n1"), "NodeDrain") != 1 {
		t.Fatalf("no NodeDrain event: %+v", c.nodeEvents("n1"))
	}

	if r := c.json("DELETE", "/api/v1/nodes/n1?force=true", nil); r.code != 200 {
		t.Fatalf("forced delete: %d %s", r.code, r.body)
	}
	if r := c.json("GET", "/api/v1/nodes/n1", nil); r.code != 404 {
		t.Fatalf("node still there after a forced delete: %d", r.code)
	}
	var p model.Pod
	_ = json.Unmarshal(c.json("GET", "/api/v1/namespaces/default/pods/bound", nil).body, &p)
	// Only the pod's lifecycle writes its status (it is told to leave the
	// node; the end-to-end tests follow it there): the API does not.
	if p.Status.Phase == model.PodFailed || p.Status.Reason == "NodeLost" {
		t.Fatalf("the API wrote the status of a pod of a node deleted by force: %s/%s", p.Status.Phase, p.Status.Reason)
	}
}
