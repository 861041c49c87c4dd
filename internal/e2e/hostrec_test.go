package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/simtest"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// hostState is node i's whole `illumos-sim state`: zone ids, supervisors
// and service processes included.
func (c *cluster) hostState(i int) simtest.State {
	c.t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "illumos-sim"), "state", "--root", c.nodes.Nodes[i].Root).Output()
	if err != nil {
		c.t.Fatalf("illumos-sim state: %v", err)
	}
	var s simtest.State
	if err := json.Unmarshal(out, &s); err != nil {
		c.t.Fatalf("parse illumos-sim state: %v", err)
	}
	return s
}

func findZone(s simtest.State, name string) (simtest.Zone, bool) {
	i := slices.IndexFunc(s.Zones, func(z simtest.Zone) bool { return z.Name == name })
	if i < 0 {
		return simtest.Zone{}, false
	}
	return s.Zones[i], true
}

func linkExists(s simtest.State, name string) bool {
	return slices.ContainsFunc(s.Links, func(l simtest.Link) bool { return l.Name == name })
}

func datasetExists(s simtest.State, name string) bool {
	return slices.ContainsFunc(s.Datasets, func(d simtest.Dataset) bool { return d.Name == name })
}

// nodeHost is node i's host activities, run from the test against the
// node's simulated commands: what an operator typing zonecfg and zoneadm
// on the host would make.
func (c *cluster) nodeHost(i int) *hostops.Host {
	return &hostops.Host{Host: illumos.Host{Runner: &illumos.Runner{BinDir: c.nodes.Nodes[i].BinDir}},
		Node: c.nodes.Nodes[i].Name, Etherstub: "zwstub0", ZonesDataset: "tank/zonewright/zones", ZonesPath: "/zonewright/zones",
		ZonesDir: filepath.Join(c.nodes.Nodes[i].Root, "fs", "zonewright", "zones")}
}

// nodeEvents are the events recorded on a Node with the given reason.
func (c *cluster) nodeEvents(node, reason string) []model.Event {
	c.t.Helper()
	var list model.List[model.Event]
	c.get("/api/v1/events?fieldSelector=involvedObject.kind%3DNode,involvedObject.name%3D"+node+",reason%3D"+reason, &list)
	return list.Items
}

func (c *cluster) podEvents(name, reason string) []model.Event {
	c.t.Helper()
	var list model.List[model.Event]
	c.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D"+name+",reason%3D"+reason, &list)
	return list.Items
}

func (c *cluster) exec(sql string, args ...any) {
	c.t.Helper()
	conn, err := pgx.Connect(context.Background(), c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		c.t.Fatalf("%s: %v", sql, err)
	}
}

// The host reconciler reports a zonewright zone that no pod owns, removes
// it with its VNIC and dataset once the grace period has passed, leaves a
// zone zonewright did not create alone, never takes a running pod's zone
// for an orphan, and reports a pod whose zone was halted behind its back.
func TestReconcilerRemovesOrphansAfterTheGracePeriod(t *testing.T) {
	t.Parallel()
	const grace = 6 * time.Second
	c := newCluster(t, 1, "--reconcile-interval", "2s", "--orphan-grace", grace.String())
	ctx := context.Background()
	c.createPod(sleepPod("app", "sparse", ""))
	app := c.waitPhase("app", model.PodRunning, false, 90*time.Second)
	appSandbox := hostapi.PodSandbox{Namespace: "default", Name: "app", UID: app.Metadata.UID}

	// By hand on the host: a zone with zonewright's names and attributes
	// for a pod that does not exist, and an operator's own zone.
	h := c.nodeHost(0)
	ghost := hostapi.PodSandbox{Namespace: "default", Name: "ghost", UID: "4f0c2a8e-0000-4000-8000-00000000beef",
		IP: "127.10.1.200", PrefixLen: 24}
	for _, step := range []func(context.Context, hostapi.PodSandbox) error{h.CreateDatasets, h.CreateVNIC, h.ConfigureZone, h.InstallZone, h.BootZone} {
		if err := step(ctx, ghost); err != nil {
			t.Fatal(err)
		}
	}
	za := h.Host.Zoneadm()
	if err := h.Host.Zonecfg().Create(ctx, illumos.ZoneConfig{Name: "legacy-app", Zonepath: "/zones/legacy-app"}); err != nil {
		t.Fatal(err)
	}
	if err := za.Install(ctx, "legacy-app", illumos.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := za.Boot(ctx, "legacy-app"); err != nil {
		t.Fatal(err)
	}
	made := time.Now()

	c.eventually(30*time.Second, "an OrphanFound event for the ghost zone", func() bool {
		for _, e := range c.nodeEvents("node-1", hostapi.ReasonOrphanFound) {
			if strings.Contains(e.Message, ghost.ZoneName()) {
				return true
			}
		}
		return false
	})
	if _, ok := findZone(c.hostState(0), ghost.ZoneName()); !ok && time.Since(made) < grace {
		t.Fatalf("the orphan was removed %s after it appeared, before its grace period of %s", time.Since(made), grace)
	}
	c.eventually(60*time.Second, "the ghost zone, VNIC and dataset to be removed", func() bool {
		s := c.hostState(0)
		_, zone := findZone(s, ghost.ZoneName())
		return !zone && !linkExists(s, ghost.VNICName()) && !datasetExists(s, "tank/zonewright/zones/"+ghost.ZoneName())
	})
	if took := time.Since(made); took < grace {
		t.Errorf("the orphan was removed %s after it appeared, before its grace period of %s", took, grace)
	}
	c.eventually(10*time.Second, "an OrphanRemoved event", func() bool {
		for _, e := range c.nodeEvents("node-1", hostapi.ReasonOrphanRemoved) {
			if strings.Contains(e.Message, ghost.ZoneName()) {
				return true
			}
		}
		return false
	})
	s := c.hostState(0)
	if z, ok := findZone(s, "legacy-app"); !ok || z.State != "running" {
		t.Errorf("the operator's zone was touched: %+v (found %t)", z, ok)
	}
	if z, ok := findZone(s, appSandbox.ZoneName()); !ok || z.State != "running" {
		t.Errorf("the running pod's zone was touched: %+v (found %t)", z, ok)
	}
	// Reported once, not at every pass. (A pass that ran while the ghost
	// was being made by hand may have reported its dataset alone before.)
	var zoneReports []model.Event
	for _, e := range c.nodeEvents("node-1", hostapi.ReasonOrphanFound) {
		if strings.Contains(e.Message, "zone "+ghost.ZoneName()) {
			zoneReports = append(zoneReports, e)
		}
	}
	if occurrences(zoneReports) != 1 {
		t.Errorf("OrphanFound events of the ghost zone: %+v", zoneReports)
	}

	// Drift: the pod's zone halted behind zonewright's back is reported,
	// and the pod's lifecycle boots it again (restartPolicy Always). The
	// lifecycle is stopped first (a crashed worker), so that the reconciler
	// alone can notice the halt, and restarts it.
	if err := c.temporal.TerminateWorkflow(ctx, podcontract.WorkflowID("default", "app"), "", "simulated crash"); err != nil {
		t.Fatal(err)
	}
	if err := za.Halt(ctx, appSandbox.ZoneName()); err != nil {
		t.Fatal(err)
	}
	c.eventually(30*time.Second, "a ZoneNotRunning event on the pod", func() bool {
		return len(c.podEvents("app", hostops.DriftZoneNotRunning)) > 0
	})
	c.eventually(60*time.Second, "the pod's zone to run again", func() bool {
		z, ok := findZone(c.hostState(0), appSandbox.ZoneName())
		return ok && z.State == "running"
	})
	c.waitPhase("app", model.PodRunning, false, 30*time.Second)
}

// Restarting a healthy agent leaves its running pods untouched (same zone,
// same zone id, same processes: not reinstalled, not rebooted), while the
// resources of pods that stopped being bound to the node while it was
// away (one deleted, one bound elsewhere under the same name and UID) are
// removed before the node reports Ready.
func TestAgentRestartAdoptsItsPodsAndRemovesUnboundOnes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	ctx := context.Background()
	for _, name := range []string{"keep", "gone", "moved"} {
		c.createPod(sleepPod(name, "sparse", ""))
	}
	sandboxes := map[string]hostapi.PodSandbox{}
	for _, name := range []string{"keep", "gone", "moved"} {
		p := c.waitPhase(name, model.PodRunning, true, 90*time.Second)
		sandboxes[name] = hostapi.PodSandbox{Namespace: "default", Name: name, UID: p.Metadata.UID}
	}
	before := c.hostState(0)
	keepZone, ok := findZone(before, sandboxes["keep"].ZoneName())
	if !ok || keepZone.State != "running" || len(keepZone.Services) == 0 {
		t.Fatalf("kept pod's zone before the restart: %+v", keepZone)
	}

	if code := c.nodes.Terminate(0); code != 0 {
		t.Fatalf("the agent exited %d on SIGTERM, want 0", code)
	}
	// While the agent is away: one pod is deleted outright, another is
	// bound to another node (as an eviction would), keeping name and UID.
	for _, name := range []string{"gone", "moved"} {
		if err := c.temporal.TerminateWorkflow(ctx, podcontract.WorkflowID("default", name), "", "test: the pod leaves node-1"); err != nil {
			t.Fatal(err)
		}
	}
	c.exec("DELETE FROM pods WHERE namespace = 'default' AND name = 'gone'")
	c.exec(`UPDATE pods SET spec = jsonb_set(spec, '{nodeName}', '"node-9"') WHERE namespace = 'default' AND name = 'moved'`)
	if after := c.hostState(0); len(after.Zones) != len(before.Zones) {
		t.Fatalf("zones changed while the agent was stopped: %d, were %d", len(after.Zones), len(before.Zones))
	}

	restarted := time.Now()
	if err := c.nodes.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	c.eventually(60*time.Second, "node-1 to heartbeat again", func() bool {
		var n model.Node
		c.get("/api/v1/nodes/node-1", &n)
		for _, cond := range n.Status.Conditions {
			if cond.Type == model.NodeReady && cond.Status == model.ConditionTrue && cond.LastHeartbeatTime != nil && cond.LastHeartbeatTime.After(restarted) {
				return true
			}
		}
		return false
	})
	// The cleanup ran before the first heartbeat.
	after := c.hostState(0)
	for _, name := range []string{"gone", "moved"} {
		s := sandboxes[name]
		if _, ok := findZone(after, s.ZoneName()); ok || linkExists(after, s.VNICName()) || datasetExists(after, "tank/zonewright/zones/"+s.ZoneName()) {
			t.Errorf("resources of %s, no longer bound to node-1, are still there after the agent restarted", name)
		}
	}
	assertUntouched := func(when string) {
		t.Helper()
		z, ok := findZone(c.hostState(0), sandboxes["keep"].ZoneName())
		if !ok || z.State != "running" || z.ID != keepZone.ID || z.SupervisorPID != keepZone.SupervisorPID {
			t.Fatalf("%s: the kept pod's zone is %+v (found %t), was %+v", when, z, ok, keepZone)
		}
		if len(z.Services) != len(keepZone.Services) {
			t.Fatalf("%s: services %+v, were %+v", when, z.Services, keepZone.Services)
		}
		for i, svc := range z.Services {
			if old := keepZone.Services[i]; svc.PID != old.PID || svc.Restarts != old.Restarts || svc.State != old.State {
				t.Fatalf("%s: service %s restarted: %+v, was %+v", when, svc.FMRI, svc, old)
			}
		}
	}
	assertUntouched("right after the restart")
	if occurrences(c.podEvents("keep", "ZoneAdopted")) != 1 {
		t.Errorf("not one ZoneAdopted event for the kept pod:\n%s", c.events("keep"))
	}
	// A monitor period and more later, the lifecycle has looked at the
	// adopted zone and left it as it is.
	time.Sleep(15 * time.Second)
	assertUntouched("15s after the restart")
	p := c.waitPhase("keep", model.PodRunning, true, 5*time.Second)
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("container statuses after the restart: %+v", p.Status.ContainerStatuses)
	}
}

// SIGTERM to the agent while a zone install runs: the agent stops
// polling, lets the install finish, exits 0, and the zones it runs keep
// running; started again, it adopts the installed zone and the pod's
// lifecycle carries on to Running.
func TestAgentSIGTERMLetsARunningInstallFinish(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, "--shutdown-timeout", "40s")
	c.createPod(sleepPod("first", "sparse", ""))
	first := c.waitPhase("first", model.PodRunning, false, 90*time.Second)
	firstZone := hostapi.PodSandbox{Namespace: "default", Name: "first", UID: first.Metadata.UID}.ZoneName()
	runningBefore, _ := findZone(c.hostState(0), firstZone)

	c.sim(0, "fault", "latency", "zoneadm install", "8s")
	second := c.createPod(sleepPod("second", "sparse", ""))
	secondZone := hostapi.PodSandbox{Namespace: "default", Name: "second", UID: second.Metadata.UID}.ZoneName()
	c.eventually(60*time.Second, "the second pod's install to be running", func() bool {
		z, ok := findZone(c.hostState(0), secondZone)
		return ok && z.State == "incomplete"
	})
	start := time.Now()
	code := c.nodes.Terminate(0)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("the agent exited %d on SIGTERM, want 0", code)
	}
	s := c.hostState(0)
	// The provision in flight finished its install (and what followed).
	if z, ok := findZone(s, secondZone); !ok || (z.State != "installed" && z.State != "running") {
		t.Fatalf("the install in flight at SIGTERM did not complete: %+v (found %t)", z, ok)
	}
	if z, ok := findZone(s, firstZone); !ok || z.State != "running" || z.ID != runningBefore.ID {
		t.Fatalf("a running zone did not keep running through the agent's stop: %+v, was %+v", z, runningBefore)
	}
	t.Logf("the agent drained and exited %s after SIGTERM", took.Round(time.Millisecond))

	c.sim(0, "fault", "clear")
	if err := c.nodes.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	c.waitPhase("second", model.PodRunning, false, 90*time.Second)
	if z, ok := findZone(c.hostState(0), firstZone); !ok || z.ID != runningBefore.ID {
		t.Errorf("the first pod's zone was rebooted across the agent's restart: %+v, was %+v", z, runningBefore)
	}
}

// With --max-concurrent-installs 2 and slow installs, no more than two
// zones are ever being installed at once on the node, as the simulator's
// own state shows (a zone is incomplete while zoneadm install runs).
func TestConcurrentInstallsNeverExceedTheLimit(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, "--max-concurrent-installs", "2")
	c.sim(0, "fault", "latency", "zoneadm install", "3s")
	const pods = 5
	for i := range pods {
		c.createPod(sleepPod(fmt.Sprintf("burst-%d", i), "sparse", ""))
	}
	peak := 0
	installed := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for len(installed) < pods {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d zones installed in time", len(installed), pods)
		}
		n := 0
		for _, z := range c.hostState(0).Zones {
			switch z.State {
			case "incomplete":
				n++
			case "installed", "ready", "running":
				installed[z.Name] = true
			}
		}
		if n > 2 {
			t.Fatalf("%d zones being installed at once; the limit is 2", n)
		}
		peak = max(peak, n)
		time.Sleep(50 * time.Millisecond)
	}
	if peak != 2 {
		t.Errorf("at most %d installs ran at once; with %d pods waiting the limit of 2 should be reached", peak, pods)
	}
	for i := range pods {
		c.waitPhase(fmt.Sprintf("burst-%d", i), model.PodRunning, false, 90*time.Second)
	}
}
