package e2e_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// A deployment at rest, its pods long past their healthy deadline, keeps
// every pod through a restart of the whole system: the control plane
// stopped and every agent killed, the control plane back while the
// agents are still down (the nodes turn NotReady and the pods lose
// Ready, as after Ctrl-C and `make dev` again), then the agents back.
// No pod is replaced and no failure is recorded: a pod that has been
// available has met its healthy deadline for good.
func TestDeploymentAtRestKeepsItsPodsThroughRestarts(t *testing.T) {
	t.Parallel()
	const grace = 3 * time.Second
	c := nodeHealthCluster(t, 2, grace, 10*time.Minute)
	// Room for a loaded machine to make the pods Ready at first (5 s
	// replaced one under a full make test before the restart began).
	const healthyDeadline = 20 * time.Second
	body := webDeployment("rest", 2, "exec sleep 7200", `"minReadySeconds":1,"progressDeadlineSeconds":30,"autoRevert":true,
	  "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":0,"healthyDeadlineSeconds":20}},`)
	if code, b := c.do("POST", deploymentsPath, body); code != http.StatusCreated {
		t.Fatalf("create deployment: %d %s", code, b)
	}
	c.waitRolledOut("rest", 2*time.Minute)
	before := c.podUIDs("rest")
	if len(before) != 2 {
		t.Fatalf("pods %v; want 2", before)
	}
	// Every pod past its healthy deadline, as pods at rest are.
	time.Sleep(healthyDeadline)

	start := c.stopControlPlane()
	for i := range c.nodes.Nodes {
		c.nodes.Kill(i)
	}
	time.Sleep(grace + time.Second)
	start()
	// The moment a deployment must not take for a failed rollout: its
	// pods not Ready, and its status saying so.
	c.eventually(time.Minute, "the pods to lose Ready with their nodes", func() bool {
		for _, ps := range c.podsOf("rest") {
			for _, p := range ps {
				if isReady(p) {
					return false
				}
			}
		}
		return true
	})
	c.eventually(time.Minute, "the deployment to see its pods unavailable", func() bool {
		return c.deployment("rest").Status.AvailableReplicas == 0
	})
	for i := range c.nodes.Nodes {
		if err := c.nodes.Restart(t.Context(), i); err != nil {
			t.Fatal(err)
		}
	}
	d := c.waitRolledOut("rest", 2*time.Minute)

	after := c.podUIDs("rest")
	if !slices.Equal(before, after) {
		t.Errorf("pods %v before the restart, %v after; want the same pods\nevents:\n%s", before, after, c.events("rest"))
	}
	if d.Status.FailedPods != 0 {
		t.Errorf("failedPods %d; want 0", d.Status.FailedPods)
	}
	var list model.List[model.Event]
	c.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Drest", &list)
	for _, e := range list.Items {
		if e.Type == model.EventWarning {
			t.Errorf("the deployment recorded %s: %s", e.Reason, e.Message)
		}
	}
}

// podUIDs are the UIDs of a deployment's pods, sorted.
func (c *cluster) podUIDs(app string) []string {
	c.t.Helper()
	var uids []string
	for _, ps := range c.podsOf(app) {
		for _, p := range ps {
			uids = append(uids, p.Metadata.UID)
		}
	}
	slices.Sort(uids)
	return uids
}
