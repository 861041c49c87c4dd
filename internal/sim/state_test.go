package sim_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fileID identifies a file's current version: files are replaced by a
// rename, so a rewrite changes the inode.
func fileID(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

// Commands that touch one zone rewrite that zone's file alone, and
// listings rewrite nothing.
func TestZoneCommandsRewriteOnlyTheirZone(t *testing.T) {
	h := newHost(t)
	bootWithService(t, h, "a1", "s", "exec sleep 1000", "")
	bootWithService(t, h, "a2", "s", "exec sleep 1000", "")
	other := filepath.Join(h.root, "zones", "a2.json")
	hostFile := filepath.Join(h.root, "state.json")
	before := []uint64{fileID(t, other), fileID(t, hostFile)}

	h.must("zlogin", "a1", "svcadm", "disable", "-s", "s")
	h.must("zlogin", "a1", "svcadm", "enable", "-s", "s")
	h.must("zlogin", "a1", "true")
	h.must("svcs", "-Z")
	h.must("svcs", "-z", "a1")
	h.must("zoneadm", "list", "-cp")
	h.must("zoneadm", "-z", "a1", "list", "-p")
	if st, _, _ := h.service("a1", "svc:/site/s:default"); st != "online" {
		t.Fatalf("a1's service: %s", st)
	}
	after := []uint64{fileID(t, other), fileID(t, hostFile)}
	if before[0] != after[0] || before[1] != after[1] {
		t.Errorf("a1's commands rewrote a2's zone file or the host file: %v -> %v", before, after)
	}
	// Zone-only commands leave no lock files of zones that do not exist.
	h.run("zlogin", "nosuch", "true")
	h.run("svcs", "-z", "nosuch")
	h.run("zoneadm", "-z", "nosuch", "halt")
	h.must("zonecfg", "-z", "gone", "create -b; set zonepath=/zones/gone")
	h.must("zonecfg", "-z", "gone", "delete", "-F")
	for _, n := range []string{"nosuch", "gone"} {
		for _, ext := range []string{".json", ".lock"} {
			if _, err := os.Stat(filepath.Join(h.root, "zones", n+ext)); err == nil {
				t.Errorf("zones/%s%s exists", n, ext)
			}
		}
	}
}

// A zone renamed with zonecfg moves to its new file and keeps its place in
// the zone index.
func TestRenamedZoneKeepsItsPlace(t *testing.T) {
	h := newHost(t)
	for _, z := range []string{"z1", "z2", "z3"} {
		h.zoneSetup(z, "configured")
	}
	h.must("zonecfg", "-z", "z1", "set zonename=z9")
	expect(t, h.run("zoneadm", "list", "-c"), 0, "global\nz9\nz2\nz3\n", "")
	for name, want := range map[string]bool{"z1.json": false, "z1.lock": false, "z9.json": true} {
		if _, err := os.Stat(filepath.Join(h.root, "zones", name)); (err == nil) != want {
			t.Errorf("zones/%s exists: %v, want %v", name, err == nil, want)
		}
	}
}

// A root written by a simulator that kept every zone in state.json is
// split into zone files on first use, with its zones in their order.
func TestSingleFileStateIsMigrated(t *testing.T) {
	src := newHost(t)
	src.zoneSetup("b", "installed")
	src.zoneSetup("a", "configured")
	src.must("dladm", "create-vnic", "-l", "net0", "vnic0")
	// `illumos-sim state` prints the old file's shape: everything in one
	// document. Make it a version 1 file, without the zone index.
	var st map[string]any
	out, err := runBare(t, "state", "--root", src.root)
	if err != nil {
		t.Fatalf("state: %v %s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	st["version"] = 1
	delete(st, "next_zone_index")
	for _, z := range st["zones"].([]any) {
		z := z.(map[string]any)
		delete(z, "index")
		if z["name"] == "global" {
			z["booted"] = time.Time{} // version 1 left it unset
		}
	}
	legacy, _ := json.MarshalIndent(st, "", "  ")

	dst := newNamedHost(t, t.TempDir(), "node2")
	for _, p := range []string{"zones", "state.json"} {
		os.RemoveAll(filepath.Join(dst.root, p))
	}
	if err := os.WriteFile(filepath.Join(dst.root, "state.json"), legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, dst.run("zoneadm", "list", "-c"), 0, "global\nb\na\n", "")
	if got := dst.zoneState("b"); got != "installed" {
		t.Errorf("b is %q", got)
	}
	if out := dst.must("dladm", "show-vnic", "-p", "-o", "link"); out != "vnic0\n" {
		t.Errorf("vnics: %q", out)
	}
	dst.zoneSetup("c", "configured")
	expect(t, dst.run("zoneadm", "list", "-c"), 0, "global\nb\na\nc\n", "")
	b, _ := os.ReadFile(filepath.Join(dst.root, "state.json"))
	if strings.Contains(string(b), `"zones"`) {
		t.Errorf("state.json still holds the zones:\n%s", b)
	}
	// The global zone's services keep the host's boot time.
	if out := dst.must("svcs", "-H", "-o", "stime", "system/zones"); out != src.must("svcs", "-H", "-o", "stime", "system/zones") {
		t.Errorf("global zone stime %q", out)
	}
}
