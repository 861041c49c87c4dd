package e2e_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// zoneRun runs a command in a pod's zone through the node's zlogin.
func (c *cluster) zoneRun(p model.Pod, argv ...string) {
	c.t.Helper()
	n := c.nodes.Nodes[c.nodeIndex(p.Spec.NodeName)]
	zone := hostapi.PodSandbox{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}.ZoneName()
	if out, err := exec.Command(filepath.Join(n.BinDir, "zlogin"), append([]string{zone}, argv...)...).CombinedOutput(); err != nil {
		c.t.Fatalf("zlogin %s %v: %v\n%s", zone, argv, err, out)
	}
}

func podReady(p model.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == model.PodReady {
			return cond.Status == model.ConditionTrue
		}
	}
	return false
}

// waitReady measures how long the pod takes to show Ready as want.
func (c *cluster) waitReady(name string, want bool, timeout time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	c.eventually(timeout, fmt.Sprintf("%s Ready=%t", name, want), func() bool {
		p, ok := c.pod(name)
		return ok && podReady(p) == want
	})
	return time.Since(start)
}

// The node's supervisor probes: a readiness probe reading a file in the
// zone turns Ready on and off within about a period, and a
// healthy pod's history does not grow.
func TestReadinessFlipsReachReadyBothWays(t *testing.T) {
	c := newCluster(t, 1)
	c.createPod(`{"metadata":{"name":"flip"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"],
	  "readinessProbe":{"exec":{"command":["test","-e","ready"]},"periodSeconds":2,"failureThreshold":1}}]}}`)
	p := c.waitPhase("flip", model.PodRunning, false, 90*time.Second)
	if podReady(p) {
		t.Fatal("Ready before the readiness probe passed")
	}
	// Within the next probe and its report, with room for a loaded
	// machine (3.06 s was seen under a full make test against 3 s): a
	// flip held back past two probe periods still fails.
	const budget = 2*2*time.Second + 2*time.Second // two periods + 2 s
	c.zoneRun(p, "touch", "ready")
	if took := c.waitReady("flip", true, 30*time.Second); took > budget {
		t.Fatalf("Ready %s after the probe's file appeared; want within %s", took, budget)
	}
	c.zoneRun(p, "rm", "ready")
	if took := c.waitReady("flip", false, 30*time.Second); took > budget {
		t.Fatalf("not Ready %s after the file went; want within %s", took, budget)
	}
	c.zoneRun(p, "touch", "ready")
	c.waitReady("flip", true, 30*time.Second)

	// Healthy now: its history must not grow.
	id := podcontract.WorkflowID("default", "flip")
	before := c.historyLength(id)
	time.Sleep(10 * time.Second)
	if after := c.historyLength(id); after != before {
		t.Fatalf("a healthy Running pod's history grew from %d to %d events in 10 s", before, after)
	}
	c.do("DELETE", "/api/v1/namespaces/default/pods/flip?gracePeriodSeconds=0", nil)
	c.waitGone("flip", 60*time.Second)
	c.waitClosed("flip")
	c.recordHistory(id, "pod-readiness-flips.json")
}

func (c *cluster) historyLength(id string) int64 {
	c.t.Helper()
	d, err := c.temporal.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		c.t.Fatal(err)
	}
	return d.WorkflowExecutionInfo.HistoryLength
}

func exitPod(name, policy, script string) string {
	return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"restartPolicy":%q,"containers":[{"name":"app","image":"base",
	  "command":["sh","-c",%q]}]}}`, name, policy, script)
}

func containerStatus(p model.Pod) model.ContainerStatus {
	if len(p.Status.ContainerStatuses) == 0 {
		return model.ContainerStatus{}
	}
	return p.Status.ContainerStatuses[0]
}

// Exit codes are real, and restartPolicy decides from them.
func TestExitCodesUnderEachRestartPolicy(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(exitPod("never-fails", model.RestartNever, "sleep 1; exit 3"))
	c.createPod(exitPod("onfailure-done", model.RestartOnFailure, "sleep 1; exit 0"))
	c.createPod(exitPod("onfailure-fails", model.RestartOnFailure, "sleep 1; exit 2"))
	c.createPod(exitPod("always", model.RestartAlways, "sleep 1; exit 0"))

	p := c.waitPhase("never-fails", model.PodFailed, false, 2*time.Minute)
	if term := containerStatus(p).State.Terminated; term == nil || term.ExitCode != 3 || containerStatus(p).RestartCount != 0 {
		t.Fatalf("Never pod that exited 3: %+v", p.Status)
	}
	p = c.waitPhase("onfailure-done", model.PodSucceeded, false, 2*time.Minute)
	if term := containerStatus(p).State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Fatalf("OnFailure pod that exited 0: %+v", p.Status)
	}
	for _, name := range []string{"onfailure-fails", "always"} {
		c.eventually(time.Minute, name+" restarted twice", func() bool {
			p, _ := c.pod(name)
			return containerStatus(p).RestartCount >= 2 && p.Status.Phase == model.PodRunning
		})
	}
	p, _ = c.pod("onfailure-fails")
	if last := containerStatus(p).LastTerminationState.Terminated; last == nil || last.ExitCode != 2 {
		t.Fatalf("restarted container's last state lacks its exit code: %+v", containerStatus(p))
	}
	// Finished pods hold nothing on the node.
	c.eventually(30*time.Second, "only the two restarting pods' zones left", func() bool {
		z, _, _ := c.podResources(0)
		return z == 2
	})
	for _, name := range []string{"never-fails", "onfailure-done", "onfailure-fails", "always"} {
		c.do("DELETE", "/api/v1/namespaces/default/pods/"+name+"?gracePeriodSeconds=0", nil)
	}
	for _, name := range []string{"never-fails", "onfailure-done", "onfailure-fails", "always"} {
		c.waitGone(name, time.Minute)
	}
	c.assertClean()
	c.waitClosed("never-fails")
	c.recordHistory(podcontract.WorkflowID("default", "never-fails"), "pod-exit-never.json")
	c.waitClosed("always")
	c.recordHistory(podcontract.WorkflowID("default", "always"), "pod-restarts-always.json")
	c.waitClosed("onfailure-fails")
	c.recordHistory(podcontract.WorkflowID("default", "onfailure-fails"), "pod-restarts-onfailure.json")
}

// Under restartPolicy Never a container that fails leaves its sibling
// running: the pod is Failed only once both have ended, each with its own
// exit code.
func TestNeverLetsTheSiblingsOfAFailedContainerRun(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(`{"metadata":{"name":"pair"},"spec":{"restartPolicy":"Never","containers":[
	  {"name":"app","image":"base","command":["sh","-c","sleep 1; exit 3"]},
	  {"name":"side","image":"base","command":["sh","-c","sleep 8; exit 0"]}]}}`)
	c.eventually(time.Minute, "app to fail while side runs", func() bool {
		p, _ := c.pod("pair")
		if p.Status.Phase == model.PodFailed {
			t.Fatalf("the pod failed before its second container ended: %+v", p.Status)
		}
		cs := p.Status.ContainerStatuses
		return len(cs) == 2 && cs[0].State.Terminated != nil && cs[1].State.Running != nil
	})
	p := c.waitPhase("pair", model.PodFailed, false, time.Minute)
	for i, want := range []int32{3, 0} {
		if cs := p.Status.ContainerStatuses; len(cs) != 2 || cs[i].State.Terminated == nil || cs[i].State.Terminated.ExitCode != want {
			t.Fatalf("container %d of the Failed pod: %+v; want exit code %d", i, p.Status.ContainerStatuses, want)
		}
	}
	c.do("DELETE", "/api/v1/namespaces/default/pods/pair?gracePeriodSeconds=0", nil)
	c.waitGone("pair", time.Minute)
	c.assertClean()
}

// The agent is killed and started again while pods run: no restart is
// counted twice, probe state is not lost, the pods stay Ready throughout.
func TestAgentRestartKeepsPodsReady(t *testing.T) {
	c := newCluster(t, 1)
	c.createPod(`{"metadata":{"name":"steady"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"],
	  "readinessProbe":{"exec":{"command":["true"]},"periodSeconds":1},
	  "livenessProbe":{"exec":{"command":["true"]},"periodSeconds":1}}]}}`)
	c.waitPhase("steady", model.PodRunning, true, 90*time.Second)
	c.nodes.Kill(0)
	time.Sleep(time.Second)
	if err := c.nodes.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		p, _ := c.pod("steady")
		if !podReady(p) || containerStatus(p).RestartCount != 0 || p.Status.Phase != model.PodRunning {
			t.Fatalf("after an agent restart the pod is %s, Ready %t, restarts %d", p.Status.Phase, podReady(p), containerStatus(p).RestartCount)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(c.events("steady"), "Restarted") {
		t.Fatalf("the agent's restart restarted a container:\n%s", c.events("steady"))
	}
}

// A frozen agent's node goes NotReady and its pods stop looking Ready
// within the grace period; they come back with it.
func TestFrozenNodePodsNotReadyAndBack(t *testing.T) {
	const grace = 4 * time.Second
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) {
		cfg.NodeGracePeriod, cfg.NodeEvictionTimeout = grace, 10*time.Minute
	})
	c.createPod(`{"metadata":{"name":"frozen"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"],
	  "readinessProbe":{"exec":{"command":["true"]},"periodSeconds":1}}]}}`)
	c.waitPhase("frozen", model.PodRunning, true, 90*time.Second)
	thaw := c.freeze(0)
	// The last heartbeat is up to a second old; NodeHealth looks within
	// its grace period.
	c.waitReady("frozen", false, grace+15*time.Second)
	p, _ := c.pod("frozen")
	for _, cond := range p.Status.Conditions {
		if cond.Type == model.PodReady && cond.Reason != "NodeNotReady" {
			t.Fatalf("Ready=False with reason %q; want NodeNotReady", cond.Reason)
		}
	}
	thaw()
	c.waitReady("frozen", true, 30*time.Second)
}

// A pod waiting for capacity continues as new over and over (every second
// or so); a cancel signal sent meanwhile is honoured. A cancel, unlike a
// delete, cannot be read back from the pod's row by the next run, so a
// signal lost at a continue-as-new would leave the pod Pending. The very
// moment (the signal in the task that continues as new) is pinned down by
// workflows' TestSignalAtContinueAsNewIsKept; this runs it for real.
func TestSignalDuringContinueAsNewIsHonoured(t *testing.T) {
	t.Parallel()
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) {
		tuning := e2eTuning
		tuning.RetryMax, tuning.HistoryLimit = 200*time.Millisecond, 20
		cfg.PodTuning = &tuning
	})
	c.createPod(`{"metadata":{"name":"huge"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","1"],
	  "resources":{"requests":{"cpu":"512"}}}]}}`)
	var continued string
	c.eventually(time.Minute, "the pod to continue as new a few times", func() bool {
		list, err := c.temporal.ListWorkflow(context.Background(), listRequest(`WorkflowId = "pod/default/huge" AND ExecutionStatus = "ContinuedAsNew"`))
		if err != nil || len(list.Executions) < 3 {
			return false
		}
		continued = list.Executions[0].Execution.RunId
		return true
	})
	c.recordRun("pod/default/huge", continued, "pod-pending-continued.json")
	// As `temporal workflow signal --name cancel` does: to the current run.
	if err := c.temporal.SignalWorkflow(context.Background(), podcontract.WorkflowID("default", "huge"), "", podcontract.SignalCancel,
		podcontract.CancelSignal{Reason: "sent while continuing as new"}); err != nil {
		t.Fatalf("signal cancel: %v", err)
	}
	if p := c.waitPhase("huge", model.PodFailed, false, 30*time.Second); p.Status.Reason != "Cancelled" {
		t.Fatalf("the pod is Failed with reason %q; want Cancelled", p.Status.Reason)
	}
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/huge", nil); code != 200 {
		t.Fatalf("delete: %d %s", code, b)
	}
	c.waitGone("huge", 30*time.Second)
	c.waitClosed("huge")
}
