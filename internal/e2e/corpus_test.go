package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// corpusTuning continues a lifecycle as new past 20 history events, so a
// pod continues as new in every phase it reaches: its runs record each
// phase's continue-as-new for the replay corpus.
func corpusTuning(cfg *controlplane.Config) {
	tuning := e2eTuning
	tuning.HistoryLimit = 20
	cfg.PodTuning = &tuning
}

// Lifecycles the other tests do not reach, each continuing as new in the
// phases it passes through: a pod that succeeds, one whose zone is halted
// behind its back and booted again, one that waits for a secret
// (CreateContainerConfig), and one whose grace period finalize ends.
func TestLifecyclesOfTheReplayCorpus(t *testing.T) {
	t.Parallel()
	key, err := encryption.NewKey([]byte(strings.Repeat("k", encryption.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) {
		corpusTuning(cfg)
		cfg.EncryptionKey = key // it keeps secrets
	})
	stubborn := `{"metadata":{"name":"finalized"},"spec":{"terminationGracePeriodSeconds":120,
	  "containers":[{"name":"app","image":"base","command":["sh","-c","trap '' TERM; while :; do sleep 1; done"]}]}}`
	c.createPod(exitPod("succeeds", model.RestartNever, "sleep 1; exit 0"))
	c.createPod(sleepPod("rebooted", "sparse", ""))
	c.createPod(stubborn)
	c.createPod(`{"metadata":{"name":"configwait"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"],
	  "env":[{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"later","key":"token"}}}]}]}}`)

	c.waitPhase("succeeds", model.PodSucceeded, false, 2*time.Minute)
	// The zone halted behind the lifecycle's back is booted again.
	p := c.waitPhase("rebooted", model.PodRunning, true, 2*time.Minute)
	zone := hostapi.PodSandbox{Namespace: "default", Name: "rebooted", UID: p.Metadata.UID}.ZoneName()
	if err := c.nodeHost(0).Host.Zoneadm().Halt(context.Background(), zone); err != nil {
		t.Fatal(err)
	}
	c.eventually(time.Minute, "the halted zone to be booted again", func() bool {
		z, ok := findZone(c.hostState(0), zone)
		return ok && z.State == "running" && strings.Contains(c.events("rebooted"), "ZoneRebooted")
	})
	c.waitPhase("rebooted", model.PodRunning, true, time.Minute)
	// The pod waits for its secret, continuing as new meanwhile.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		p, _ := c.pod("configwait")
		runs := c.continuedRuns("configwait")
		if p.Status.Reason == "CreateContainerConfigError" && runs >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod waiting for its secret did not continue as new: %d runs continued; status %+v; events %s", runs, p.Status, c.events("configwait"))
		}
	}
	if code, b := c.do("POST", "/api/v1/namespaces/default/secrets", map[string]any{
		"metadata": map[string]any{"name": "later"}, "stringData": map[string]string{"token": "t"}}); code != 201 {
		t.Fatalf("create the secret: %d %s", code, b)
	}
	c.waitPhase("configwait", model.PodRunning, true, 2*time.Minute)
	c.waitPhase("finalized", model.PodRunning, true, 2*time.Minute)
	c.do("DELETE", "/api/v1/namespaces/default/pods/finalized", nil)
	time.Sleep(2 * time.Second)
	if code, b := c.do("POST", "/api/v1/namespaces/default/pods/finalized/finalize", nil); code != http.StatusAccepted {
		t.Fatalf("finalize: %d %s", code, b)
	}
	c.waitGone("finalized", time.Minute)
	for _, name := range []string{"succeeds", "rebooted", "configwait"} {
		c.do("DELETE", "/api/v1/namespaces/default/pods/"+name+"?gracePeriodSeconds=0", nil)
	}
	for _, name := range []string{"succeeds", "rebooted", "configwait", "finalized"} {
		c.waitGone(name, time.Minute)
		c.waitClosed(name)
		c.recordRuns(name, "pod-"+name)
	}
	c.assertClean()
}

// A pod waits while its node's pod CIDR is full (IPExhausted), continuing
// as new meanwhile, and runs once the address it waited for is freed.
func TestIPExhaustedPodRunsWhenAnAddressIsFreed(t *testing.T) {
	t.Parallel()
	// A /30 holds the network, the node's gateway, one pod and broadcast.
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) {
		corpusTuning(cfg)
		cfg.NodeCIDRMaskSize = 30
	})
	c.createPod(sleepPod("first", "sparse", ""))
	c.waitPhase("first", model.PodRunning, true, 2*time.Minute)
	c.createPod(sleepPod("second", "sparse", ""))
	c.eventually(time.Minute, "the second pod to wait for an address, continuing as new", func() bool {
		p, _ := c.pod("second")
		return p.Status.Reason == podcontract.ReasonIPExhausted && c.continuedRuns("second") >= 2
	})
	if !strings.Contains(c.events("second"), "FailedAllocateIP") {
		t.Errorf("no FailedAllocateIP event: %s", c.events("second"))
	}
	c.do("DELETE", "/api/v1/namespaces/default/pods/first?gracePeriodSeconds=0", nil)
	c.waitPhase("second", model.PodRunning, true, 2*time.Minute)
	c.do("DELETE", "/api/v1/namespaces/default/pods/second?gracePeriodSeconds=0", nil)
	c.waitGone("second", time.Minute)
	c.waitClosed("second")
	c.recordRuns("second", "pod-ip-exhausted")
	c.assertClean()
}

// continuedRuns counts the runs of a pod's lifecycle that continued as new.
func (c *cluster) continuedRuns(pod string) int {
	q := fmt.Sprintf(`WorkflowId = %q AND ExecutionStatus = "ContinuedAsNew"`, podcontract.WorkflowID("default", pod))
	list, err := c.temporal.ListWorkflow(context.Background(), listRequest(q))
	if err != nil {
		return 0
	}
	return len(list.Executions)
}

// recordRuns records every run of a pod's lifecycle, oldest first, as
// <prefix>-<n>.json: each run that continued as new is a history of its own.
func (c *cluster) recordRuns(pod, prefix string) {
	c.t.Helper()
	id := podcontract.WorkflowID("default", pod)
	list, err := c.temporal.ListWorkflow(context.Background(), listRequest(fmt.Sprintf(`WorkflowId = %q`, id)))
	if err != nil {
		c.t.Fatal(err)
	}
	runs := list.Executions
	slices.SortFunc(runs, func(a, b *workflowpb.WorkflowExecutionInfo) int {
		return a.GetStartTime().AsTime().Compare(b.GetStartTime().AsTime())
	})
	if len(runs) < 2 {
		c.t.Errorf("%s ran once; the corpus wants its continue-as-new", id)
	}
	for i, r := range runs {
		c.recordRun(id, r.Execution.RunId, fmt.Sprintf("%s-%d.json", prefix, i+1))
	}
}

// The two waiting phases the other lifecycles do not continue as new in:
// a pod bound to a node that lacks its image (its first pulls fail, then
// it is slow) waits ImagePulling and ImagePullBackOff, and a pod whose
// container failed under restartPolicy Never waits Failed to be deleted.
func TestPodsContinueAsNewWhilePullingAndFailed(t *testing.T) {
	t.Parallel()
	c := newClusterWith(t, 1, corpusTuning)
	files := newImageFiles(t)
	url, digest := files.add("s", &served{body: compress(t, model.CompressionZstd, c.zfsStream("late\n"))})
	c.createImage("lx-late", model.ImageZFSStream, url, digest, "")
	c.waitImage("lx-late", model.ImageReady, c.allNodes(model.ImageReady), 2*time.Minute)
	c.createPod(exitPod("fails", model.RestartNever, "sleep 1; exit 3"))

	n, err := c.nodes.Add(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	idx := len(c.nodes.Nodes) - 1
	c.sim(idx, "fault", "fail-next", "zfs receive", "3", "--stderr", "cannot receive: out of space")
	c.sim(idx, "fault", "latency", "zfs receive", "3s")
	c.createPod(fmt.Sprintf(`{"metadata":{"name":"pulling"},"spec":{"runtimeClassName":"lx","nodeName":%q,
	  "containers":[{"name":"app","image":"lx-late","command":["sleep","3600"]}]}}`, n.Name))
	c.waitPhase("pulling", model.PodRunning, true, 4*time.Minute)
	if c.continuedRuns("pulling") < 2 {
		t.Errorf("the pod waiting for its image continued as new %d times; want at least 2", c.continuedRuns("pulling"))
	}
	c.waitPhase("fails", model.PodFailed, false, 2*time.Minute)
	c.eventually(time.Minute, "the failed pod to continue as new", func() bool {
		return c.continuedRuns("fails") >= 1
	})
	for _, name := range []string{"pulling", "fails"} {
		c.do("DELETE", "/api/v1/namespaces/default/pods/"+name+"?gracePeriodSeconds=0", nil)
	}
	for _, name := range []string{"pulling", "fails"} {
		c.waitGone(name, time.Minute)
		c.waitClosed(name)
		c.recordRuns(name, "pod-"+name)
	}
}
