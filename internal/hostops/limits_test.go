package hostops

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/simtest"
)

// limitedHost is a simulated node whose zones get a default quota of
// 1 GiB and at most 2000 processes and 8000 LWPs.
func limitedHost(t *testing.T) (*Host, *simtest.Node) {
	t.Helper()
	sim := simtest.NewNode(t, "node1")
	ih := illumos.Host{Runner: &illumos.Runner{BinDir: sim.Bin, Timeout: time.Minute}}
	for ds, mp := range map[string]string{"tank/zonewright/zones": "/zonewright/zones", "tank/zonewright/volumes": "/tank/zonewright/volumes"} {
		if err := ih.ZFS().Create(t.Context(), ds, map[string]string{"mountpoint": mp}); err != nil {
			t.Fatal(err)
		}
	}
	h := hostOn(ih, sim)
	h.ZoneQuota, h.MaxProcesses, h.MaxLWPs = 1<<30, 2000, 8000
	return h, sim
}

// hostOn is a Host of the simulated node, with no limits of its own.
func hostOn(ih illumos.Host, sim *simtest.Node) *Host {
	return &Host{Host: ih, Node: "node1", Etherstub: "zwstub0", ZonesDataset: "tank/zonewright/zones", ZonesPath: "/zonewright/zones",
		VolumesDataset: "tank/zonewright/volumes", ZonesDir: filepath.Join(sim.Root, "fs", "zonewright", "zones")}
}

func limitedPod(name string) hostapi.PodSandbox {
	return hostapi.PodSandbox{Namespace: "default", Name: name, UID: "uid-" + name, IP: "10.0.0.5", PrefixLen: 24, Gateway: "10.0.0.1"}
}

// zonecfgInfo is `zonecfg -z zone info` as the node prints it.
func zonecfgInfo(t *testing.T, sim *simtest.Node, zone string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(sim.Bin, "zonecfg"), "-z", zone, "info").CombinedOutput()
	if err != nil {
		t.Fatalf("zonecfg info: %v\n%s", err, out)
	}
	return string(out)
}

// A zone is bounded in disk, processes, LWPs and swap: by what its pod
// asks for (ephemeral-storage, the process annotations) within the
// node's limits, and by the node's defaults when it asks for nothing.
// Revert zone.go's zoneQuota use in CreateDatasets, the Swap of
// capped-memory, or the processLimit lines of zoneConfig to see this
// fail.
func TestZonesAreBoundedByTheirPodAndTheirNode(t *testing.T) {
	h, sim := limitedHost(t)
	ctx := t.Context()
	zfs := h.Host.ZFS()

	asks := limitedPod("asks")
	asks.EphemeralStorageBytes, asks.MemoryBytes = 512<<20, 256<<20
	asks.MaxProcesses, asks.MaxLWPs = 500, 9000 // fewer processes than the node's, more LWPs
	for _, step := range []func() error{
		func() error { return h.CreateDatasets(ctx, asks) },
		func() error { return h.ConfigureZone(ctx, asks) },
		func() error { return h.CreateDatasets(ctx, asks) }, // a re-run keeps it all
		func() error { return h.ConfigureZone(ctx, asks) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	ds, _ := h.dataset(asks)
	if q, err := zfs.Get(ctx, ds, "quota"); err != nil || q != "536870912" {
		t.Errorf("quota of the zone asking for 512Mi: %q %v", q, err)
	}
	info := zonecfgInfo(t, sim, asks.ZoneName())
	for _, want := range []string{"[max-processes: 500]\n", "[max-lwps: 8000]\n", "capped-memory:\n\tphysical: 256M\n\t[swap: 256M]\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("zonecfg info lacks %q:\n%s", want, info)
		}
	}

	plain := limitedPod("plain")
	plain.IP, plain.MemoryBytes = "10.0.0.6", 16<<20
	if err := h.CreateDatasets(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if err := h.ConfigureZone(ctx, plain); err != nil {
		t.Fatal(err)
	}
	ds, _ = h.dataset(plain)
	if q, err := zfs.Get(ctx, ds, "quota"); err != nil || q != "1073741824" {
		t.Errorf("quota of a zone asking for nothing: %q %v, want the node's 1Gi", q, err)
	}
	info = zonecfgInfo(t, sim, plain.ZoneName())
	for _, want := range []string{"[max-processes: 2000]\n", "[max-lwps: 8000]\n", "\tphysical: 16M\n\t[swap: 50M]\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("zonecfg info lacks %q (the node's limits; swap at zonecfg's floor):\n%s", want, info)
		}
	}
	cfg, err := h.Host.Zonecfg().Info(ctx, plain.ZoneName())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.MaxProcesses != 2000 || cfg.Config.MaxLWPs != 8000 || cfg.Config.Memory.Swap != 50<<20 || len(cfg.Config.Rctls) != 0 {
		t.Errorf("configuration read back: %+v", cfg.Config)
	}
}

// The filesystems of a pod's volumes are mounted in the global zone as
// well: a setuid file or device node planted there must not work for the
// host's users. Claims made before, grown, and emptyDirs all get
// setuid=off and devices=off. Revert volumes.go's withVolumeMountProps
// calls (or the fix of an existing claim in ensureVolume) to see this
// fail.
func TestVolumeFilesystemsRefuseSetuidAndDevices(t *testing.T) {
	h, _ := limitedHost(t)
	ctx := t.Context()
	zfs := h.Host.ZFS()
	old := hostapi.ClaimVolume{Name: "old", UID: "u-old", Bytes: 64 << 20}
	// A claim's dataset as an agent before mount options made it.
	if err := zfs.Create(ctx, "tank/zonewright/volumes/u-old", map[string]string{"mountpoint": "/tank/zonewright/volumes/u-old", "quota": "67108864"}); err != nil {
		t.Fatal(err)
	}
	s := limitedPod("vols")
	s.Volumes = []hostapi.PodVolume{{Name: "new", Claim: &hostapi.ClaimVolume{Name: "new", UID: "u-new", Bytes: 64 << 20}}, {Name: "old", Claim: &old}, {Name: "scratch"}}
	if err := h.CreateDatasets(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := h.createEmptyDirs(ctx, s); err != nil {
		t.Fatal(err)
	}
	zoneDS, _ := h.dataset(s)
	for _, ds := range []string{"tank/zonewright/volumes/u-new", "tank/zonewright/volumes/u-old", zoneDS + "/vol-scratch"} {
		got, err := zfs.GetProps(ctx, ds, "setuid", "devices", "exec")
		if err != nil {
			t.Fatal(err)
		}
		if got["setuid"] != "off" || got["devices"] != "off" || got["exec"] != "on" {
			t.Errorf("%s: setuid %s devices %s exec %s, want off, off, on", ds, got["setuid"], got["devices"], got["exec"])
		}
	}
	// The zone's own root keeps them: its own su and passwd are setuid.
	if got, _ := zfs.Get(ctx, zoneDS, "setuid"); got != "on" {
		t.Errorf("the zone dataset's setuid: %s", got)
	}
}

// A zone installed with other limits (by an agent of before, or under
// other flags) is the pod's all the same: configuring it again keeps it
// rather than calling it a conflict; one only configured is replaced.
func TestAZoneWithOtherLimitsIsKept(t *testing.T) {
	h, sim := limitedHost(t)
	ctx := t.Context()
	s := limitedPod("kept")
	s.MemoryBytes = 64 << 20
	before := hostOn(h.Host, sim)
	for _, step := range []func(context.Context, hostapi.PodSandbox) error{before.CreateDatasets, before.ConfigureZone, h.ConfigureZone} {
		if err := step(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if info := zonecfgInfo(t, sim, s.ZoneName()); !strings.Contains(info, "[max-processes: 2000]") {
		t.Fatalf("a configured zone's limits were not replaced:\n%s", info)
	}
	if err := before.ConfigureZone(ctx, s); err != nil { // back to none
		t.Fatal(err)
	}
	if err := h.InstallZone(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := h.ConfigureZone(ctx, s); err != nil {
		t.Fatalf("an installed zone with other limits: %v", err)
	}
	if info := zonecfgInfo(t, sim, s.ZoneName()); strings.Contains(info, "max-processes") {
		t.Errorf("an installed zone's configuration was changed:\n%s", info)
	}
}
