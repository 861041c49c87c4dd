package host_test

import (
	"slices"
	"testing"

	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/simtest"
)

func TestInventoryListsOnlyZonewrightResourcesAndRemoveOrphanTearsDown(t *testing.T) {
	n := newNode(t)
	ctx := t.Context()
	h := n.ops.Host
	web := sandbox("web", "127.10.8.2")
	for _, step := range []any{n.host.CreateDatasets, n.host.CreateVNIC, n.host.ConfigureZone, n.host.InstallZone, n.host.BootZone} {
		n.must(t, "provision", step, web)
	}
	// Foreign: a zone without zonewright attrs, one with a derived-looking
	// name but no zonewright dataset, a VNIC with another name over the
	// etherstub, a zonewright-looking VNIC over another link, a dataset
	// with another name.
	lookalike := hostapi.PodSandbox{Namespace: "x", Name: "y", UID: "z"}.ZoneName()
	for _, name := range []string{"operator-db", lookalike} {
		if err := h.Zonecfg().Create(ctx, illumos.ZoneConfig{Name: name, Zonepath: zonesPath + "/" + name}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Dladm().CreateEtherstub(ctx, "other0"); err != nil {
		t.Fatal(err)
	}
	strayOther := names.LinkName("zw", "elsewhere")
	for _, v := range []illumos.VNICSpec{{Name: "ops0", Over: etherstub}, {Name: strayOther, Over: "other0"}} {
		if err := h.Dladm().CreateVNIC(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.ZFS().Create(ctx, zonesDataset+"/backups", nil); err != nil {
		t.Fatal(err)
	}
	// A lone zonewright VNIC, left by a pod whose zone is gone.
	lone := sandbox("lone", "127.10.8.3")
	n.must(t, "CreateVNIC", n.host.CreateVNIC, lone)

	var inv hostapi.HostInventory
	if err := n.must(t, "Inventory", n.host.Inventory).Get(&inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.Zones) != 1 || inv.Zones[0].Name != web.ZoneName() || inv.Zones[0].Pod != "default/web" || inv.Zones[0].UID != "uid-web" ||
		inv.Zones[0].State != "running" || inv.Zones[0].Brand != "sparse" || !slices.Equal(inv.Zones[0].VNICs, []string{web.VNICName()}) {
		t.Errorf("zones %+v", inv.Zones)
	}
	if want := []string{lone.VNICName(), web.VNICName()}; !sameSet(inv.VNICs, want) {
		t.Errorf("VNICs %v, want %v", inv.VNICs, want)
	}
	if want := []string{zonesDataset + "/" + web.ZoneName()}; !slices.Equal(inv.Datasets, want) {
		t.Errorf("datasets %v, want %v", inv.Datasets, want)
	}

	plan := hostops.PlanHost(inv, nil)
	if len(plan.Orphans) != 2 {
		t.Fatalf("orphans %+v", plan.Orphans)
	}
	// A stale decision: the zone now belongs to another uid. Left alone.
	i := slices.IndexFunc(plan.Orphans, func(o hostapi.Orphan) bool { return o.Zone == web.ZoneName() })
	if i < 0 {
		t.Fatalf("the zone is no orphan: %+v", plan.Orphans)
	}
	stale := plan.Orphans[i]
	stale.UID = "uid-someone-else"
	if _, err := n.run(t, n.host.RemoveOrphan, stale); err == nil || appError(t, err).Type() != hostacts.ErrTypeConflict {
		t.Fatalf("RemoveOrphan of a zone that belongs to another uid: %v", err)
	}
	if z, err := h.Zoneadm().Get(ctx, web.ZoneName()); err != nil || z.State != illumos.ZoneRunning {
		t.Fatalf("the zone was touched by a refused removal: %+v %v", z, err)
	}
	for _, o := range plan.Orphans {
		n.twice(t, "RemoveOrphan "+o.Key, n.host.RemoveOrphan, o)
	}
	if err := n.must(t, "Inventory", n.host.Inventory).Get(&inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.Zones)+len(inv.VNICs)+len(inv.Datasets) != 0 {
		t.Errorf("left after RemoveOrphan: %+v", inv)
	}
	st := n.sim.State(t)
	for _, name := range []string{"operator-db", lookalike} {
		if !slices.ContainsFunc(st.Zones, func(z simtest.Zone) bool { return z.Name == name }) {
			t.Errorf("foreign zone %s was removed", name)
		}
	}
	for _, l := range []string{"ops0", strayOther} {
		if !slices.ContainsFunc(st.Links, func(x simtest.Link) bool { return x.Name == l }) {
			t.Errorf("foreign link %s was removed", l)
		}
	}
	if !slices.ContainsFunc(st.Datasets, func(d simtest.Dataset) bool { return d.Name == zonesDataset+"/backups" }) {
		t.Error("a foreign dataset was removed")
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// An installed zone's configuration is read once, not at every
// inventory: the node's reconciliation would otherwise cost a zonecfg per
// pod every pass. A zone configured again is read again.
func TestInventoryReadsAnInstalledZonesConfigurationOnce(t *testing.T) {
	n := newNode(t)
	web := sandbox("web", "127.10.8.4")
	for _, step := range []any{n.host.CreateDatasets, n.host.CreateVNIC, n.host.ConfigureZone, n.host.InstallZone} {
		n.must(t, "provision", step, web)
	}
	inventory := func(what string) hostapi.HostInventory {
		t.Helper()
		var inv hostapi.HostInventory
		if err := n.must(t, what, n.host.Inventory).Get(&inv); err != nil {
			t.Fatal(err)
		}
		return inv
	}
	inventory("Inventory")
	// Every zonecfg fails from now on: a second inventory must not need one.
	n.sim.Run(t, "fault", "fail-next", "zonecfg", "100", "--stderr", "zonecfg: unexpected", "--exit", "1")
	if inv := inventory("Inventory again"); len(inv.Zones) != 1 || inv.Zones[0].UID != "uid-web" {
		t.Fatalf("zones %+v", inv.Zones)
	}
	n.sim.Run(t, "fault", "clear")
	for _, step := range []any{n.host.UninstallZone, n.host.DeleteZoneConfig, n.host.ConfigureZone, n.host.InstallZone} {
		n.must(t, "provision again", step, web)
	}
	n.sim.Run(t, "fault", "fail-next", "zonecfg", "1", "--stderr", "zonecfg: unexpected", "--exit", "1")
	if _, err := n.run(t, n.host.Inventory); err == nil {
		t.Fatal("a zone configured again was not read again")
	}
}
