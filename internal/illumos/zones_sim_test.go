package illumos_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/illumos"
)

func webZoneConfig(name, vnic string) illumos.ZoneConfig {
	return illumos.ZoneConfig{
		Name:      name,
		Brand:     "sparse",
		Zonepath:  "/zones/" + name,
		LimitPriv: "default,dtrace_proc",
		Nets:      []illumos.Net{{Physical: vnic, AllowedAddress: "10.0.0.5/24", Defrouter: "10.0.0.1"}},
		CPUCap:    1.5,
		Memory:    &illumos.CappedMemory{Physical: 1 << 30, Swap: 2 << 30},
		FS:        []illumos.FS{{Dir: "/data", Special: "/tank/data", Type: "lofs", Options: []string{"ro", "nodevices"}}},
		Attrs: []illumos.Attr{
			{Name: "dns-domain", Type: "string", Value: "cluster.local"},
			{Name: "note", Type: "string", Value: "a b; delete -F # not a command"},
			{Name: "kw", Type: "string", Value: "net"},
		},
		Datasets: []string{"tank/delegated"},
	}
}

// normalise fills what zonecfg reports for fields a ZoneConfig may leave
// empty, so a read-back config compares equal to the one applied.
func normalise(c illumos.ZoneConfig) illumos.ZoneConfig {
	if c.IPType == "" {
		c.IPType = illumos.IPExclusive
	}
	return c
}

func TestZoneLifecycle(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	zc, za, dl := n.host.Zonecfg(), n.host.Zoneadm(), n.host.Dladm()
	const name = "web01"

	must(t, "create vnic", dl.CreateVNIC(ctx, illumos.VNICSpec{Name: "web0", Over: "net0"}))
	must(t, "create the delegated dataset", n.host.ZFS().Create(ctx, "tank/delegated", nil))
	must(t, "create the lofs mount's special", n.host.ZFS().Create(ctx, "tank/data", nil))

	_, err := za.Get(ctx, name)
	wantKind(t, "get before configuring", err, illumos.ErrNotFound)

	cfg := webZoneConfig(name, "web0")
	must(t, "zonecfg create", zc.Create(ctx, cfg))
	wantKind(t, "zonecfg create again", zc.Create(ctx, cfg), illumos.ErrAlreadyExists)

	info, err := zc.Info(ctx, name)
	must(t, "zonecfg info", err)
	if want := normalise(cfg); !reflect.DeepEqual(info.Config, want) {
		t.Errorf("zonecfg info reads back\n%+v\nwant\n%+v", info.Config, want)
	}
	export, err := zc.Export(ctx, name)
	must(t, "zonecfg export", err)
	if !strings.Contains(export, "set zonepath=/zones/web01") || !strings.Contains(export, "add net") {
		t.Errorf("export:\n%s", export)
	}

	z, err := za.Get(ctx, name)
	must(t, "get", err)
	if z.State != illumos.ZoneConfigured || z.ID != -1 || z.Brand != "sparse" || z.IPType != illumos.IPExclusive || z.Path != "/zones/web01" {
		t.Errorf("configured zone = %+v", z)
	}
	zones, err := za.List(ctx)
	must(t, "list", err)
	if len(zones) != 2 || zones[0].Name != "global" || zones[0].ID != 0 || zones[0].IPType != illumos.IPShared || zones[1].Name != name {
		t.Errorf("list = %+v", zones)
	}

	wantKind(t, "boot a configured zone", za.Boot(ctx, name), illumos.ErrWrongState)
	wantKind(t, "uninstall a configured zone", za.Uninstall(ctx, name), illumos.ErrWrongState)
	must(t, "verify", za.Verify(ctx, name))

	must(t, "install", za.Install(ctx, name, illumos.InstallOptions{}))
	wantKind(t, "install again", za.Install(ctx, name, illumos.InstallOptions{}), illumos.ErrAlreadyExists)
	if z, _ := za.Get(ctx, name); z.State != illumos.ZoneInstalled {
		t.Errorf("after install: %+v", z)
	}
	wantKind(t, "replace the config of an installed zone", zc.Replace(ctx, cfg), illumos.ErrAlreadyExists)

	must(t, "boot", za.Boot(ctx, name))
	must(t, "boot a running zone (exit 0, 'already booted')", za.Boot(ctx, name))
	z, err = za.Get(ctx, name)
	must(t, "get running", err)
	if z.State != illumos.ZoneRunning || z.ID < 1 {
		t.Errorf("after boot: %+v", z)
	}
	if v, err := dl.VNIC(ctx, "web0"); err != nil || v.Zone != name {
		t.Errorf("the vnic of a running zone: %+v, %v", v, err)
	}
	wantKind(t, "uninstall a running zone", za.Uninstall(ctx, name), illumos.ErrWrongState)
	wantKind(t, "delete the config of a running zone", zc.Delete(ctx, name), illumos.ErrWrongState)
	wantKind(t, "delete the vnic of a running zone", dl.DeleteVNIC(ctx, "web0"), illumos.ErrBusy)

	must(t, "reboot", za.Reboot(ctx, name))
	must(t, "halt", za.Halt(ctx, name))
	must(t, "halt a halted zone (exit 0)", za.Halt(ctx, name))
	wantKind(t, "reboot a halted zone", za.Reboot(ctx, name), illumos.ErrWrongState)
	must(t, "ready", za.Ready(ctx, name))
	if z, _ := za.Get(ctx, name); z.State != illumos.ZoneReady {
		t.Errorf("after ready: %+v", z)
	}
	must(t, "boot from ready", za.Boot(ctx, name))
	must(t, "shutdown", za.Shutdown(ctx, name))
	if z, _ := za.Get(ctx, name); z.State != illumos.ZoneInstalled {
		t.Errorf("after shutdown: %+v", z)
	}

	must(t, "uninstall", za.Uninstall(ctx, name))
	if z, _ := za.Get(ctx, name); z.State != illumos.ZoneConfigured {
		t.Errorf("after uninstall: %+v", z)
	}
	must(t, "replace the config of a configured zone", zc.Replace(ctx, webZoneConfig(name, "web1")))
	if info, err := zc.Info(ctx, name); err != nil || info.Config.Nets[0].Physical != "web1" {
		t.Errorf("after replace: %+v, %v", info.Config.Nets, err)
	}
	must(t, "zonecfg delete", zc.Delete(ctx, name))
	wantKind(t, "zonecfg delete again", zc.Delete(ctx, name), illumos.ErrNotFound)
	_, err = zc.Info(ctx, name)
	wantKind(t, "info of a deleted zone", err, illumos.ErrNotFound)
	wantKind(t, "halt a deleted zone", za.Halt(ctx, name), illumos.ErrNotFound)
	must(t, "delete the vnic of a deleted zone", dl.DeleteVNIC(ctx, "web0"))
}

func TestZonecfgRoundTripsEveryBrand(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	zc := n.host.Zonecfg()
	configs := []illumos.ZoneConfig{
		{
			Name: "lx01", Brand: "lx", Zonepath: "/zones/lx01",
			Nets:  []illumos.Net{{Physical: "lx0", AllowedAddress: "10.0.0.9/24", Defrouter: "10.0.0.1"}},
			Attrs: []illumos.Attr{{Name: "kernel-version", Type: "string", Value: "4.4"}},
		},
		{
			Name: "vm0", Brand: "bhyve", Zonepath: "/zones/vm0",
			Nets:    []illumos.Net{{Physical: "vm0nic0"}},
			Devices: []string{"/dev/zvol/rdsk/tank/vm0"},
			Bhyve:   &illumos.BhyveConfig{VCPUs: 2, RAM: 4 << 30, BootDisk: "tank/vm0"},
		},
		{
			Name: "quoted", Brand: "sparse", Zonepath: "/zones/with space/quoted", Autoboot: true,
			FS:    []illumos.FS{{Dir: "/mnt/a;b", Special: "/src#x", Type: "lofs", Options: []string{"ro", "size=10m"}}},
			Attrs: []illumos.Attr{{Name: "evil", Type: "string", Value: "x; delete -F; add net"}},
		},
	}
	for _, cfg := range configs {
		t.Run(cfg.Name, func(t *testing.T) {
			must(t, "create", zc.Create(ctx, cfg))
			info, err := zc.Info(ctx, cfg.Name)
			must(t, "info", err)
			if want := normalise(cfg); !reflect.DeepEqual(info.Config, want) {
				t.Errorf("reads back\n%+v\nwant\n%+v", info.Config, want)
			}
		})
	}
	// Nothing a value said was executed: every zone is still there.
	zones, err := n.host.Zoneadm().List(ctx)
	must(t, "list", err)
	if len(zones) != 1+len(configs) {
		t.Errorf("zones = %+v", zones)
	}
}

func TestZoneInstallBrandsAndClone(t *testing.T) {
	ctx := ctxT(t)
	n := newNode(t, "node1")
	zc, za := n.host.Zonecfg(), n.host.Zoneadm()

	must(t, "create lx", zc.Create(ctx, illumos.ZoneConfig{Name: "lx01", Brand: "lx", Zonepath: "/zones/lx01"}))
	// An lx install from an image that is not there fails and leaves the
	// zone configured (a usage/brand failure), not installed.
	if err := za.Install(ctx, "lx01", illumos.InstallOptions{Tarball: "/images/nope.tar.gz"}); err == nil {
		t.Fatal("install from a missing image succeeded")
	}
	must(t, "create a dataset to install from", n.host.ZFS().Create(ctx, "tank/images/ubuntu", nil))
	must(t, "snapshot it", n.host.ZFS().Snapshot(ctx, "tank/images/ubuntu", "v1"))
	must(t, "install lx from a snapshot", za.Install(ctx, "lx01", illumos.InstallOptions{Source: "tank/images/ubuntu@v1"}))
	if z, _ := za.Get(ctx, "lx01"); z.State != illumos.ZoneInstalled || z.Brand != "lx" {
		t.Errorf("lx zone: %+v", z)
	}

	must(t, "create bhyve", zc.Create(ctx, illumos.ZoneConfig{Name: "vm0", Brand: "bhyve", Zonepath: "/zones/vm0",
		Bhyve: &illumos.BhyveConfig{BootDisk: "tank/vm0"}}))
	must(t, "create its disk", n.host.ZFS().CreateVolume(ctx, "tank/vm0", 1<<30, nil))
	must(t, "install bhyve", za.Install(ctx, "vm0", illumos.InstallOptions{}))

	must(t, "create the clone's config", zc.Create(ctx, illumos.ZoneConfig{Name: "lx02", Brand: "lx", Zonepath: "/zones/lx02"}))
	must(t, "clone", za.Clone(ctx, "lx02", "lx01"))
	if z, _ := za.Get(ctx, "lx02"); z.State != illumos.ZoneInstalled {
		t.Errorf("clone: %+v", z)
	}
	wantKind(t, "clone onto an installed zone", za.Clone(ctx, "lx02", "lx01"), illumos.ErrAlreadyExists)
	must(t, "create another config", zc.Create(ctx, illumos.ZoneConfig{Name: "lx03", Brand: "lx", Zonepath: "/zones/lx03"}))
	wantKind(t, "clone from a missing zone", za.Clone(ctx, "lx03", "nosuch"), illumos.ErrNotFound)
}

func TestNodesAreIndependent(t *testing.T) {
	ctx := ctxT(t)
	n1, n2 := newNode(t, "node1"), newNode(t, "node2")
	must(t, "create on node1", n1.host.Zonecfg().Create(ctx, illumos.ZoneConfig{Name: "only1", Zonepath: "/zones/only1"}))
	_, err := n2.host.Zoneadm().Get(ctx, "only1")
	wantKind(t, "the zone on node2", err, illumos.ErrNotFound)
	f1, err := n1.host.Facts(ctx, "")
	must(t, "facts node1", err)
	f2, err := n2.host.Facts(ctx, "")
	must(t, "facts node2", err)
	if f1.Hostname != "node1" || f2.Hostname != "node2" {
		t.Errorf("hostnames %q, %q", f1.Hostname, f2.Hostname)
	}
}
