package agent_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/simtest"
	"github.com/zonewright/zonewright/internal/store"
)

// provision builds a pod's zone on the node the way the lifecycle does,
// through the host activities, and boots it.
func provision(t *testing.T, h *hostops.Host, s hostapi.PodSandbox) {
	t.Helper()
	ctx := t.Context()
	steps := []func(context.Context, hostapi.PodSandbox) error{h.CreateDatasets, h.CreateVNIC, h.ConfigureZone, h.InstallZone, h.BootZone}
	for _, step := range steps {
		if err := step(ctx, s); err != nil {
			t.Fatalf("provision %s/%s: %v", s.Namespace, s.Name, err)
		}
	}
}

func zoneOf(st simtest.State, name string) (simtest.Zone, bool) {
	i := slices.IndexFunc(st.Zones, func(z simtest.Zone) bool { return z.Name == name })
	if i < 0 {
		return simtest.Zone{}, false
	}
	return st.Zones[i], true
}

func hasLink(st simtest.State, name string) bool {
	return slices.ContainsFunc(st.Links, func(l simtest.Link) bool { return l.Name == name })
}

// An agent that starts removes the zones, VNICs and datasets of pods that
// are no longer bound to its node (deleted, or bound elsewhere under the
// same name and UID), adopts those of pods still bound without touching
// them, and leaves everything zonewright did not create alone.
func TestStartupCleanupRemovesUnboundPodsAndAdoptsBoundOnes(t *testing.T) {
	ctx := t.Context()
	st, log := newStore(t)
	if err := st.EnsureNamespace(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	tmp := devstack.StartTestTemporal(t)
	node := simtest.NewNode(t, "node1")
	host := illumos.Host{Runner: &illumos.Runner{BinDir: node.Bin}}
	h := &hostops.Host{Host: host, Node: "node1", Etherstub: "zwstub0",
		ZonesDataset: "tank/zonewright/zones", ZonesPath: "/zonewright/zones", ZonesDir: filepath.Join(node.Root, "fs", "zonewright", "zones"), Log: log}
	if err := host.Dladm().CreateEtherstub(ctx, "zwstub0"); err != nil {
		t.Fatal(err)
	}

	// Pod rows: kept is bound here; moved was evicted to node2 and keeps
	// its name and UID; gone has no row at all.
	pod := func(name, nodeName string) hostapi.PodSandbox {
		p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: "default"}}
		p.Spec.NodeName = nodeName
		p.Status.Phase = model.PodRunning
		if err := st.Pods().Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return hostapi.PodSandbox{Namespace: "default", Name: name, UID: p.Metadata.UID, IP: "127.10.9.5", PrefixLen: 24}
	}
	kept := pod("kept", "node1")
	moved := pod("moved", "node2")
	gone := hostapi.PodSandbox{Namespace: "default", Name: "gone", UID: "0d9c7c26-5d71-4e4c-9c1e-0b4a2f1e7d10", IP: "127.10.9.6", PrefixLen: 24}
	for _, s := range []hostapi.PodSandbox{kept, moved, gone} {
		provision(t, h, s)
	}
	// Foreign things: an operator's zone, a VNIC over the etherstub and a
	// dataset under the zones dataset, none with zonewright's names or attrs.
	if err := host.Zonecfg().Create(ctx, illumos.ZoneConfig{Name: "operator-db", Zonepath: "/zonewright/zones/operator-db"}); err != nil {
		t.Fatal(err)
	}
	if err := host.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: "ops0", Over: "zwstub0"}); err != nil {
		t.Fatal(err)
	}
	if err := host.ZFS().Create(ctx, "tank/zonewright/zones/backups", nil); err != nil {
		t.Fatal(err)
	}
	before, ok := zoneOf(node.State(t), kept.ZoneName())
	if !ok || before.State != "running" {
		t.Fatalf("kept zone before the agent starts: %+v", before)
	}

	stop := runAgent(t, startAPI(t, st, log).connect(t, agent.Config{Node: "node1", TemporalAddress: tmp.Address(), TemporalNamespace: tmp.Namespace(),
		PodCIDR: "127.10.9.0/24", BinDir: node.Bin, Version: "test", Logger: log}))
	waitNode(t, st, "registered and ready", func(n *model.Node) bool {
		c := n.Condition(model.NodeReady)
		return c != nil && c.Status == model.ConditionTrue
	})
	// Ready is reported only after the cleanup: check the host right away.
	after := node.State(t)
	z, ok := zoneOf(after, kept.ZoneName())
	if !ok || z.State != "running" || z.ID != before.ID || z.SupervisorPID != before.SupervisorPID {
		t.Errorf("the bound pod's zone was touched: before %+v, after %+v (found %t)", before, z, ok)
	}
	if !hasLink(after, kept.VNICName()) || !hasDataset(after, "tank/zonewright/zones/"+kept.ZoneName()) {
		t.Errorf("the bound pod lost its VNIC or dataset: %+v %+v", after.Links, after.Datasets)
	}
	for _, s := range []hostapi.PodSandbox{moved, gone} {
		if _, ok := zoneOf(after, s.ZoneName()); ok {
			t.Errorf("zone %s of unbound pod %s is still there", s.ZoneName(), s.Name)
		}
		if hasLink(after, s.VNICName()) || hasDataset(after, "tank/zonewright/zones/"+s.ZoneName()) {
			t.Errorf("VNIC or dataset of unbound pod %s is still there", s.Name)
		}
	}
	if _, ok := zoneOf(after, "operator-db"); !ok || !hasLink(after, "ops0") || !hasDataset(after, "tank/zonewright/zones/backups") {
		t.Errorf("a foreign zone, VNIC or dataset was removed: %+v", after)
	}

	events, err := st.Events().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var removed, adopted []string
	for _, e := range events.Items {
		for range e.Count { // a repeated event is one row that counts it
			switch e.Reason {
			case hostapi.ReasonOrphanRemoved:
				removed = append(removed, e.Message)
			case agent.ReasonZoneAdopted:
				adopted = append(adopted, e.InvolvedObject.Name)
			}
		}
	}
	if len(removed) != 2 || !strings.Contains(strings.Join(removed, "\n"), moved.ZoneName()) || !slices.Equal(adopted, []string{"kept"}) {
		t.Errorf("events: removed %q, adopted %q", removed, adopted)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
