package hostops_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// A claim's dataset goes from one node to another through the relay,
// whole then by increment; each step may run again.
func TestClaimVolumesMoveThroughTheRelay(t *testing.T) {
	ctx := t.Context()
	relay := &transfer.Relay{Dir: t.TempDir(), Secret: []byte("s")}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /api/v1/volumetransfers/{id}", func(w http.ResponseWriter, r *http.Request) { relay.ServeUpload(w, r, r.PathValue("id")) })
	mux.HandleFunc("GET /api/v1/volumetransfers/{id}", func(w http.ResponseWriter, r *http.Request) { relay.ServeDownload(w, r, r.PathValue("id")) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	xfer := func(claim hostops.ClaimVolume, snap, from string) (send, recv hostops.ClaimTransfer) {
		id := claim.UID + "-" + snap
		u := transfer.URL(srv.URL, id)
		send = hostops.ClaimTransfer{Claim: claim, Snapshot: snap, From: from, Ticket: transfer.Ticket{ID: id, URL: u, Token: relay.Token(id, transfer.Upload, time.Minute)}}
		recv = send
		recv.Ticket.Token = relay.Token(id, transfer.Download, time.Minute)
		return send, recv
	}

	a, rootA := volumeNode(t, "a")
	b, rootB := volumeNode(t, "b")
	claim := hostops.ClaimVolume{Name: "db", UID: "u1", Bytes: 64 << 20}
	file := func(root, name string) string { return filepath.Join(root, "fs/tank/zonewright/volumes/u1", name) }
	if err := a.ResizeClaimVolume(ctx, claim); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file(rootA, "rows"), []byte("1\n"), 0o644)
	if err := a.SnapshotClaimVolume(ctx, hostops.ClaimSnapshot{UID: "move-x-1", ClaimUID: "u1"}); err != nil {
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
	if err := a.SnapshotClaimVolume(ctx, hostops.ClaimSnapshot{UID: "move-x-2", ClaimUID: "u1"}); err != nil {
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
