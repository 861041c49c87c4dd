package hostops_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/simtest"
	"github.com/zonewright/zonewright/internal/transfer"
)

// volumeNode is a simulated node with a volumes dataset, and its root.
func volumeNode(t *testing.T, name string) (*hostops.Host, string) {
	t.Helper()
	sim := simtest.NewNode(t, name)
	h := illumos.Host{Runner: &illumos.Runner{BinDir: sim.Bin, Timeout: time.Minute}}
	if err := h.ZFS().Create(t.Context(), "tank/zonewright/volumes", nil); err != nil {
		t.Fatal(err)
	}
	return &hostops.Host{Host: h, Node: name, VolumesDataset: "tank/zonewright/volumes", HeartbeatInterval: 20 * time.Millisecond}, sim.Root
}

// relayTransfers serves a relay and returns a maker of the two ends of
// one stream of claim's snapshot snap (from: an increment since it).
func relayTransfers(t *testing.T) func(claim hostapi.ClaimVolume, snap, from string) (send, recv hostapi.ClaimTransfer) {
	t.Helper()
	relay := &transfer.Relay{Dir: t.TempDir()}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /api/v1/volumetransfers/{id}", func(w http.ResponseWriter, r *http.Request) { relay.ServeUpload(w, r, r.PathValue("id"), 1<<40) })
	mux.HandleFunc("GET /api/v1/volumetransfers/{id}", func(w http.ResponseWriter, r *http.Request) { relay.ServeDownload(w, r, r.PathValue("id")) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return func(claim hostapi.ClaimVolume, snap, from string) (send, recv hostapi.ClaimTransfer) {
		id := claim.UID + "-" + snap
		u := transfer.URL(srv.URL, id)
		send = hostapi.ClaimTransfer{Claim: claim, Snapshot: snap, From: from, Ticket: transfer.Ticket{ID: id, URL: u}}
		return send, send
	}
}

// A claim's dataset goes from one node to another through the relay,
// whole then by increment; each step may run again.
func TestClaimVolumesMoveThroughTheRelay(t *testing.T) {
	ctx := t.Context()
	xfer := relayTransfers(t)

	a, rootA := volumeNode(t, "a")
	b, rootB := volumeNode(t, "b")
	claim := hostapi.ClaimVolume{Name: "db", UID: "u1", Bytes: 64 << 20}
	file := func(root, name string) string { return filepath.Join(root, "fs/tank/zonewright/volumes/u1", name) }
	if err := a.ResizeClaimVolume(ctx, claim); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file(rootA, "rows"), []byte("1\n"), 0o644)
	if err := a.SnapshotClaimVolume(ctx, hostapi.ClaimSnapshot{UID: "move-x-1", ClaimUID: "u1"}); err != nil {
		t.Fatal(err)
	}
	send, recv := xfer(claim, "move-x-1", "")
	// A receive before the upload fails (and is retried by its workflow).
	if _, err := b.ReceiveClaimVolume(ctx, recv); err == nil {
		t.Fatal("a receive before the upload succeeded")
	}
	for range 2 { // a send run again uploads again
		if res, err := a.SendClaimVolume(ctx, send); err != nil || res.Bytes == 0 {
			t.Fatalf("send: %+v %v", res, err)
		}
	}
	if res, err := b.ReceiveClaimVolume(ctx, recv); err != nil || res.Skipped {
		t.Fatalf("receive: %+v %v", res, err)
	}
	if res, err := b.ReceiveClaimVolume(ctx, recv); err != nil || !res.Skipped {
		t.Fatalf("receive again: %+v %v, want skipped", res, err)
	}
	zb := b.Host.ZFS()
	if mp, _ := zb.Get(ctx, "tank/zonewright/volumes/u1", "mountpoint"); mp != "/tank/zonewright/volumes/u1" {
		t.Errorf("mountpoint on b: %q", mp)
	}
	if q, _ := zb.Get(ctx, "tank/zonewright/volumes/u1", "quota"); q != "67108864" {
		t.Errorf("quota on b: %q", q)
	}
	if got, _ := os.ReadFile(file(rootB, "rows")); string(got) != "1\n" {
		t.Fatalf("rows on b after the pre-copy: %q", got)
	}

	// What changed since follows as an increment.
	os.WriteFile(file(rootA, "rows"), []byte("1\n2\n"), 0o644)
	os.WriteFile(file(rootA, "new"), []byte("x"), 0o644)
	if err := a.SnapshotClaimVolume(ctx, hostapi.ClaimSnapshot{UID: "move-x-2", ClaimUID: "u1"}); err != nil {
		t.Fatal(err)
	}
	send, recv = xfer(claim, "move-x-2", "move-x-1")
	if _, err := a.SendClaimVolume(ctx, send); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReceiveClaimVolume(ctx, recv); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(file(rootB, "rows")); string(got) != "1\n2\n" {
		t.Fatalf("rows on b after the increment: %q", got)
	}
	if got, _ := os.ReadFile(file(rootB, "new")); string(got) != "x" {
		t.Fatalf("new on b after the increment: %q", got)
	}

	// A copy an earlier attempt left on a node is replaced by the full
	// stream.
	c, rootC := volumeNode(t, "c")
	if err := c.ResizeClaimVolume(ctx, claim); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file(rootC, "stale"), []byte("from an earlier attempt"), 0o644)
	_, recv = xfer(claim, "move-x-1", "")
	if _, err := c.ReceiveClaimVolume(ctx, recv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file(rootC, "stale")); !os.IsNotExist(err) {
		t.Errorf("the earlier attempt's file stayed: %v", err)
	}
	if got, _ := os.ReadFile(file(rootC, "rows")); string(got) != "1\n" {
		t.Errorf("rows on c: %q", got)
	}
}

// A bhyve pod's claim is a zvol: created in whole blocks, grown online
// (volsize), snapshotted and cloned with its data, and copied to another
// node as a clone of a snapshot there, named as its own claim.
func TestBlockClaimsAreVolumes(t *testing.T) {
	ctx := t.Context()
	xfer := relayTransfers(t)
	a, rootA := volumeNode(t, "a")
	b, rootB := volumeNode(t, "b")
	dev := func(root, uid string) string {
		return illumos.ZvolDevice(filepath.Join(root, "fs/dev/zvol/rdsk"), "tank/zonewright/volumes/"+uid)
	}
	claim := hostapi.ClaimVolume{Name: "disk", UID: "v1", Bytes: 10<<20 + 1, Block: true}
	za := a.Host.ZFS()
	props := func(z illumos.ZFS, uid string) map[string]string {
		t.Helper()
		p, err := z.GetProps(ctx, "tank/zonewright/volumes/"+uid, "type", "volsize", "zonewright:claim", "zonewright:claim-uid")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for range 2 { // creating again keeps it
		if err := a.ResizeClaimVolume(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
	if p := props(za, "v1"); p["type"] != "volume" || p["volsize"] != "10493952" {
		t.Fatalf("a block claim of 10 MiB + 1 byte: %v, want a volume of whole 8 KiB blocks", p)
	}
	if err := os.WriteFile(dev(rootA, "v1"), []byte("guest data"), 0o600); err != nil {
		t.Fatal(err)
	}
	claim.Bytes = 20 << 20
	if err := a.ResizeClaimVolume(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if p := props(za, "v1"); p["volsize"] != "20971520" {
		t.Fatalf("grown: volsize %s", p["volsize"])
	}
	if got, _ := os.ReadFile(dev(rootA, "v1")); string(got[:10]) != "guest data" || len(got) != 20<<20 {
		t.Fatalf("after growing the device holds %q… (%d bytes)", got[:10], len(got))
	}
	snap := hostapi.ClaimSnapshot{UID: "s1", ClaimUID: "v1"}
	if err := a.SnapshotClaimVolume(ctx, snap); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(dev(rootA, "v1"), []byte("later data"), 0o600)

	// A clone on the snapshot's node.
	clone := hostapi.ClaimVolume{Name: "copy", UID: "v2", Bytes: 32 << 20, Block: true, FromSnapshot: &snap}
	if err := a.ResizeClaimVolume(ctx, clone); err != nil {
		t.Fatal(err)
	}
	if p := props(za, "v2"); p["volsize"] != "33554432" {
		t.Errorf("a clone asking for more than its origin: volsize %s", p["volsize"])
	}
	if got, _ := os.ReadFile(dev(rootA, "v2")); string(got[:10]) != "guest data" {
		t.Errorf("the clone holds %q, not the snapshot's data", got[:10])
	}

	// A clone on another node: the snapshot is sent, received as the new
	// claim's, and named as it.
	far := hostapi.ClaimVolume{Name: "far", UID: "v3", Bytes: 32 << 20, Block: true}
	send, recv := xfer(hostapi.ClaimVolume{Name: "far", UID: "v1", Block: true}, "s1", "")
	recv.Claim, recv.Props = far, hostapi.ClaimDatasetProps("default", far)
	if _, err := a.SendClaimVolume(ctx, send); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := b.ReceiveClaimVolume(ctx, recv); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.ResizeClaimVolume(ctx, far); err != nil {
		t.Fatal(err)
	}
	if p := props(b.Host.ZFS(), "v3"); p["type"] != "volume" || p["volsize"] != "33554432" || p["zonewright:claim"] != "default/far" || p["zonewright:claim-uid"] != "v3" {
		t.Errorf("the copy on b: %v", p)
	}
	if got, _ := os.ReadFile(dev(rootB, "v3")); string(got[:10]) != "guest data" {
		t.Errorf("the copy on b holds %q, not the snapshot's data", got[:10])
	}
}

// A move ends by destroying its snapshots on the destination, where the
// claim's bhyve pod may already run with the volume as its device: the
// snapshots go all the same (only the volume itself is busy while the
// guest runs).
func TestMoveSnapshotsOfARunningGuestsVolumeGo(t *testing.T) {
	ctx := t.Context()
	h, _ := volumeNode(t, "a")
	bin := h.Host.Runner.(*illumos.Runner).BinDir
	sim := func(cmd string, args ...string) {
		t.Helper()
		if out, err := exec.Command(filepath.Join(bin, cmd), args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", cmd, args, err, out)
		}
	}
	claim := hostapi.ClaimVolume{Name: "disk", UID: "v1", Bytes: 16 << 20, Block: true}
	if err := h.ResizeClaimVolume(ctx, claim); err != nil {
		t.Fatal(err)
	}
	snaps := []hostapi.ClaimSnapshot{{UID: "move-m1-1", ClaimUID: "v1"}, {UID: "move-m1-2", ClaimUID: "v1"}}
	for _, s := range snaps {
		if err := h.SnapshotClaimVolume(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	sim("zfs", "create", "-p", "tank/zones")
	sim("zonecfg", "-z", "vm", "create; set brand=bhyve; set zonepath=/zones/vm; add device; set match=/dev/zvol/rdsk/tank/zonewright/volumes/v1; end")
	sim("zoneadm", "-z", "vm", "install")
	sim("zoneadm", "-z", "vm", "boot")
	for _, s := range snaps {
		for range 2 { // one already gone is fine
			if err := h.DestroyClaimSnapshot(ctx, s); err != nil {
				t.Fatalf("destroy the move's snapshot %s while the guest runs: %v", s.UID, err)
			}
		}
	}
	if ok, err := h.Host.ZFS().Exists(ctx, "tank/zonewright/volumes/v1@move-m1-1"); err != nil || ok {
		t.Errorf("the snapshot is still there: %v %v", ok, err)
	}
	if err := h.DestroyClaimVolume(ctx, claim); err == nil {
		t.Fatal("the volume of a running guest was destroyed")
	}
	sim("zoneadm", "-z", "vm", "halt")
	if err := h.DestroyClaimVolume(ctx, claim); err != nil {
		t.Fatal(err)
	}
}

// A claim's copy received on another node gets setuid=off and
// devices=off whatever the sending node's dataset had: a stream carries
// its source's properties (zfs send -p), and one from before the mount
// options had them on. Revert volume_moves.go's withVolumeMountProps call
// in ReceiveClaimVolume to see this fail.
func TestAReceivedClaimRefusesSetuidAndDevices(t *testing.T) {
	ctx := t.Context()
	xfer := relayTransfers(t)
	a, _ := volumeNode(t, "a")
	b, _ := volumeNode(t, "b")
	claim := hostapi.ClaimVolume{Name: "db", UID: "u1", Bytes: 64 << 20}
	if err := a.Host.ZFS().Create(ctx, "tank/zonewright/volumes/u1", map[string]string{"mountpoint": "/tank/zonewright/volumes/u1", "quota": "67108864"}); err != nil {
		t.Fatal(err)
	}
	if err := a.SnapshotClaimVolume(ctx, hostapi.ClaimSnapshot{UID: "move-x-1", ClaimUID: "u1"}); err != nil {
		t.Fatal(err)
	}
	send, recv := xfer(claim, "move-x-1", "")
	if _, err := a.SendClaimVolume(ctx, send); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReceiveClaimVolume(ctx, recv); err != nil {
		t.Fatal(err)
	}
	got, err := b.Host.ZFS().GetProps(ctx, "tank/zonewright/volumes/u1", "setuid", "devices")
	if err != nil {
		t.Fatal(err)
	}
	if got["setuid"] != "off" || got["devices"] != "off" {
		t.Fatalf("received claim: setuid %s devices %s, want off", got["setuid"], got["devices"])
	}
}
