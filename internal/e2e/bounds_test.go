package e2e_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
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
