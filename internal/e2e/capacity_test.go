package e2e_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/scheduler"
)

// Room made on a node (a pod deleted, the node uncordoned) wakes the pods
// no node fitted: they start at once, not after their back-off (two
// minutes here, so waiting it out would fail the test).
func TestFreedCapacityWakesUnschedulablePods(t *testing.T) {
	t.Parallel()
	slow := e2eTuning
	slow.RetryMin, slow.RetryMax = 2*time.Minute, 5*time.Minute
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) { cfg.PodTuning = &slow })
	node := c.nodes.Nodes[0].Name
	var n model.Node
	c.eventually(30*time.Second, "the node to report its capacity", func() bool {
		return c.get("/api/v1/nodes/"+node, &n) == http.StatusOK && scheduler.Allocatable(&n).MilliCPU > 100
	})
	room := scheduler.Allocatable(&n).MilliCPU
	c.createPod(fmt.Sprintf(`{"metadata":{"name":"blocker"},"spec":{"runtimeClassName":"sparse","containers":[{"name":"app","image":"base",
	  "command":["sleep","3600"],"resources":{"requests":{"cpu":"%dm","memory":"64Mi"}}}]}}`, room-50))
	c.waitPhase("blocker", model.PodRunning, false, 90*time.Second)

	c.createPod(sleepPod("waiter", "sparse", "")) // 100m: 50m too many
	c.waitReason("waiter", "Unschedulable", 30*time.Second)
	c.do("DELETE", "/api/v1/namespaces/default/pods/blocker?gracePeriodSeconds=0", nil)
	c.waitGone("blocker", 60*time.Second)
	c.waitPhase("waiter", model.PodRunning, false, 30*time.Second)

	if code, body := c.do("POST", "/api/v1/nodes/"+node+"/cordon", nil); code != http.StatusOK {
		t.Fatalf("cordon: %d %s", code, body)
	}
	c.createPod(sleepPod("second", "sparse", ""))
	c.waitReason("second", "Unschedulable", 30*time.Second)
	if code, body := c.do("POST", "/api/v1/nodes/"+node+"/uncordon", nil); code != http.StatusOK {
		t.Fatalf("uncordon: %d %s", code, body)
	}
	c.waitPhase("second", model.PodRunning, false, 30*time.Second)
}

// waitReason waits until the pod's status gives reason.
func (c *cluster) waitReason(name, reason string, timeout time.Duration) {
	c.t.Helper()
	c.eventually(timeout, name+" to be "+reason, func() bool {
		p, ok := c.pod(name)
		return ok && p.Status.Reason == reason
	})
}
