package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/podcontract"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// A pod with the longest grace period the API takes (a day) goes at once
// on a forced delete, even while a graceful delete of it is under way; a
// longer one is refused before it can overflow the lifecycle's timeouts.
func TestLongestGracePeriodEndsOnAForcedDelete(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	if code, b := c.do("POST", "/api/v1/namespaces/default/pods", sleepPod("overflow", "sparse", `"terminationGracePeriodSeconds":9223372036,`)); code != http.StatusUnprocessableEntity ||
		!strings.Contains(string(b), "spec.terminationGracePeriodSeconds") {
		t.Fatalf("a grace period that overflows a duration: %d %s", code, b)
	}
	c.createPod(sleepPod("day", "sparse", `"terminationGracePeriodSeconds":86400,`))
	c.waitPhase("day", model.PodRunning, true, 90*time.Second)
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/day", nil); code != 200 {
		t.Fatalf("graceful delete: %d %s", code, b)
	}
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/day?gracePeriodSeconds=0", nil); code != 200 {
		t.Fatalf("forced delete: %d %s", code, b)
	}
	c.waitGone("day", 60*time.Second)
	c.assertClean()
	c.waitClosed("day")
}

// A Failed pod's address goes back to the pool, so its status stops
// showing it: another pod may hold it next.
func TestAFailedPodShowsNoReleasedAddress(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(`{"metadata":{"name":"fails"},"spec":{"restartPolicy":"Never",
	  "containers":[{"name":"app","image":"base","command":["sh","-c","sleep 1; exit 3"]}]}}`)
	p := c.waitPhase("fails", model.PodFailed, false, 90*time.Second)
	if p.Status.PodIP != "" {
		t.Fatalf("a Failed pod whose address was released shows podIP %s", p.Status.PodIP)
	}
	if !strings.Contains(c.events("fails"), "Started") {
		t.Fatalf("the pod never started:\n%s", c.events("fails"))
	}
	c.createPod(sleepPod("next", "sparse", ""))
	next := c.waitPhase("next", model.PodRunning, true, 90*time.Second)
	if p, _ := c.pod("fails"); p.Status.PodIP != "" && p.Status.PodIP == next.Status.PodIP {
		t.Fatalf("two pods show podIP %s", next.Status.PodIP)
	}
}

// A forced delete ends a pod even when its lifecycle fails every workflow
// task (here: a lifecycle of a type no worker knows) and so takes no
// signal: the lifecycle is terminated and the row goes.
func TestAForcedDeleteEndsAPodWhoseLifecycleFailsItsTasks(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(sleepPod("stuck", "sparse", ""))
	c.waitPhase("stuck", model.PodRunning, true, 90*time.Second)
	ctx := context.Background()
	id := podcontract.WorkflowID("default", "stuck")
	if err := c.temporal.TerminateWorkflow(ctx, id, "", "replaced by a lifecycle that fails its tasks"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.temporal.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: id, TaskQueue: taskqueue.Control}, "NoSuchLifecycle"); err != nil {
		t.Fatal(err)
	}
	pods := workflows.PodClient{Temporal: c.temporal}
	c.eventually(60*time.Second, "the lifecycle to fail its tasks", func() bool {
		failing, err := pods.FailingTasks(ctx, "default", "stuck")
		return err == nil && failing
	})
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/stuck?gracePeriodSeconds=0", nil); code != 200 {
		t.Fatalf("forced delete: %d %s", code, b)
	}
	if _, ok := c.pod("stuck"); ok {
		t.Fatal("the pod is still there after a forced delete")
	}
	if running, err := pods.Running(ctx, "default", "stuck"); err != nil || running {
		t.Fatalf("the failing lifecycle still runs (%v)", err)
	}
	if !strings.Contains(c.events("stuck"), "ForceDeleted") {
		t.Fatalf("no ForceDeleted event:\n%s", c.events("stuck"))
	}
}

// What validation lets through, the host carries: an environment value
// with a tab, a newline and a carriage return reaches the container intact.
func TestAnEnvValueWithLineBreaksReachesTheContainer(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(`{"metadata":{"name":"env"},"spec":{"containers":[{"name":"app","image":"base",
	  "command":["sh","-c","printf '[%s]' \"$MULTI\" | od -An -c | tr -s ' '; sleep 3600"],
	  "env":[{"name":"MULTI","value":"a\tb\nc\rd"}]}]}}`)
	c.waitPhase("env", model.PodRunning, false, 90*time.Second)
	want := `[ a \t b \n c \r d ]`
	c.eventually(30*time.Second, "the container to print its environment", func() bool {
		_, b := c.do("GET", "/api/v1/namespaces/default/pods/env/log", nil)
		return strings.Contains(string(b), want)
	})
}
