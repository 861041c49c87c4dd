package sim_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestZvolIncrementalSendReceive(t *testing.T) {
	h := newHost(t)
	h.must("zfs", "create", "-p", "tank/vols")
	h.must("zfs", "create", "-s", "-b", "16K", "-V", "8M", "tank/vols/disk")
	raw := h.fsPath("/dev/zvol/rdsk/tank/vols/disk")
	write := func(p string, off int64, b []byte) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	sameBytes := func(a, b string) {
		t.Helper()
		x, err1 := os.ReadFile(a)
		y, err2 := os.ReadFile(b)
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Fatalf("%s and %s differ (%d and %d bytes; %v %v)", a, b, len(x), len(y), err1, err2)
		}
	}
	write(raw, 0, bytes.Repeat([]byte("boot"), 4096))
	write(raw, 5<<20, []byte("DATA"))
	h.must("zfs", "snapshot", "tank/vols/disk@a")
	full, stderr, code := h.runBytes(nil, "zfs", "send", "tank/vols/disk@a")
	if code != 0 {
		t.Fatal(stderr)
	}
	if _, stderr, code := h.runBytes(full, "zfs", "receive", "tank/vols/copy"); code != 0 {
		t.Fatal(stderr)
	}
	copyRaw := h.fsPath("/dev/zvol/rdsk/tank/vols/copy")

	// Change two blocks (one back to zeros), then grow the volume and
	// write past the old end.
	write(raw, 16<<10, []byte("second block"))
	write(raw, 5<<20, make([]byte, 4))
	h.must("zfs", "set", "volsize=12M", "tank/vols/disk")
	write(raw, 11<<20, []byte("GREW"))
	h.must("zfs", "snapshot", "tank/vols/disk@b")
	inc, stderr, code := h.runBytes(nil, "zfs", "send", "-i", "@a", "tank/vols/disk@b")
	if code != 0 {
		t.Fatalf("zfs send -i of a volume: %s", stderr)
	}
	// Three changed 16K blocks travel, not the volume.
	if len(inc) > 3*(16<<10)+1024 {
		t.Errorf("an incremental stream of three blocks is %d bytes", len(inc))
	}
	out, stderr, code := h.runBytes(inc, "zfs", "receive", "-v", "tank/vols/copy")
	if code != 0 || !bytes.HasPrefix(out, []byte("receiving incremental stream of tank/vols/disk@b into tank/vols/copy@b\n")) {
		t.Fatalf("receive incremental: exit %d stdout %q stderr %q", code, out, stderr)
	}
	sameBytes(raw, copyRaw)
	sameBytes(raw, h.fsPath("/dev/zvol/dsk/tank/vols/copy"))
	expect(t, h.run("zfs", "get", "-Hp", "-o", "value", "volsize", "tank/vols/copy"), 0, "12582912\n", "")
	expect(t, h.run("zfs", "list", "-H", "-o", "name", "-t", "snapshot", "-r", "tank/vols/copy"), 0,
		"tank/vols/copy@a\ntank/vols/copy@b\n", "")

	// The wrong base is refused with the filesystems' words.
	write(raw, 0, []byte("third"))
	h.must("zfs", "snapshot", "tank/vols/disk@c")
	write(raw, 0, []byte("fourth"))
	h.must("zfs", "snapshot", "tank/vols/disk@d")
	incBC, _, _ := h.runBytes(nil, "zfs", "send", "-i", "@b", "tank/vols/disk@c")
	incCD, _, _ := h.runBytes(nil, "zfs", "send", "-i", "@c", "tank/vols/disk@d")
	_, stderr, code = h.runBytes(incCD, "zfs", "receive", "tank/vols/copy")
	if code != 1 || stderr != "cannot receive incremental stream: most recent snapshot of tank/vols/copy does not\nmatch incremental source\n" {
		t.Errorf("receive onto the wrong base: exit %d stderr %q", code, stderr)
	}
	// A destination written since its latest snapshot is refused, and
	// rolled back first under -F.
	write(copyRaw, 1<<20, []byte("written on the copy"))
	_, stderr, code = h.runBytes(incBC, "zfs", "receive", "tank/vols/copy")
	if code != 1 || stderr != "cannot receive incremental stream: destination tank/vols/copy has been modified\nsince most recent snapshot\n" {
		t.Errorf("receive onto a modified volume: exit %d stderr %q", code, stderr)
	}
	if _, stderr, code = h.runBytes(incBC, "zfs", "receive", "-F", "tank/vols/copy"); code != 0 {
		t.Fatalf("receive -F: %s", stderr)
	}
	if _, stderr, code = h.runBytes(incCD, "zfs", "receive", "tank/vols/copy"); code != 0 {
		t.Fatalf("receive @d: %s", stderr)
	}
	sameBytes(raw, copyRaw)
	// A stream carries its snapshot's size, not the volume's since.
	h.must("zfs", "set", "volsize=16M", "tank/vols/disk")
	fullD, _, _ := h.runBytes(nil, "zfs", "send", "tank/vols/disk@d")
	if _, stderr, code := h.runBytes(fullD, "zfs", "receive", "tank/vols/d"); code != 0 {
		t.Fatal(stderr)
	}
	expect(t, h.run("zfs", "get", "-Hp", "-o", "value", "volsize", "tank/vols/d"), 0, "12582912\n", "")
	snapData := func(snap string) string { return filepath.Join(h.root, "snap", snap, "zvol") }
	sameBytes(snapData("tank%vols%disk@c"), snapData("tank%vols%copy@c"))
	if b, _ := os.ReadFile(copyRaw); bytes.Contains(b, []byte("written on the copy")) {
		t.Errorf("-F kept a write made on the copy since its snapshot")
	}
}
