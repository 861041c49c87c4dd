package hostops

import (
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
)

func TestVolumesBecomeLofsMounts(t *testing.T) {
	h := &Host{ZonesPath: "/zonewright/zones", VolumesDataset: "tank/zonewright/volumes"}
	s := hostapi.PodSandbox{Namespace: "shop", Name: "db", UID: "0b6f4e0e-1c5a-4d8e-9f10-3a2b4c5d6e7f",
		Volumes: []hostapi.PodVolume{{Name: "data", Claim: &hostapi.ClaimVolume{Name: "db", UID: "5f0c1d7a-8b1e-4f3a-9c2d-7e6f5a4b3c2d", Bytes: 1 << 30}}, {Name: "tmp"}},
		Mounts:  []hostapi.PodMount{{Volume: "data", Path: "/var/db"}, {Volume: "tmp", Path: "/tmp/x", ReadOnly: true}}}
	fs, err := h.volumeFS(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []illumos.FS{
		{Dir: "/var/db", Special: "/tank/zonewright/volumes/5f0c1d7a-8b1e-4f3a-9c2d-7e6f5a4b3c2d", Type: "lofs"},
		{Dir: "/tmp/x", Special: "/zonewright/zones/" + s.ZoneName() + "/vol-tmp", Type: "lofs", Options: []string{"ro"}},
	}
	if len(fs) != 2 || fs[0].Special != want[0].Special || fs[0].Dir != want[0].Dir || len(fs[0].Options) != 0 ||
		fs[1].Special != want[1].Special || fs[1].Options[0] != "ro" {
		t.Fatalf("mounts %+v, want %+v", fs, want)
	}
	if d := configDiff(illumos.ZoneConfig{FS: fs[:1]}, illumos.ZoneConfig{FS: fs}); len(d) == 0 || !strings.Contains(strings.Join(d, ";"), "fs") {
		t.Errorf("a missing mount is no difference: %v", d)
	}

	// A claim the pod was placed without is refused, never replaced by
	// an empty directory.
	s.Volumes[0].Claim = &hostapi.ClaimVolume{Name: "db"}
	if _, err := h.volumeFS(s); err == nil || !strings.Contains(err.Error(), `claim "db" was not bound`) {
		t.Fatalf("a claim without its UID: %v", err)
	}
	s.Mounts = append(s.Mounts, hostapi.PodMount{Volume: "nope", Path: "/x"})
	s.Volumes[0].Claim.UID = "5f0c1d7a-8b1e-4f3a-9c2d-7e6f5a4b3c2d"
	if _, err := h.volumeFS(s); err == nil {
		t.Fatal("a mount of no volume was accepted")
	}
}

// A bhyve pod's block claims are delegated devices after its boot disk,
// and none of them is a mount.
func TestBlockClaimsBecomeDevices(t *testing.T) {
	h := &Host{ZonesPath: "/zonewright/zones", VolumesDataset: "tank/zonewright/volumes"}
	s := hostapi.PodSandbox{Namespace: "shop", Name: "vm", UID: "0b6f4e0e-1c5a-4d8e-9f10-3a2b4c5d6e7f", Brand: "bhyve",
		IP: "10.0.0.5", PrefixLen: 24, Gateway: "10.0.0.1",
		Volumes: []hostapi.PodVolume{{Name: "data", Claim: &hostapi.ClaimVolume{Name: "disk", UID: "5f0c1d7a-8b1e-4f3a-9c2d-7e6f5a4b3c2d", Bytes: 1 << 30, Block: true}}}}
	cfg, err := h.zoneConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	want := "/dev/zvol/rdsk/tank/zonewright/volumes/5f0c1d7a-8b1e-4f3a-9c2d-7e6f5a4b3c2d"
	if len(cfg.Devices) != 1 || cfg.Devices[0] != want || len(cfg.FS) != 0 {
		t.Fatalf("devices %q fs %+v, want the claim's zvol %s and no mount", cfg.Devices, cfg.FS, want)
	}
}
