package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A file an in-zone command names (ipnat -f, svccfg import) is the zone's:
// looked up in the zone's root, links resolved inside it, lofs mounts
// reached as the zone sees them, and opened with the zone user's rights
// when the simulator runs as root. Nothing of a host file outside the zone
// root reaches the output, whether named directly or through a link.
func TestInZoneCommandsReadOnlyTheZonesFiles(t *testing.T) {
	h := newHost(t)
	// A secret outside the zone root, readable by anyone: only the
	// zone's view of the filesystem keeps it out.
	outside := t.TempDir()
	os.Chmod(outside, 0o755)
	secret := filepath.Join(outside, "admin-token")
	if err := os.WriteFile(secret, []byte("SECRETWORD\nrdr\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(h.root, "fs", "vol", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.zoneSetup("z1", "running", "add fs; set dir=/data; set special=/vol/data; set type=lofs; end")
	zoneRoot := filepath.Join(h.root, "fs", "zones", "z1", "root")
	dots := strings.Repeat("../", strings.Count(zoneRoot, "/")+2)
	for name, target := range map[string]string{"abs": secret, "rel": dots + strings.TrimPrefix(secret, "/")} {
		if err := os.Symlink(target, filepath.Join(zoneRoot, "tmp", name)); err != nil {
			t.Fatal(err)
		}
	}
	noLeak := func(r result) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, "SECRETWORD") {
			t.Errorf("the host's file reached the zone: %v", r)
		}
	}
	for _, name := range []string{secret, "/tmp/abs", "/tmp/rel", dots + strings.TrimPrefix(secret, "/")} {
		r := h.run("zlogin", "z1", "ipnat", "-f", name)
		noLeak(r)
		expect(t, r, 0, "", "fopen("+name+") failed: No such file or directory\n")
		r = h.run("zlogin", "z1", "svccfg", "import", name)
		noLeak(r)
		expect(t, r, 1, "", "svccfg: Unable to stat file "+name+".  No such file or directory\n")
	}

	// The zone's own files, in its root and through its lofs mount, by
	// absolute and relative paths and through links.
	rule := "rdr net0 10.0.0.5 port 80 -> 10.1.0.1 port 8080\n"
	normalised := "rdr net0 10.0.0.5/32 port 80 -> 10.1.0.1 port 8080 tcp\n"
	if err := os.WriteFile(filepath.Join(h.root, "fs", "vol", "data", "nat.conf"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/data/nat.conf", filepath.Join(zoneRoot, "tmp", "nat")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"/data/nat.conf", "data/nat.conf", "/tmp/nat", "/tmp/../../data/./nat.conf"} {
		expect(t, h.run("zlogin", "z1", "ipnat", "-nv", "-f", name), 0, normalised, "")
	}
	if err := os.WriteFile(filepath.Join(zoneRoot, "tmp", "m.xml"), []byte(manifest("own", "exec sleep 1000", "", false)), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, h.run("zlogin", "z1", "svccfg", "import", "/tmp/m.xml"), 0, "", "")
	expect(t, h.run("zlogin", "z1", "svcs", "-H", "-o", "fmri", "site/own"), 0, "svc:/site/own:default\n", "")

	if os.Geteuid() == 0 {
		// A file in the zone that is not the zone user's to read.
		private := filepath.Join(zoneRoot, "tmp", "private")
		if err := os.WriteFile(private, []byte("SECRETWORD\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := h.run("zlogin", "z1", "ipnat", "-f", "/tmp/private")
		noLeak(r)
		expect(t, r, 0, "", "fopen(/tmp/private) failed: Permission denied\n")
	}
}

// svc.startd writes a service's log in the zone's /var/svc/log as the
// zone's user: a link the zone put there is resolved inside the zone, so
// the simulator creates and appends no file outside it.
func TestServiceLogsStayInTheZone(t *testing.T) {
	h := newHost(t)
	outside := t.TempDir()
	os.Chmod(outside, 0o777)
	h.zoneSetup("z1", "running")
	zoneRoot := filepath.Join(h.root, "fs", "zones", "z1", "root")
	logDir := filepath.Join(zoneRoot, "var", "svc", "log")
	if err := os.RemoveAll(logDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, logDir); err != nil {
		t.Fatal(err)
	}
	expect(t, h.runIn(manifest("web", "echo started; exec sleep 1000", "", true), "zlogin", "z1", "svccfg", "import", "/dev/stdin"), 0, "", "")
	fmri := "svc:/site/web:default"
	waitFor(t, 10*time.Second, fmri+" online", func() bool {
		st, pid, _ := h.service("z1", fmri)
		return st == "online" && pid > 0
	})
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("the service's log was written outside the zone: %s", filepath.Join(outside, entries[0].Name()))
	}
	inZone := filepath.Join(zoneRoot, outside, "site-web:default.log")
	waitFor(t, 5*time.Second, "the log where the link leads inside the zone", func() bool {
		b, _ := os.ReadFile(inZone)
		return strings.Contains(string(b), "started")
	})
}

// Booting a zone makes its lofs mount points in the zone's view: a link
// the zone's user left on the way (the zone root is theirs) leads the
// simulator to remove or create nothing outside the zone.
func TestLofsMountPointsStayInTheZone(t *testing.T) {
	h := newHost(t)
	if err := os.MkdirAll(filepath.Join(h.root, "fs", "vol", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.zoneSetup("z1", "running", "add fs; set dir=/mnt/a/data; set special=/vol/data; set type=lofs; end")
	h.must("zoneadm", "-z", "z1", "halt")
	// The zone's user turned /mnt/a into a link to a host directory that
	// holds a file named like the mount point.
	outside := t.TempDir()
	victim := filepath.Join(outside, "data")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	zoneRoot := filepath.Join(h.root, "fs", "zones", "z1", "root")
	if err := os.RemoveAll(filepath.Join(zoneRoot, "mnt", "a")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(zoneRoot, "mnt", "a")); err != nil {
		t.Fatal(err)
	}
	h.must("zoneadm", "-z", "z1", "boot")
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me\n" {
		t.Errorf("the host file beyond the zone's link: %q %v", b, err)
	}
	// The mount is where the link leads inside the zone.
	if target, err := os.Readlink(filepath.Join(zoneRoot, outside, "data")); err != nil || target != filepath.Join(h.root, "fs", "vol", "data") {
		t.Errorf("mount point inside the zone: %q %v", target, err)
	}
	h.must("zoneadm", "-z", "z1", "halt")
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me\n" {
		t.Errorf("after halt, the host file beyond the zone's link: %q %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(zoneRoot, outside, "data")); err != nil || !fi.IsDir() {
		t.Errorf("after halt the mount point is an empty directory again: %v %v", fi, err)
	}
}
