package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

func sleepPod(name, brand string, extra string) string {
	return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"runtimeClassName":%q,%s
	  "containers":[{"name":"app","image":"base","command":["sleep","3600"],
	  "resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, name, brand, extra)
}

func (c *cluster) waitClosed(name string) {
	c.t.Helper()
	c.eventually(30*time.Second, "the workflow of "+name+" to close", func() bool {
		running, err := (workflows.PodClient{Temporal: c.temporal}).Running(context.Background(), "default", name)
		return err == nil && !running
	})
}

func (c *cluster) allocations() int {
	c.t.Helper()
	conn, err := pgx.Connect(context.Background(), c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM ip_allocations").Scan(&n); err != nil {
		c.t.Fatal(err)
	}
	return n
}

// assertClean proves nothing leaked: no zone, VNIC or pod dataset on any
// node, and no address held.
func (c *cluster) assertClean() {
	c.t.Helper()
	for i := range c.nodes.Nodes {
		c.eventually(30*time.Second, "node "+c.nodes.Nodes[i].Name+" to hold no pod resources", func() bool {
			z, v, d := c.podResources(i)
			return z == 0 && v == 0 && d == 0
		})
	}
	if n := c.allocations(); n != 0 {
		c.t.Fatalf("%d pod addresses still allocated", n)
	}
}

// A pod runs a real HTTP server in its zone, becomes Ready through a real
// httpGet probe, shows its steps to operators, and is deleted gracefully
// with nothing left behind.
func TestPodRunsAndIsRemoved(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	c.createPod(`{"metadata":{"name":"web","labels":{"app":"web"}},"spec":{"terminationGracePeriodSeconds":5,
	  "containers":[{"name":"http","image":"base","command":["sh","-c","exec python3 -m http.server --bind $POD_IP 8080"],
	    "resources":{"requests":{"cpu":"250m","memory":"128Mi"},"limits":{"cpu":"1","memory":"512Mi"}},
	    "readinessProbe":{"httpGet":{"path":"/","port":8080},"periodSeconds":1},
	    "livenessProbe":{"tcpSocket":{"port":8080},"periodSeconds":2}}]}}`)
	p := c.waitPhase("web", model.PodRunning, true, 90*time.Second)
	if p.Status.PodIP == "" || p.Spec.NodeName == "" || !netip.MustParsePrefix(c.podCIDR(c.nodeIndex(p.Spec.NodeName))).Contains(netip.MustParseAddr(p.Status.PodIP)) {
		t.Fatalf("running pod lacks its address or node: %+v", p.Status)
	}
	resp, err := http.Get("http://" + p.Status.PodIP + ":8080/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the pod's server does not answer on its address: %v", err)
	}
	resp.Body.Close()
	node := c.nodeIndex(p.Spec.NodeName)
	if z, v, d := c.podResources(node); z != 1 || v != 1 || d != 1 {
		t.Fatalf("node holds %d zones, %d VNICs, %d datasets; want one each", z, v, d)
	}
	for _, reason := range []string{"Scheduled", "Provisioning", "Started"} {
		if !strings.Contains(c.events("web"), reason) {
			t.Fatalf("no %s event:\n%s", reason, c.events("web"))
		}
	}

	// Operators: the status query and the search attributes.
	ctx := context.Background()
	q, err := c.temporal.QueryWorkflow(ctx, podcontract.WorkflowID("default", "web"), "", podcontract.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.PodLifecycleStatus
	if err := q.Get(&st); err != nil || st.Phase != model.PodRunning || st.Node != p.Spec.NodeName || len(st.Steps) < 4 ||
		st.Steps[len(st.Steps)-1].Step != "ProvisionPod" || st.Steps[len(st.Steps)-1].Finished.IsZero() {
		t.Fatalf("status query: %+v %v", st, err)
	}
	c.eventually(30*time.Second, "the workflow to be found by its search attributes", func() bool {
		list, err := c.temporal.ListWorkflow(ctx, listRequest(`ZwPod = "web" AND ZwPhase = "Running" AND ZwNode = "`+p.Spec.NodeName+`"`))
		return err == nil && len(list.Executions) == 1
	})

	start := time.Now()
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/web", nil); code != 200 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if p, ok := c.pod("web"); ok && p.Metadata.DeletionTimestamp == nil {
		t.Fatal("a deleted pod must show its deletionTimestamp while it terminates")
	}
	if code, b := c.do("POST", "/api/v1/namespaces/default/pods", sleepPod("web", "sparse", "")); code != http.StatusConflict {
		t.Fatalf("creating a pod with the name of one still terminating: %d %s", code, b)
	}
	c.waitGone("web", 60*time.Second)
	t.Logf("graceful delete took %s", time.Since(start))
	c.assertClean()
	c.waitClosed("web")
	c.recordHistory(podcontract.WorkflowID("default", "web"), "pod-web-http.json")
}

func TestEveryBrandRuns(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	// sparse and ipkg zones install from the host's packages (the base
	// zone template); lx and bhyve need an image imported first.
	files := newImageFiles(t)
	url, digest := files.add("lx", &served{body: compress(t, model.CompressionGzip, tarball(t, "lx\n"))})
	c.createImage("lx-root", model.ImageLXTarball, url, digest, "")
	url, digest = files.add("vm", &served{body: randomBytes(1<<20, 9)})
	c.createImage("vm-disk", model.ImageBhyveDisk, url, digest, "")
	images := map[string]string{"sparse": "base", "ipkg": "base", "lx": "lx-root", "bhyve": "vm-disk"}
	for _, name := range []string{"lx-root", "vm-disk"} {
		c.waitImage(name, model.ImageReady, c.allNodes(model.ImageReady), 2*time.Minute)
	}
	for _, brand := range model.Brands {
		t.Run(brand, func(t *testing.T) {
			name := "pod-" + brand
			c.createPod(strings.Replace(sleepPod(name, brand, ""), `"image":"base"`, fmt.Sprintf(`"image":%q`, images[brand]), 1))
			c.waitPhase(name, model.PodRunning, true, 90*time.Second)
			if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/"+name+"?gracePeriodSeconds=0", nil); code != 200 {
				t.Fatalf("delete: %d %s", code, b)
			}
			c.waitGone(name, 60*time.Second)
		})
	}
	c.assertClean()
}

func TestCancelMidInstallRollsBack(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.sim(0, "fault", "latency", "zoneadm install", "4s")
	c.createPod(sleepPod("slow", "sparse", ""))
	c.eventually(60*time.Second, "the install to start", func() bool {
		z, _, _ := c.podResources(0)
		s, _ := c.state(0)
		for _, zone := range s.Zones {
			if zone.State == "incomplete" {
				return z == 1
			}
		}
		return false
	})
	if code, b := c.do("POST", "/api/v1/namespaces/default/pods/slow/cancel", `{"reason":"wrong image"}`); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, b)
	}
	p := c.waitPhase("slow", model.PodFailed, false, 60*time.Second)
	if p.Status.Reason != "Cancelled" || !strings.Contains(p.Status.Message, "wrong image") {
		t.Fatalf("cancelled pod: %s: %s", p.Status.Reason, p.Status.Message)
	}
	c.assertClean()
	c.do("DELETE", "/api/v1/namespaces/default/pods/slow", nil)
	c.waitGone("slow", 30*time.Second)
	c.waitClosed("slow")
	c.recordHistory(podcontract.WorkflowID("default", "slow"), "pod-cancelled.json")
}

// The container ignores SIGTERM: removal waits out the grace period, and
// finalize ends it early.
func TestGracePeriodIsHonouredAndFinalizeEndsIt(t *testing.T) {
	c := newCluster(t, 1)
	stubborn := `{"metadata":{"name":%q},"spec":{"terminationGracePeriodSeconds":%d,
	  "containers":[{"name":"app","image":"base","command":["sh","-c","trap '' TERM; while :; do sleep 1; done"]}]}}`
	c.createPod(fmt.Sprintf(stubborn, "patient", 4))
	c.createPod(fmt.Sprintf(stubborn, "finalized", 120))
	c.waitPhase("patient", model.PodRunning, true, 90*time.Second)
	c.waitPhase("finalized", model.PodRunning, true, 90*time.Second)

	start := time.Now()
	c.do("DELETE", "/api/v1/namespaces/default/pods/patient", nil)
	c.waitGone("patient", 60*time.Second)
	if took := time.Since(start); took < 4*time.Second {
		t.Fatalf("a container ignoring SIGTERM was removed after %s, before its 4s grace period", took)
	}

	c.do("DELETE", "/api/v1/namespaces/default/pods/finalized", nil)
	time.Sleep(2 * time.Second)
	if _, ok := c.pod("finalized"); !ok {
		t.Fatal("the pod went before its 120s grace period and without finalize")
	}
	start = time.Now()
	if code, b := c.do("POST", "/api/v1/namespaces/default/pods/finalized/finalize", nil); code != http.StatusAccepted {
		t.Fatalf("finalize: %d %s", code, b)
	}
	c.waitGone("finalized", 60*time.Second)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("finalize did not end the 120s grace period at once: gone %s after it", took)
	}
	c.assertClean()
}

func TestLivenessFailureRestartsWithBackoff(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(`{"metadata":{"name":"flaky"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"],
	  "livenessProbe":{"exec":{"command":["test","-e","/nonexistent"]},"periodSeconds":1,"failureThreshold":2}}]}}`)
	c.waitPhase("flaky", model.PodRunning, false, 90*time.Second)
	var p model.Pod
	c.eventually(60*time.Second, "two restarts", func() bool {
		p, _ = c.pod("flaky")
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	ev := c.events("flaky")
	if !strings.Contains(ev, "Restarted container app (restart 1)") || !strings.Contains(ev, "in 1s") {
		t.Fatalf("restart events lack the count or the back-off:\n%s", ev)
	}
	c.do("DELETE", "/api/v1/namespaces/default/pods/flaky?gracePeriodSeconds=0", nil)
	c.waitGone("flaky", 60*time.Second)
	c.waitClosed("flaky")
	c.recordHistory(podcontract.WorkflowID("default", "flaky"), "pod-liveness-restarts.json")
}

// The agent dies mid-install and comes back: the pod ends Running with
// exactly one of everything.
func TestAgentCrashMidInstall(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.sim(0, "fault", "latency", "zoneadm install", "3s")
	c.createPod(sleepPod("survivor", "sparse", ""))
	c.eventually(60*time.Second, "the install to start", func() bool {
		s, _ := c.state(0)
		for _, z := range s.Zones {
			if z.State == "incomplete" {
				return true
			}
		}
		return false
	})
	c.nodes.Kill(0)
	time.Sleep(time.Second)
	if err := c.nodes.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	c.waitPhase("survivor", model.PodRunning, true, 2*time.Minute)
	if z, v, d := c.podResources(0); z != 1 || v != 1 || d != 1 {
		_, raw := c.state(0)
		t.Fatalf("after the agent crash: %d zones, %d VNICs, %d datasets; want one each\n%s", z, v, d, raw)
	}
	if n := c.allocations(); n != 1 {
		t.Fatalf("%d addresses allocated, want 1", n)
	}
	c.do("DELETE", "/api/v1/namespaces/default/pods/survivor?gracePeriodSeconds=0", nil)
	c.waitGone("survivor", 60*time.Second)
	c.assertClean()
}

func TestTransientFailuresAreRetried(t *testing.T) {
	t.Parallel()
	// With 30% of commands failing, a provision step fails several times
	// in a row; the production back-off (1s doubling) would make the
	// test wait minutes for what it checks: that the steps are retried.
	c := newCluster(t, 2, "--provision-retry", "100ms")
	for i := range c.nodes.Nodes {
		for _, cmd := range []string{"zfs", "dladm", "zonecfg", "zoneadm", "zlogin"} {
			c.sim(i, "fault", "probability", cmd, "0.3")
		}
	}
	for i := range 4 {
		c.createPod(sleepPod(fmt.Sprintf("p%d", i), "sparse", ""))
	}
	for i := range 4 {
		c.waitPhase(fmt.Sprintf("p%d", i), model.PodRunning, true, 3*time.Minute)
	}
	for i := range c.nodes.Nodes {
		c.sim(i, "fault", "clear")
	}
	for i := range 4 {
		c.do("DELETE", fmt.Sprintf("/api/v1/namespaces/default/pods/p%d?gracePeriodSeconds=0", i), nil)
	}
	for i := range 4 {
		c.waitGone(fmt.Sprintf("p%d", i), 2*time.Minute)
	}
	c.assertClean()
}

func TestPermanentFailureFailsThePodAndLeavesNothing(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.sim(0, "fault", "fail-next", "zoneadm install", "100", "--stderr", "zoneadm: zone 'x': unknown brand.", "--exit", "1")
	c.createPod(sleepPod("doomed", "sparse", ""))
	p := c.waitPhase("doomed", model.PodFailed, false, 2*time.Minute)
	if p.Status.Reason != "ProvisionFailed" || !strings.Contains(p.Status.Message, "InstallZone") || !strings.Contains(p.Status.Message, "unknown brand") {
		t.Fatalf("failed pod's reason lacks the step and stderr: %s: %s", p.Status.Reason, p.Status.Message)
	}
	c.assertClean()
	c.do("DELETE", "/api/v1/namespaces/default/pods/doomed", nil)
	c.waitGone("doomed", 30*time.Second)
	c.waitClosed("doomed")
	c.recordHistory(podcontract.WorkflowID("default", "doomed"), "pod-provision-failed.json")
}

// A control plane killed between a pod's row and its lifecycle leaves a
// pod without one; the replica that starts next repairs it within its
// settle time, not at the reconciler's next scheduled run (here an hour
// away). The row is written while no replica runs, as the killed one left
// it: a lifecycle terminated instead would stay listed as running until
// Temporal's visibility caught up, and the repair would race it.
func TestRestartedControlPlaneRepairsAPodWithoutLifecycle(t *testing.T) {
	t.Parallel()
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) {
		cfg.PodReconcileInterval, cfg.PodSettle = time.Hour, 2*time.Second
	})
	c.createPod(sleepPod("whole", "sparse", ""))
	c.waitPhase("whole", model.PodRunning, true, 90*time.Second)
	start := c.stopControlPlane()
	ctx := context.Background()
	st, err := store.Open(ctx, c.url)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := st.Pods().Get(ctx, "default", "whole")
	if err != nil {
		t.Fatal(err)
	}
	half := &model.Pod{TypeMeta: whole.TypeMeta, Spec: whole.Spec, Status: model.PodStatus{Phase: model.PodPending}}
	half.Metadata.Namespace, half.Metadata.Name, half.Metadata.Annotations = "default", "halfmade", whole.Metadata.Annotations
	half.Spec.NodeName = ""
	err = st.CreatePod(ctx, half)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	start()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if running, err := (workflows.PodClient{Temporal: c.temporal}).Running(ctx, "default", "halfmade"); err == nil && running {
			break
		}
		if time.Now().After(deadline) {
			runs, _ := c.temporal.ListWorkflow(ctx, listRequest(`WorkflowType = "`+workflows.ReconcilePodsWorkflowName+`"`))
			var seen []string
			for _, r := range runs.GetExecutions() {
				seen = append(seen, fmt.Sprintf("%s %s started %s", r.GetExecution().GetWorkflowId(), r.GetStatus(), r.GetStartTime().AsTime().Format(time.TimeOnly)))
			}
			t.Fatalf("the restarted control plane did not start the pod's lifecycle within 30s; reconciler runs: %v", seen)
		}
	}
	c.waitPhase("halfmade", model.PodRunning, true, time.Minute)
	if p, _ := c.pod("whole"); p.Metadata.UID != whole.Metadata.UID || p.Status.Phase != model.PodRunning {
		t.Fatalf("the restart disturbed a healthy pod: uid %s→%s, phase %s", whole.Metadata.UID, p.Metadata.UID, p.Status.Phase)
	}
}

func TestPodWithoutWorkflowIsRepaired(t *testing.T) {
	t.Parallel()
	// The row is older than this when its workflow goes: the repair is not
	// held back by the production settle time (30s), which guards rows
	// whose creator is still starting their workflow.
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) { cfg.PodSettle = 5 * time.Second })
	// A crash between the API's two writes: the row exists, the workflow not.
	c.createPod(sleepPod("orphan", "sparse", ""))
	before := c.waitPhase("orphan", model.PodRunning, true, 90*time.Second)
	ctx := context.Background()
	if err := c.temporal.TerminateWorkflow(ctx, podcontract.WorkflowID("default", "orphan"), "", "simulated crash"); err != nil {
		t.Fatal(err)
	}
	c.eventually(90*time.Second, "the reconciler to start the pod's workflow again", func() bool {
		running, err := (workflows.PodClient{Temporal: c.temporal}).Running(ctx, "default", "orphan")
		return err == nil && running
	})
	// The event is written just after the workflow starts.
	c.eventually(30*time.Second, "a LifecycleRestored event", func() bool {
		return strings.Contains(c.events("orphan"), "LifecycleRestored")
	})
	// The new lifecycle takes the pod over where it is: same node, same
	// address, one zone, Running and Ready again.
	c.eventually(90*time.Second, "the new lifecycle to reach its Running phase", func() bool {
		q, err := c.temporal.QueryWorkflow(ctx, podcontract.WorkflowID("default", "orphan"), "", podcontract.QueryStatus)
		var st workflows.PodLifecycleStatus
		return err == nil && q.Get(&st) == nil && st.Step == string(workflows.PhaseRunning)
	})
	after := c.waitPhase("orphan", model.PodRunning, true, 30*time.Second)
	if after.Spec.NodeName != before.Spec.NodeName || after.Status.PodIP != before.Status.PodIP {
		t.Fatalf("repaired pod moved: %s %s, was %s %s", after.Spec.NodeName, after.Status.PodIP, before.Spec.NodeName, before.Status.PodIP)
	}
	if z, v, d := c.podResources(0); z != 1 || v != 1 || d != 1 {
		t.Fatalf("after the repair the node holds %d zones, %d VNICs, %d datasets; want one each", z, v, d)
	}
	if n := c.allocations(); n != 1 {
		t.Fatalf("%d addresses allocated after the repair, want 1", n)
	}
}
