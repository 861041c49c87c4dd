package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// A zone that stops again while its pod's lifecycle boots it back, as
// when its node's whole stack is restarted (every zone halted) in the
// middle of that boot, is booted once more and the pod runs on; it does
// not end Failed, ZoneStopped, because the zone it was starting
// containers in was down.
//
// Delete the WrongState start-over in zoneDown (workflows/pod_run.go) to
// see it fail: the pod ends Failed, ZoneStopped.
func TestAZoneHaltedAgainWhileItIsBootedIsBootedOnceMore(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(sleepPod("twice", "sparse", ""))
	p := c.waitPhase("twice", model.PodRunning, true, 2*time.Minute)
	zone := hostapi.PodSandbox{Namespace: "default", Name: "twice", UID: p.Metadata.UID}.ZoneName()
	running := func() bool {
		z, ok := findZone(c.hostState(0), zone)
		return ok && z.State == "running"
	}
	// Every zlogin on the node is slow: the steps after the boot (the
	// network, the containers) give a window to halt the zone in.
	c.sim(0, "fault", "latency", "zlogin", "4s")
	if err := c.nodeHost(0).Host.Zoneadm().Halt(context.Background(), zone); err != nil {
		t.Fatal(err)
	}
	c.eventually(time.Minute, "the halted zone to be booted", running)
	if err := c.nodeHost(0).Host.Zoneadm().Halt(context.Background(), zone); err != nil {
		t.Fatal(err)
	}
	c.sim(0, "fault", "clear")
	c.eventually(3*time.Minute, "the zone halted while it was booted to be booted again and its pod rebooted", func() bool {
		if p, _ := c.pod("twice"); p.Status.Phase == model.PodFailed {
			t.Fatalf("the pod failed: %s: %s\nevents:\n%s", p.Status.Reason, p.Status.Message, c.events("twice"))
		}
		return running() && strings.Count(c.events("twice"), "ZoneRebooted") >= 1
	})
	c.waitPhase("twice", model.PodRunning, true, time.Minute)
}
