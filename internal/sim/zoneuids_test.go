package sim_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// zoneIDsOf is the zone's ids in the host's state.
func zoneIDsOf(t *testing.T, h *simHost, name string) (uid, n uint32) {
	t.Helper()
	for _, z := range h.state().Zones {
		if z.Name == name {
			return z.UID, z.UIDs
		}
	}
	t.Fatalf("no zone %s", name)
	return 0, 0
}

// A zone's users are its own, as on illumos where each zone has its own
// uid space: a method with a method_credential and zlogin -l run as the
// zone's user (by name from the zone's /etc/passwd, or by number), which
// is the machine's id at that place in the zone's block; the same user of
// another zone is another id; a user past the block or unknown is
// refused; files an image hands over keep their in-zone owners; and an
// uninstalled zone's block goes to the next zone.
//
// Make zoneLogin return the zone's root for every name to see it fail:
// the method's uid is the zone's root's.
func TestZoneUsersAreTheZonesOwn(t *testing.T) {
	if !machineRootHere() {
		t.Skip("zones own blocks of ids only under the machine's root")
	}
	h := newHost(t)
	for _, z := range []string{"u1", "u2"} {
		h.zoneSetup(z, "installed")
		etc := filepath.Join(h.root, "fs", "zones", z, "root", "etc")
		if err := os.MkdirAll(etc, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(etc, "group"), []byte("root::0:\nstaff::1001:\nweb::1002:\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// An image's file: owned by the ids its archive names.
		home := filepath.Join(h.root, "fs", "zones", z, "root", "home", "app")
		if err := os.MkdirAll(home, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(home, 1000, 1001); err != nil {
			t.Fatal(err)
		}
		h.must("zoneadm", "-z", z, "boot")
	}
	base1, n1 := zoneIDsOf(t, h, "u1")
	base2, _ := zoneIDsOf(t, h, "u2")
	if n1 != 65536 || base1%65536 != 0 || base1 == base2 {
		t.Fatalf("zones' ids: u1 %d (+%d), u2 %d; want blocks of 65536 of their own", base1, n1, base2)
	}

	// The method runs as the zone's app, in its group web.
	m := strings.Replace(manifest("as-app", `{ id -u; id -g; echo $HOME; } > home/app/m.tmp && mv home/app/m.tmp home/app/method; exec sleep 1000`, "", true),
		"<exec_method", "<method_context><method_credential user='app' group='web'/></method_context>\n    <exec_method", 1)
	h.runIn(m, "zlogin", "u1", "svccfg", "import", "/dev/stdin")
	out := filepath.Join(h.root, "fs", "zones", "u1", "root", "home", "app", "method")
	waitFor(t, 10*time.Second, "the method's report", func() bool { _, err := os.Stat(out); return err == nil })
	b, _ := os.ReadFile(out)
	lines := strings.Split(string(b), "\n")
	if len(lines) < 3 || lines[0] != strconv.Itoa(int(base1)+1000) || lines[1] != strconv.Itoa(int(base1)+1002) {
		t.Fatalf("the method as app:web reported %q, want uid %d and gid %d", b, base1+1000, base1+1002)
	}
	if !strings.HasSuffix(lines[2], "/home/app") {
		t.Errorf("the method's HOME is %q, want the zone's /home/app", lines[2])
	}

	// zlogin -l: by name and by number; the same user of another zone
	// is another id.
	for _, tc := range []struct{ zone, user string }{{"u1", "app"}, {"u1", "1000"}, {"u2", "app"}} {
		r := h.run("zlogin", "-l", tc.user, tc.zone, "id -u")
		base := base1
		if tc.zone == "u2" {
			base = base2
		}
		if r.code != 0 || strings.TrimSpace(r.stdout) != strconv.Itoa(int(base)+1000) {
			t.Errorf("zlogin -l %s %s: %v, want uid %d", tc.user, tc.zone, r, base+1000)
		}
	}
	for _, user := range []string{"nobody-here", "70000"} {
		if r := h.run("zlogin", "-l", user, "u1", "id -u"); r.code == 0 {
			t.Errorf("zlogin -l %s: %v, want a refusal", user, r)
		}
	}
	// The image's file is the zone's app's: app writes there, and not in
	// the zone root's etc.
	fi, err := os.Stat(filepath.Join(h.root, "fs", "zones", "u1", "root", "home", "app"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != base1+1000 || st.Gid != base1+1001 {
		t.Errorf("the image's /home/app is %d:%d, want the zone's app %d:%d", st.Uid, st.Gid, base1+1000, base1+1001)
	}
	if r := h.run("zlogin", "-l", "app", "u1", "touch home/app/mine && echo ok"); !strings.Contains(r.stdout, "ok") {
		t.Errorf("app cannot write its own home: %v", r)
	}
	if r := h.run("zlogin", "-l", "app", "u1", "touch etc/not-mine && echo wrote"); strings.Contains(r.stdout, "wrote") {
		t.Errorf("app wrote the zone root's etc: %v", r)
	}

	// Uninstalled, u1's block goes to the next zone.
	h.must("zoneadm", "-z", "u1", "halt")
	h.must("zoneadm", "-z", "u1", "uninstall", "-F")
	if uid, _ := zoneIDsOf(t, h, "u1"); uid != 0 {
		t.Errorf("uninstalled u1 keeps uid %d", uid)
	}
	if _, err := os.Lstat(filepath.Join("/var/lib/illumos-sim/zone-uid-blocks", strconv.Itoa(int(base1)))); err == nil {
		t.Errorf("u1's block %d is still given out after its uninstall", base1)
	}
}
