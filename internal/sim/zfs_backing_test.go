package sim_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fill writes n MiB of ones (not zeros, which a copy may turn into
// holes) to file.
func fill(file string, mib int) error {
	return os.WriteFile(file, bytes.Repeat([]byte{0xff}, mib<<20), 0o644)
}

// mountsBelow lists the mount points under dir.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// A filesystem's quota bounds what is written into it, as on illumos: a
// 20 MiB write into 8M fails (ENOSPC where illumos says EDQUOT) while a
// filesystem beside it without a quota takes it; a larger quota takes
// it; a quota below what is used is refused; a zone whose zonepath has a
// quota cannot write past it either. Destroy and stop-all leave nothing
// mounted, and the data is found again after stop-all.
//
// Make realiseStorage (internal/sim/zfs_backing.go) return nil at once
// to see it fail: the 20 MiB fit in 8M.
func TestAQuotaBoundsWhatAFilesystemHolds(t *testing.T) {
	if !machineRootHere() {
		t.Skip("the simulator mounts filesystems only as the machine's root")
	}
	h := newHost(t)
	h.must("zfs", "create", "-o", "quota=8M", "tank/small")
	h.must("zfs", "create", "tank/free")
	small := filepath.Join(h.root, "fs/tank/small")
	if err := fill(filepath.Join(h.root, "fs/tank/free/f"), 20); err != nil {
		t.Fatalf("20 MiB into a filesystem without a quota: %v", err)
	}
	err := fill(filepath.Join(small, "f"), 20)
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("20 MiB into a quota of 8M: %v, want ENOSPC or EDQUOT", err)
	}
	os.Remove(filepath.Join(small, "f"))

	// Growing takes effect on the mounted filesystem; a quota below
	// what is used is refused, one above it taken.
	h.must("zfs", "set", "quota=32M", "tank/small")
	if err := fill(filepath.Join(small, "f"), 20); err != nil {
		t.Fatalf("20 MiB after growing the quota to 32M: %v", err)
	}
	expect(t, h.run("zfs", "set", "quota=8M", "tank/small"), 1, "",
		"cannot set property for 'tank/small': size is less than current used or reserved space\n")
	if used, _ := strconv.ParseUint(strings.TrimSpace(h.must("zfs", "get", "-Hpo", "value", "used", "tank/small")), 10, 64); used < 20<<20 {
		t.Errorf("used of a filesystem holding 20 MiB: %d", used)
	}
	h.must("zfs", "set", "quota=24M", "tank/small")
	if b, err := os.ReadFile(filepath.Join(small, "f")); err != nil || len(b) != 20<<20 {
		t.Fatalf("the file after shrinking the quota to 24M: %d bytes, %v", len(b), err)
	}

	// A zone writing into its zonepath meets the quota too.
	h.must("zfs", "create", "-o", "mountpoint=/zones", "tank/zones")
	h.must("zfs", "create", "-o", "quota=8M", "tank/zones/bounded")
	h.zoneSetup("bounded", "running")
	r := h.run("zlogin", "bounded", "head -c 20971520 /dev/zero | tr '\\0' x > big; echo status $?")
	if !strings.Contains(r.stderr, "No space left on device") && !strings.Contains(r.stderr, "quota exceeded") {
		t.Errorf("a zone writing 20 MiB into its 8M zonepath: %v", r)
	}
	h.must("zoneadm", "-z", "bounded", "halt")

	// stop-all leaves nothing mounted; the next command that changes
	// the host mounts the filesystems again with their files; destroy unmounts and removes.
	h.node().Run(t, "stop-all")
	if m := mountsBelow(t, h.root); len(m) != 0 {
		t.Fatalf("mounted after stop-all: %v", m)
	}
	h.must("zfs", "mount", "-a") // as an illumos host does at boot
	if b, err := os.ReadFile(filepath.Join(small, "f")); err != nil || len(b) != 20<<20 {
		t.Fatalf("the file after stop-all and a command: %d bytes, %v", len(b), err)
	}
	h.must("zfs", "destroy", "-r", "tank/zones")
	h.must("zfs", "destroy", "tank/small")
	if m := mountsBelow(t, h.root); len(m) != 0 {
		t.Fatalf("mounted after destroy: %v", m)
	}
	if imgs, _ := filepath.Glob(filepath.Join(h.root, "backing", "*")); len(imgs) != 0 {
		t.Fatalf("images left after destroy: %v", imgs)
	}
}

// A setuid file in a filesystem with setuid=off gives whoever runs it
// nothing (mounted nosuid), as on illumos, while the same file where
// setuid is on makes its runner root; zfs set changes it live.
//
// Drop unix.MS_NOSUID from mountFlags (internal/sim/zfs_backing.go) to
// see it fail: the host user runs the file as root.
func TestSetuidOffStopsASetuidFile(t *testing.T) {
	if !machineRootHere() {
		t.Skip("the simulator mounts filesystems only as the machine's root")
	}
	u, err := user.Lookup("zonewright-test")
	if err != nil {
		t.Skip("no user zonewright-test to run the file as")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	h := newHost(t)
	h.must("zfs", "create", "-o", "setuid=off", "-o", "devices=off", "tank/claim")
	h.must("zfs", "create", "tank/plain")
	// The root and the test's temp dirs above it, for the host user to
	// reach the files.
	for d, i := h.root, 0; i < 3; d, i = filepath.Dir(d), i+1 {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	euid := func(fs string) string {
		t.Helper()
		id := filepath.Join(h.root, "fs/tank", fs, "id")
		cmd := exec.Command(id, "-u")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s as %s: %v\n%s", id, u.Username, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, fs := range []string{"claim", "plain"} {
		b, err := os.ReadFile("/usr/bin/id")
		if err != nil {
			t.Skip("no /usr/bin/id to plant")
		}
		id := filepath.Join(h.root, "fs/tank", fs, "id")
		if err := os.WriteFile(id, b, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(h.root, "fs/tank", fs), 0o755)
		if err := os.Chmod(id, os.ModeSetuid|0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := euid("plain"); got != "0" {
		t.Fatalf("a setuid root file where setuid is on ran as %s, want 0 (the test's premise)", got)
	}
	if got := euid("claim"); got != u.Uid {
		t.Errorf("a setuid root file where setuid=off ran as %s, want %s", got, u.Uid)
	}
	h.must("zfs", "set", "setuid=on", "tank/claim")
	if got := euid("claim"); got != "0" {
		t.Errorf("after zfs set setuid=on the file ran as %s, want 0", got)
	}
	h.must("zfs", "set", "setuid=off", "tank/claim")
	if got := euid("claim"); got != u.Uid {
		t.Errorf("after zfs set setuid=off again the file ran as %s, want %s", got, u.Uid)
	}
}
