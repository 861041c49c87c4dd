package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// nodeHealthCluster runs with a short grace period and eviction timeout.
func nodeHealthCluster(t *testing.T, nodes int, grace, eviction time.Duration) *cluster {
	t.Helper()
	c := newClusterWith(t, nodes, func(cfg *controlplane.Config) {
		cfg.NodeGracePeriod, cfg.NodeEvictionTimeout = grace, eviction
	})
	for _, n := range c.nodes.Nodes {
		c.eventually(30*time.Second, "the NodeHealth workflow of "+n.Name, func() bool {
			return c.workflowStatus(workflows.NodeWorkflowID(n.Name)) == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		})
	}
	return c
}

func (c *cluster) workflowStatus(id string) enumspb.WorkflowExecutionStatus {
	d, err := c.temporal.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		return enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED
	}
	return d.WorkflowExecutionInfo.Status
}

// searchAttr reads a keyword search attribute of a workflow.
func (c *cluster) searchAttr(id, name string) string {
	d, err := c.temporal.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil || d.WorkflowExecutionInfo.SearchAttributes == nil {
		return ""
	}
	p, ok := d.WorkflowExecutionInfo.SearchAttributes.IndexedFields[name]
	if !ok {
		return ""
	}
	var v string
	_ = json.Unmarshal(p.Data, &v)
	return v
}

func (c *cluster) node(name string) (model.Node, int) {
	c.t.Helper()
	var n model.Node
	code := c.get("/api/v1/nodes/"+name, &n)
	return n, code
}

// readiness is the node's Ready condition status and whether it carries
// the unreachable taint.
func readiness(n model.Node) (string, bool) {
	status := ""
	if c := n.Condition(model.NodeReady); c != nil {
		status = c.Status
	}
	for _, t := range n.Spec.Taints {
		if t.Key == controlops.TaintUnreachable && t.Effect == model.TaintNoSchedule {
			return status, true
		}
	}
	return status, false
}

func (c *cluster) eventsOf(kind, name string) []model.Event {
	var list model.List[model.Event]
	c.get("/api/v1/events?fieldSelector=involvedObject.kind%3D"+kind+",involvedObject.name%3D"+name, &list)
	return list.Items
}

// hasEvent reports whether obj has the event, waiting up to 10 s for it:
// an event is recorded after the change it tells of, which a test may
// have seen first.
func (c *cluster) hasEvent(kind, name, reason, contains string) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		for _, e := range c.eventsOf(kind, name) {
			if e.Reason == reason && strings.Contains(e.Message, contains) {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// freeze stops node i's agent (SIGSTOP) as a hung process would; the
// returned func thaws it, as does the end of the test.
func (c *cluster) freeze(i int) (thaw func()) {
	c.t.Helper()
	pid := c.nodes.Nodes[i].Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		c.t.Fatal(err)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				c.t.Error(err)
			}
		})
	}
	c.t.Cleanup(thaw)
	return thaw
}

func pinnedPod(name, node, policy string, grace int) string {
	return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"nodeName":%q,"restartPolicy":%q,"terminationGracePeriodSeconds":%d,
	  "containers":[{"name":"app","image":"base","command":["sh","-c","trap '' TERM; while :; do sleep 1; done"],
	  "resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, name, node, policy, grace)
}

// SIGKILL one of three agents: its node goes NotReady (condition Unknown,
// unreachable taint, ZwPhase in Temporal) within grace + 10 s; after the
// eviction timeout its restartPolicy Always pods run on other nodes under
// the same name and UID, saying where they moved, and a Never pod stays
// Failed/NodeLost; the agent's return makes the node Ready, untainted, and
// leaves nothing of the moved pods on it.
func TestLostNodeEvictsMovesAndRecovers(t *testing.T) {
	const grace, eviction = 5 * time.Second, 10 * time.Second
	c := nodeHealthCluster(t, 3, grace, eviction)
	victim := c.nodes.Nodes[0].Name
	uids := map[string]string{}
	for _, name := range []string{"mover-a", "mover-b"} {
		uids[name] = c.createPod(pinnedPod(name, victim, model.RestartAlways, 30)).Metadata.UID
	}
	c.createPod(pinnedPod("stayer", victim, model.RestartNever, 30))
	for _, name := range []string{"mover-a", "mover-b", "stayer"} {
		if p := c.waitPhase(name, model.PodRunning, true, 90*time.Second); p.Spec.NodeName != victim {
			t.Fatalf("pod %s runs on %s; want %s", name, p.Spec.NodeName, victim)
		}
	}
	if got := c.searchAttr(workflows.NodeWorkflowID(victim), workflows.SearchAttrPhase); got != workflows.NodePhaseReady {
		t.Fatalf("ZwPhase of %s is %q before the kill; want Ready", victim, got)
	}

	// A healthy node's workflow sleeps until the sweep finds its
	// heartbeat stale: its history does not grow while it heartbeats.
	healthy := workflows.NodeWorkflowID(c.nodes.Nodes[1].Name)
	quiet := c.historyLength(healthy)

	c.nodes.Kill(0)
	killed := time.Now()
	c.eventually(grace+10*time.Second, victim+" NotReady and tainted", func() bool {
		n, _ := c.node(victim)
		status, tainted := readiness(n)
		return status == model.ConditionUnknown && tainted
	})
	t.Logf("NotReady %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	n, _ := c.node(victim)
	for _, cond := range n.Status.Conditions {
		if cond.Type == model.NodeReady && (cond.Reason != controlops.ReasonNodeStatusUnknown || cond.LastTransitionTime == nil || cond.LastTransitionTime.Before(killed.Add(-time.Second))) {
			t.Fatalf("Ready condition after the kill: %+v; want reason %s and a fresh transition time", cond, controlops.ReasonNodeStatusUnknown)
		}
	}
	c.eventually(10*time.Second, "ZwPhase NotReady in Temporal", func() bool {
		return c.searchAttr(workflows.NodeWorkflowID(victim), workflows.SearchAttrPhase) == workflows.NodePhaseNotReady
	})
	if !c.hasEvent(model.KindNode, victim, "NodeNotReady", victim) {
		t.Fatalf("no NodeNotReady event on %s: %+v", victim, c.eventsOf(model.KindNode, victim))
	}

	// Not before the eviction timeout...
	time.Sleep(eviction / 2)
	if p, _ := c.pod("mover-a"); p.Spec.NodeName != victim {
		t.Fatalf("mover-a left %s before the eviction timeout: %+v", victim, p.Status)
	}
	// ...then moved, same name and UID, Running elsewhere.
	for _, name := range []string{"mover-a", "mover-b"} {
		c.eventually(2*time.Minute, name+" Running on another node", func() bool {
			p, ok := c.pod(name)
			return ok && p.Status.Phase == model.PodRunning && p.Spec.NodeName != "" && p.Spec.NodeName != victim && isReady(p)
		})
		p, _ := c.pod(name)
		if p.Metadata.UID != uids[name] {
			t.Fatalf("%s has uid %s after the move; want %s", name, p.Metadata.UID, uids[name])
		}
		i := c.nodeIndex(p.Spec.NodeName)
		if !strings.HasPrefix(p.Status.PodIP, strings.TrimSuffix(c.podCIDR(i), "0/24")) {
			t.Fatalf("%s has address %s; want one of %s's pod CIDR %s", name, p.Status.PodIP, p.Spec.NodeName, c.podCIDR(i))
		}
		if !c.hasEvent(model.KindPod, name, "Rescheduled", "from "+victim+" to "+p.Spec.NodeName) {
			t.Fatalf("no event says where %s moved:\n%s", name, c.events(name))
		}
		if !c.hasEvent(model.KindPod, name, podcontract.ReasonNodeLost, victim) {
			t.Fatalf("no NodeLost event for %s:\n%s", name, c.events(name))
		}
	}
	if spent, since := c.historyLength(healthy)-quiet, time.Since(killed); spent != 0 {
		t.Fatalf("the workflow of a healthy node spent %d history events in %s (%.0f grace periods); want none", spent, since.Round(time.Second), since.Seconds()/grace.Seconds())
	}
	stayer := c.waitPhase("stayer", model.PodFailed, false, 30*time.Second)
	if stayer.Status.Reason != podcontract.ReasonNodeLost {
		t.Fatalf("stayer is Failed with reason %q; want %s", stayer.Status.Reason, podcontract.ReasonNodeLost)
	}
	// A pod on the lost node is deleted without its node.
	c.do("DELETE", "/api/v1/namespaces/default/pods/stayer", nil)
	c.waitGone("stayer", 30*time.Second)

	if err := c.nodes.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	c.eventually(30*time.Second, victim+" Ready and untainted again", func() bool {
		n, _ := c.node(victim)
		status, tainted := readiness(n)
		return status == model.ConditionTrue && !tainted
	})
	c.eventually(20*time.Second, "ZwPhase Ready in Temporal", func() bool {
		return c.searchAttr(workflows.NodeWorkflowID(victim), workflows.SearchAttrPhase) == workflows.NodePhaseReady
	})
	if !c.hasEvent(model.KindNode, victim, "NodeReady", victim) {
		t.Fatalf("no NodeReady event on %s", victim)
	}
	// The agent removes what the moved and deleted pods left on the node
	// before it reports Ready (its startup cleanup).
	if z, v, d := c.podResources(0); z != 0 || v != 0 || d != 0 {
		_, state := c.state(0)
		t.Fatalf("%s kept %d zones, %d VNICs, %d datasets of pods no longer bound to it:\n%s", victim, z, v, d, state)
	}
	// The moved pods kept running through all this.
	for _, name := range []string{"mover-a", "mover-b"} {
		if p, _ := c.pod(name); p.Status.Phase != model.PodRunning || p.Spec.NodeName == victim {
			t.Fatalf("%s is %s on %s after %s returned", name, p.Status.Phase, p.Spec.NodeName, victim)
		}
	}
	c.recordHistory(workflows.NodeWorkflowID(victim), "node-lost-and-back.json")
	c.do("DELETE", "/api/v1/namespaces/default/pods/mover-a?gracePeriodSeconds=0", nil)
	c.waitGone("mover-a", time.Minute)
	c.waitClosed("mover-a")
	c.recordHistory(podcontract.WorkflowID("default", "mover-a"), "pod-moved-node-lost.json")
}

// Drain cordons the node; a restartPolicy Always pod that ignores SIGTERM
// is stopped with its grace period honoured, its zone removed from the
// node, and it runs elsewhere; a Never pod ends Failed/Evicted.
func TestDrainMovesPodsAndHonoursGracePeriod(t *testing.T) {
	t.Parallel()
	c := nodeHealthCluster(t, 2, 0, 0)
	from := c.nodes.Nodes[0].Name
	const grace = 4
	uid := c.createPod(pinnedPod("mover", from, model.RestartAlways, grace)).Metadata.UID
	c.createPod(pinnedPod("once", from, model.RestartNever, 1))
	c.waitPhase("mover", model.PodRunning, true, 90*time.Second)
	c.waitPhase("once", model.PodRunning, true, 90*time.Second)

	start := time.Now()
	code, b := c.do("POST", "/api/v1/nodes/"+from+"/drain", nil)
	var n model.Node
	_ = json.Unmarshal(b, &n)
	if code != http.StatusOK || !n.Spec.Unschedulable || n.Metadata.Name != from {
		t.Fatalf("drain: %d %s; want 200 and the node cordoned", code, b)
	}
	c.eventually(2*time.Minute, "mover unbound from "+from, func() bool {
		p, _ := c.pod("mover")
		return p.Spec.NodeName != from
	})
	if took := time.Since(start); took < grace*time.Second {
		t.Fatalf("mover left %s %s after the drain, before its %ds grace period", from, took, grace)
	}
	p := c.waitPhase("mover", model.PodRunning, true, 2*time.Minute)
	if p.Spec.NodeName == from || p.Metadata.UID != uid {
		t.Fatalf("after the drain mover is on %s with uid %s; want another node, uid %s", p.Spec.NodeName, p.Metadata.UID, uid)
	}
	if !c.hasEvent(model.KindPod, "mover", "Rescheduled", "from "+from+" to "+p.Spec.NodeName) {
		t.Fatalf("no event says where mover moved:\n%s", c.events("mover"))
	}
	once := c.waitPhase("once", model.PodFailed, false, time.Minute)
	if once.Status.Reason != podcontract.ReasonEvicted {
		t.Fatalf("once is Failed with %q; want %s", once.Status.Reason, podcontract.ReasonEvicted)
	}
	c.eventually(30*time.Second, from+" holds no pod resources", func() bool {
		z, v, d := c.podResources(0)
		return z == 0 && v == 0 && d == 0
	})
	if !c.hasEvent(model.KindNode, from, "NodeDrain", "2 pod(s)") {
		t.Fatalf("no NodeDrain event on %s: %+v", from, c.eventsOf(model.KindNode, from))
	}
	c.do("DELETE", "/api/v1/namespaces/default/pods/mover?gracePeriodSeconds=0", nil)
	c.waitGone("mover", time.Minute)
	c.waitClosed("mover")
	c.recordHistory(podcontract.WorkflowID("default", "mover"), "pod-drained.json")
}

// Cordon keeps new pods off a node, uncordon lets them back; a node with
// pods is not deleted unless forced, and a forced delete moves its pods,
// removes it and ends its NodeHealth workflow.
func TestCordonUncordonAndNodeDelete(t *testing.T) {
	t.Parallel()
	c := nodeHealthCluster(t, 2, 0, 0)
	a, b := c.nodes.Nodes[0].Name, c.nodes.Nodes[1].Name
	for _, path := range []string{"/api/v1/nodes/nope/cordon", "/api/v1/nodes/nope/uncordon", "/api/v1/nodes/nope/drain"} {
		if code, body := c.do("POST", path, nil); code != http.StatusNotFound {
			t.Fatalf("POST %s: %d %s; want 404", path, code, body)
		}
	}
	code, body := c.do("POST", "/api/v1/nodes/"+a+"/cordon", nil)
	var n model.Node
	_ = json.Unmarshal(body, &n)
	if code != http.StatusOK || !n.Spec.Unschedulable {
		t.Fatalf("cordon: %d %s", code, body)
	}
	for i := range 2 {
		name := fmt.Sprintf("c%d", i)
		c.createPod(sleepPod(name, "sparse", ""))
		if p := c.waitPhase(name, model.PodRunning, false, 90*time.Second); p.Spec.NodeName != b {
			t.Fatalf("pod %s went to %s while %s is cordoned", name, p.Spec.NodeName, a)
		}
	}
	if !c.hasEvent(model.KindNode, a, "NodeNotSchedulable", a) {
		t.Fatalf("no cordon event on %s", a)
	}
	if code, body = c.do("POST", "/api/v1/nodes/"+a+"/uncordon", nil); code != http.StatusOK {
		t.Fatalf("uncordon: %d %s", code, body)
	}
	var un model.Node
	_ = json.Unmarshal(body, &un)
	if un.Spec.Unschedulable {
		t.Fatalf("uncordon left the node unschedulable: %s", body)
	}
	// The least allocated node wins: the empty, uncordoned one.
	p := c.createPod(sleepPod("back", "sparse", ""))
	if p = c.waitPhase("back", model.PodRunning, false, 90*time.Second); p.Spec.NodeName != a {
		t.Fatalf("pod went to %s after %s was uncordoned", p.Spec.NodeName, a)
	}

	if code, body = c.do("DELETE", "/api/v1/nodes/"+a, nil); code != http.StatusConflict {
		t.Fatalf("delete of a node with a pod: %d %s; want 409", code, body)
	}
	if code, _ = c.do("DELETE", "/api/v1/nodes/nope?force=true", nil); code != http.StatusNotFound {
		t.Fatalf("forced delete of an unknown node: %d; want 404", code)
	}
	// The agent would register its node again; stop it first, as an
	// operator retiring a host does.
	c.nodes.Kill(0)
	if code, body = c.do("DELETE", "/api/v1/nodes/"+a+"?force=true", nil); code != http.StatusOK {
		t.Fatalf("forced delete: %d %s", code, body)
	}
	if _, code = c.node(a); code != http.StatusNotFound {
		t.Fatalf("node %s still there after a forced delete: %d", a, code)
	}
	c.eventually(2*time.Minute, "back Running on "+b, func() bool {
		p, _ := c.pod("back")
		return p.Status.Phase == model.PodRunning && p.Spec.NodeName == b && isReady(p)
	})
	moved, _ := c.pod("back")
	if !c.hasEvent(model.KindPod, "back", podcontract.ReasonNodeLost, "deleted by force") {
		t.Fatalf("no event tells why back left %s:\n%s", a, c.events("back"))
	}
	if moved.Spec.NodeName != b || moved.Metadata.UID != p.Metadata.UID {
		t.Fatalf("back is on %s (uid %s) after the forced delete; want %s, uid %s", moved.Spec.NodeName, moved.Metadata.UID, b, p.Metadata.UID)
	}
	c.eventually(30*time.Second, "the NodeHealth workflow of "+a+" to end", func() bool {
		return c.workflowStatus(workflows.NodeWorkflowID(a)) == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	})
	c.recordHistory(workflows.NodeWorkflowID(a), "node-force-deleted.json")
}

// An agent cut off without stopping (here frozen with SIGSTOP, as in a
// network partition) finds its node declared lost when it comes back: it
// removes what the pods evicted meanwhile left on the host — the moved
// pod's zone, and the zone of a pod that stayed Failed/NodeLost — before
// its first heartbeat reports the node Ready again.
func TestFrozenAgentCleansItsHostBeforeReportingReady(t *testing.T) {
	const grace, eviction = 5 * time.Second, 10 * time.Second
	c := nodeHealthCluster(t, 2, grace, eviction)
	victim := c.nodes.Nodes[0].Name
	c.createPod(pinnedPod("mover", victim, model.RestartAlways, 30))
	c.createPod(pinnedPod("stayer", victim, model.RestartNever, 30))
	for _, name := range []string{"mover", "stayer"} {
		c.waitPhase(name, model.PodRunning, true, 90*time.Second)
	}

	thaw := c.freeze(0)
	c.eventually(2*time.Minute, "mover Running on the other node", func() bool {
		p, ok := c.pod("mover")
		return ok && p.Status.Phase == model.PodRunning && p.Spec.NodeName != victim && p.Spec.NodeName != ""
	})
	if p := c.waitPhase("stayer", model.PodFailed, false, 30*time.Second); p.Status.Reason != podcontract.ReasonNodeLost {
		t.Fatalf("stayer is Failed with reason %q; want %s", p.Status.Reason, podcontract.ReasonNodeLost)
	}
	if z, _, _ := c.podResources(0); z != 2 {
		t.Fatalf("%s holds %d pod zones while its agent is frozen; want both still there", victim, z)
	}

	thaw()
	c.eventually(30*time.Second, victim+" Ready again", func() bool {
		n, _ := c.node(victim)
		status, _ := readiness(n)
		return status == model.ConditionTrue
	})
	if z, v, d := c.podResources(0); z != 0 || v != 0 || d != 0 {
		_, state := c.state(0)
		t.Fatalf("%s reports Ready holding %d zones, %d VNICs, %d datasets of evicted pods:\n%s", victim, z, v, d, state)
	}
	if !c.hasEvent(model.KindNode, victim, hostapi.ReasonOrphanRemoved, "on the node's return") {
		t.Fatalf("no OrphanRemoved event on the node's return: %+v", c.eventsOf(model.KindNode, victim))
	}
}
