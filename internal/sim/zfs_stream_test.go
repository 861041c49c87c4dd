package sim_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTarball writes a gzipped tarball of files (path -> content).
func writeTarball(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "rootfs.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runStdin runs a command with binary stdin and returns stdout as bytes.
func (h *simHost) runBytes(stdin []byte, cmd string, args ...string) (stdout []byte, stderr string, code int) {
	h.t.Helper()
	c := exec.Command(filepath.Join(h.bin, cmd), args...)
	c.Env = cleanEnv()
	c.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("%s %v: %v", cmd, args, err)
	}
	return out.Bytes(), errb.String(), code
}

// fsPath is a simulated illumos path on the Linux host.
func (h *simHost) fsPath(p string) string { return filepath.Join(h.root, "fs", p) }

// sendFixture makes tank/src with a file and a symlink, snapshots it and
// returns its send stream.
func sendFixture(t *testing.T, h *simHost) []byte {
	t.Helper()
	h.must("zfs", "create", "-o", "zonewright:note=hi", "tank/src")
	os.MkdirAll(h.fsPath("/tank/src/etc"), 0o755)
	os.WriteFile(h.fsPath("/tank/src/etc/motd"), []byte("hello\n"), 0o644)
	os.Symlink("etc/motd", h.fsPath("/tank/src/motd"))
	h.must("zfs", "snapshot", "tank/src@v1")
	stream, stderr, code := h.runBytes(nil, "zfs", "send", "-p", "tank/src@v1")
	if code != 0 {
		t.Fatalf("zfs send: exit %d: %s", code, stderr)
	}
	return stream
}

func TestZfsSendReceiveRoundTrip(t *testing.T) {
	h := newHost(t)
	stream := sendFixture(t, h)
	if !bytes.HasPrefix(stream, []byte("ILSIMZS1")) {
		t.Fatalf("stream starts %q", stream[:8])
	}
	h.must("zfs", "create", "tank/images")
	out, stderr, code := h.runBytes(stream, "zfs", "receive", "-u", "-v", "tank/images/base")
	if code != 0 || stderr != "" ||
		!strings.HasPrefix(string(out), "receiving full stream of tank/src@v1 into tank/images/base@v1\nreceived ") {
		t.Fatalf("receive: exit %d stdout %q stderr %q", code, out, stderr)
	}
	expect(t, h.run("zfs", "list", "-H", "-o", "name,type,mounted", "-r", "-t", "all", "tank/images"), 0,
		"tank/images\tfilesystem\tyes\ntank/images/base\tfilesystem\tno\ntank/images/base@v1\tsnapshot\t-\n", "")
	expect(t, h.run("zfs", "get", "-H", "-o", "value", "zonewright:note", "tank/images/base"), 0, "hi\n", "")
	// A clone of the received snapshot has the sent files.
	h.must("zfs", "clone", "tank/images/base@v1", "tank/c1")
	if b, _ := os.ReadFile(h.fsPath("/tank/c1/etc/motd")); string(b) != "hello\n" {
		t.Errorf("clone of the received snapshot: motd %q", b)
	}
	if l, _ := os.Readlink(h.fsPath("/tank/c1/motd")); l != "etc/motd" {
		t.Errorf("symlink %q", l)
	}
	// A named target snapshot wins over the stream's.
	_, stderr, code = h.runBytes(stream, "zfs", "recv", "tank/images/other@base")
	if code != 0 {
		t.Fatalf("recv into @base: %s", stderr)
	}
	expect(t, h.run("zfs", "list", "-H", "-o", "name", "-t", "snapshot", "tank/images/other@base"), 0, "tank/images/other@base\n", "")
	// -n reads the stream and changes nothing.
	out, _, code = h.runBytes(stream, "zfs", "receive", "-nv", "tank/images/dry")
	if code != 0 || !strings.HasPrefix(string(out), "would receive full stream of tank/src@v1 into tank/images/dry@v1") {
		t.Errorf("dry run: %d %q", code, out)
	}
	if r := h.run("zfs", "list", "tank/images/dry"); r.code != 1 {
		t.Errorf("dry run created the dataset: %v", r)
	}
}

func TestZfsReceiveErrors(t *testing.T) {
	h := newHost(t)
	stream := sendFixture(t, h)
	h.must("zfs", "create", "tank/dst")
	tests := []struct {
		name   string
		stdin  []byte
		args   []string
		code   int
		stderr string
	}{
		{"an existing destination without -F", stream, []string{"receive", "tank/dst"}, 1,
			"cannot receive new filesystem stream: destination 'tank/dst' exists\nmust specify -F to overwrite it\n"},
		{"an existing destination with snapshots under -F", stream, []string{"receive", "-F", "tank/src"}, 1,
			"cannot receive new filesystem stream: destination has snapshots (eg. tank/src@v1)\nmust destroy them to overwrite it\n"},
		{"a missing parent", stream, []string{"receive", "tank/no/such"}, 1,
			"cannot receive new filesystem stream: no such pool or dataset\n"},
		{"a pool as the destination", stream, []string{"receive", "nopool"}, 1,
			"cannot receive new filesystem stream: destination 'nopool' does not exist\n"},
		{"a bad magic number", []byte("definitely not a stream"), []string{"receive", "tank/x"}, 1,
			"cannot receive: invalid stream (bad magic number)\n"},
		{"an empty stream", nil, []string{"receive", "tank/x"}, 1,
			"cannot receive: failed to read from stream\n"},
		{"a truncated stream", stream[:len(stream)-40], []string{"receive", "tank/x"}, 1,
			"cannot receive: failed to read from stream\n"},
		{"a corrupted stream", corrupt(stream), []string{"receive", "tank/x"}, 1,
			"cannot receive new filesystem stream: checksum mismatch or incomplete stream\n"},
		{"no destination", stream, []string{"receive"}, 2, ""},
		{"sending a filesystem", nil, []string{"send", "tank/src"}, 2, ""},
		{"sending a missing snapshot", nil, []string{"send", "tank/src@nope"}, 1,
			"cannot open 'tank/src@nope': dataset does not exist\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := h.runBytes(tt.stdin, "zfs", tt.args...)
			if code != tt.code || (tt.stderr != "" && stderr != tt.stderr) {
				t.Errorf("exit %d stderr %q, want exit %d stderr %q", code, stderr, tt.code, tt.stderr)
			}
		})
	}
	// -F replaces a destination without snapshots.
	if _, stderr, code := h.runBytes(stream, "zfs", "receive", "-F", "tank/dst"); code != 0 {
		t.Fatalf("receive -F: %s", stderr)
	}
	if b, _ := os.ReadFile(h.fsPath("/tank/dst/etc/motd")); string(b) != "hello\n" {
		t.Errorf("receive -F: motd %q", b)
	}
	// Nothing half-received is left by the failures.
	if r := h.run("zfs", "list", "tank/x"); r.code != 1 {
		t.Errorf("a failed receive left tank/x: %v", r)
	}
	if m, _ := filepath.Glob(filepath.Join(h.root, ".recv-*")); len(m) > 0 {
		t.Errorf("staging left behind: %v", m)
	}
}

// corrupt flips a byte in the middle of a stream's body.
func corrupt(stream []byte) []byte {
	b := bytes.Clone(stream)
	i := bytes.Index(b, []byte("hello"))
	b[i] = 'j'
	return b
}

func TestZvolDevicesSnapshotsClonesAndStreams(t *testing.T) {
	h := newHost(t)
	h.must("zfs", "create", "-p", "tank/vols")
	h.must("zfs", "create", "-s", "-b", "16K", "-V", "8M", "tank/vols/disk")
	raw, blk := h.fsPath("/dev/zvol/rdsk/tank/vols/disk"), h.fsPath("/dev/zvol/dsk/tank/vols/disk")
	fi, err := os.Stat(raw)
	if err != nil || fi.Size() != 8<<20 {
		t.Fatalf("raw device: %v %v", fi, err)
	}
	if _, err := os.Stat(blk); err != nil {
		t.Fatalf("block device: %v", err)
	}
	f, err := os.OpenFile(raw, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("BOOT"), 3<<20)
	f.Close()
	h.must("zfs", "snapshot", "tank/vols/disk@base")
	// Writes after the snapshot do not reach it.
	f, _ = os.OpenFile(raw, os.O_WRONLY, 0)
	f.WriteAt([]byte("LATE"), 3<<20)
	f.Close()
	h.must("zfs", "clone", "tank/vols/disk@base", "tank/vols/vm1")
	expect(t, h.run("zfs", "get", "-Hp", "-o", "value", "type,volsize,volblocksize,origin", "tank/vols/vm1"), 0,
		"volume\n8388608\n16384\ntank/vols/disk@base\n", "")
	readAt := func(p string) string {
		b := make([]byte, 4)
		g, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		g.ReadAt(b, 3<<20)
		return string(b)
	}
	if got := readAt(h.fsPath("/dev/zvol/rdsk/tank/vols/vm1")); got != "BOOT" {
		t.Errorf("clone data %q, want the snapshot's", got)
	}
	// A volume stream carries the data and the size.
	stream, stderr, code := h.runBytes(nil, "zfs", "send", "tank/vols/disk@base")
	if code != 0 {
		t.Fatal(stderr)
	}
	if len(stream) > 3<<20 {
		t.Errorf("stream of a sparse volume is %d bytes: holes were sent", len(stream))
	}
	if _, stderr, code := h.runBytes(stream, "zfs", "receive", "tank/vols/copy"); code != 0 {
		t.Fatal(stderr)
	}
	if got := readAt(h.fsPath("/dev/zvol/rdsk/tank/vols/copy")); got != "BOOT" {
		t.Errorf("received volume data %q", got)
	}
	expect(t, h.run("zfs", "list", "-H", "-o", "name", "-t", "snapshot", "-r", "tank/vols/copy"), 0, "tank/vols/copy@base\n", "")
	// A volume a running zone delegates is busy.
	h.zoneSetup("vm1", "running", "set brand=bhyve", "add device; set match=/dev/zvol/rdsk/tank/vols/vm1; end")
	expect(t, h.run("zfs", "destroy", "tank/vols/vm1"), 1, "", "cannot destroy 'tank/vols/vm1': dataset is busy\n")
	// Its snapshots are not: ZFS destroys a snapshot of an open volume
	// (one not held by zfs hold), and renames one; with -r the volume is
	// among what goes, and busy.
	h.must("zfs", "snapshot", "tank/vols/vm1@s1")
	h.must("zfs", "snapshot", "tank/vols/vm1@s2")
	h.must("zfs", "rename", "tank/vols/vm1@s2", "tank/vols/vm1@s3")
	expect(t, h.run("zfs", "destroy", "-r", "tank/vols/vm1"), 1, "", "cannot destroy 'tank/vols/vm1': dataset is busy\n")
	h.must("zfs", "destroy", "tank/vols/vm1@s1")
	h.must("zfs", "destroy", "tank/vols/vm1@s3")
	h.must("zoneadm", "-z", "vm1", "halt")
	h.must("zfs", "destroy", "tank/vols/vm1")
	if _, err := os.Stat(h.fsPath("/dev/zvol/rdsk/tank/vols/vm1")); !os.IsNotExist(err) {
		t.Errorf("destroy left the device: %v", err)
	}
	expect(t, h.run("zfs", "destroy", "tank/vols/disk@base"), 0, "", "")
}

func TestLxInstallFromImages(t *testing.T) {
	h := newHost(t)
	stream := sendFixture(t, h)
	h.withZonesDataset()
	if _, stderr, code := h.runBytes(stream, "zfs", "receive", "-u", "tank/img@base"); code != 0 {
		t.Fatal(stderr)
	}
	// -s SNAPSHOT clones it under the zonepath dataset.
	h.zoneSetup("lx1", "configured", "set brand=lx")
	h.must("zoneadm", "-z", "lx1", "install", "-s", "tank/img@base")
	if b, _ := os.ReadFile(h.fsPath("/zones/lx1/root/etc/motd")); string(b) != "hello\n" {
		t.Errorf("lx1 root motd %q", b)
	}
	expect(t, h.run("zfs", "get", "-H", "-o", "value", "origin", "tank/zones/lx1/root"), 0, "tank/img@base\n", "")
	r := h.run("zfs", "destroy", "-r", "tank/img")
	if r.code != 1 || !strings.Contains(r.stderr, "snapshot has dependent clones") {
		t.Errorf("destroy of a cloned image: %v", r)
	}
	h.must("zoneadm", "-z", "lx1", "uninstall", "-F")
	if r := h.run("zfs", "list", "tank/zones/lx1/root"); r.code != 1 {
		t.Errorf("uninstall left the root clone: %v", r)
	}
	// -s STREAMFILE receives the stream into the zone root.
	sf := filepath.Join(t.TempDir(), "image.zfs")
	os.WriteFile(sf, stream, 0o644)
	h.zoneSetup("lx2", "configured", "set brand=lx")
	h.must("zoneadm", "-z", "lx2", "install", "-s", sf)
	if b, _ := os.ReadFile(h.fsPath("/zones/lx2/root/etc/motd")); string(b) != "hello\n" {
		t.Errorf("lx2 root motd %q", b)
	}
	// -t TARBALL unpacks it.
	h.zoneSetup("lx3", "configured", "set brand=lx")
	h.must("zoneadm", "-z", "lx3", "install", "-t", writeTarball(t, map[string]string{"etc/hostname": "lx3\n"}))
	if b, _ := os.ReadFile(h.fsPath("/zones/lx3/root/etc/hostname")); string(b) != "lx3\n" {
		t.Errorf("lx3 hostname %q", b)
	}
	// A stream file that is not one leaves the zone configured.
	bad := filepath.Join(t.TempDir(), "bad.zfs")
	os.WriteFile(bad, []byte("garbage, not a stream"), 0o644)
	h.zoneSetup("lx4", "configured", "set brand=lx")
	if r := h.run("zoneadm", "-z", "lx4", "install", "-s", bad); r.code == 0 || !strings.Contains(r.stderr, "bad magic number") {
		t.Errorf("install from garbage: %v", r)
	}
	h.must("zfs", "destroy", "-r", "tank/img")
}

func TestZfsIncrementalSendReceive(t *testing.T) {
	h := newHost(t)
	full := sendFixture(t, h)
	h.must("zfs", "create", "tank/dst")
	if _, stderr, code := h.runBytes(full, "zfs", "receive", "-F", "tank/dst/copy"); code != 0 {
		t.Fatalf("receive the full stream: %s", stderr)
	}
	// Change the source: a new file, a changed file, a removed symlink,
	// a new directory.
	os.WriteFile(h.fsPath("/tank/src/etc/motd"), []byte("changed\n"), 0o644)
	os.WriteFile(h.fsPath("/tank/src/new"), []byte("new file\n"), 0o600)
	os.Remove(h.fsPath("/tank/src/motd"))
	os.MkdirAll(h.fsPath("/tank/src/var/db"), 0o755)
	os.WriteFile(h.fsPath("/tank/src/var/db/rows"), []byte("1\n"), 0o644)
	big := bytes.Repeat([]byte("unchanged "), 100_000)
	h.must("zfs", "snapshot", "tank/src@v2")
	inc, stderr, code := h.runBytes(nil, "zfs", "send", "-i", "@v1", "tank/src@v2")
	if code != 0 {
		t.Fatalf("zfs send -i: exit %d: %s", code, stderr)
	}
	// The same with the source's full name.
	if again, _, _ := h.runBytes(nil, "zfs", "send", "-i", "tank/src@v1", "tank/src@v2"); !bytes.Equal(again[:20], inc[:20]) {
		t.Errorf("send -i with a full source name differs")
	}
	out, stderr, code := h.runBytes(inc, "zfs", "receive", "-v", "tank/dst/copy")
	if code != 0 || !strings.HasPrefix(string(out), "receiving incremental stream of tank/src@v2 into tank/dst/copy@v2\n") {
		t.Fatalf("receive incremental: exit %d stdout %q stderr %q", code, out, stderr)
	}
	for p, want := range map[string]string{"/tank/dst/copy/etc/motd": "changed\n", "/tank/dst/copy/new": "new file\n", "/tank/dst/copy/var/db/rows": "1\n"} {
		if b, err := os.ReadFile(h.fsPath(p)); string(b) != want {
			t.Errorf("%s: %q %v, want %q", p, b, err, want)
		}
	}
	if _, err := os.Lstat(h.fsPath("/tank/dst/copy/motd")); !os.IsNotExist(err) {
		t.Errorf("the removed symlink is still there: %v", err)
	}
	expect(t, h.run("zfs", "list", "-H", "-o", "name", "-t", "snapshot", "-r", "tank/dst/copy"), 0,
		"tank/dst/copy@v1\ntank/dst/copy@v2\n", "")

	// Only what changed travels: an unchanged large file is not sent
	// again, whether it is recent (compared by content) or settled
	// (older than its snapshot: its modification time says it).
	os.WriteFile(h.fsPath("/tank/src/big"), big, 0o644)
	os.WriteFile(h.fsPath("/tank/src/recent"), big, 0o644)
	past := time.Now().Add(-time.Hour)
	os.Chtimes(h.fsPath("/tank/src/big"), past, past)
	h.must("zfs", "snapshot", "tank/src@v3")
	os.WriteFile(h.fsPath("/tank/src/small"), []byte("x"), 0o644)
	os.WriteFile(h.fsPath("/tank/src/var/db/rows"), []byte("2\n"), 0o644) // same size, new content
	h.must("zfs", "snapshot", "tank/src@v4")
	inc34, _, _ := h.runBytes(nil, "zfs", "send", "-i", "@v3", "tank/src@v4")
	if len(inc34) > 4096 {
		t.Errorf("an incremental stream of one small file is %d bytes", len(inc34))
	}
	inc23, _, _ := h.runBytes(nil, "zfs", "send", "-i", "@v2", "tank/src@v3")

	tests := []struct {
		name   string
		stdin  []byte
		args   []string
		code   int
		stderr string
	}{
		{"a missing destination", inc23, []string{"receive", "tank/dst/none"}, 1,
			"cannot receive incremental stream: destination 'tank/dst/none' does not exist\n"},
		{"a destination whose latest snapshot is not the source", inc34, []string{"receive", "tank/dst/copy"}, 1,
			"cannot receive incremental stream: most recent snapshot of tank/dst/copy does not\nmatch incremental source\n"},
		{"a snapshot that exists", inc, []string{"receive", "tank/dst/copy@v2"}, 1,
			"cannot receive incremental stream: destination 'tank/dst/copy@v2' exists\n"},
		{"a source in another filesystem", nil, []string{"send", "-i", "tank/dst/copy@v1", "tank/src@v2"}, 1,
			"cannot send 'tank/src@v2': incremental source must be in same filesystem\n"},
		{"a source that is not earlier", nil, []string{"send", "-i", "@v3", "tank/src@v2"}, 1,
			"cannot send 'tank/src@v2': incremental source (tank/src@v3) is not earlier than it\n"},
		{"a missing source", nil, []string{"send", "-i", "@nope", "tank/src@v2"}, 1,
			"cannot open 'tank/src@nope': dataset does not exist\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := h.runBytes(tt.stdin, "zfs", tt.args...)
			if code != tt.code || stderr != tt.stderr {
				t.Errorf("exit %d stderr %q, want exit %d stderr %q", code, stderr, tt.code, tt.stderr)
			}
		})
	}

	// A destination written since its latest snapshot is refused, and
	// rolled back first under -F.
	os.WriteFile(h.fsPath("/tank/dst/copy/stray"), []byte("written on the copy"), 0o644)
	_, stderr, code = h.runBytes(inc23, "zfs", "receive", "tank/dst/copy")
	if code != 1 || stderr != "cannot receive incremental stream: destination tank/dst/copy has been modified\nsince most recent snapshot\n" {
		t.Errorf("receive onto a modified destination: exit %d stderr %q", code, stderr)
	}
	if _, stderr, code = h.runBytes(inc23, "zfs", "receive", "-F", "tank/dst/copy"); code != 0 {
		t.Fatalf("receive -F: %s", stderr)
	}
	if _, err := os.Stat(h.fsPath("/tank/dst/copy/stray")); !os.IsNotExist(err) {
		t.Errorf("-F kept a file written since the snapshot: %v", err)
	}
	if b, _ := os.ReadFile(h.fsPath("/tank/dst/copy/big")); !bytes.Equal(b, big) {
		t.Errorf("big file: %d bytes", len(b))
	}
	if _, stderr, code = h.runBytes(inc34, "zfs", "receive", "tank/dst/copy"); code != 0 {
		t.Fatalf("receive v4: %s", stderr)
	}
	if b, _ := os.ReadFile(h.fsPath("/tank/dst/copy/small")); string(b) != "x" {
		t.Errorf("small: %q", b)
	}
	if b, _ := os.ReadFile(h.fsPath("/tank/dst/copy/var/db/rows")); string(b) != "2\n" {
		t.Errorf("rows changed in place: %q", b)
	}
	for _, name := range []string{"big", "recent"} {
		if b, _ := os.ReadFile(h.fsPath("/tank/dst/copy/" + name)); !bytes.Equal(b, big) {
			t.Errorf("%s: %d bytes", name, len(b))
		}
	}
	// The received snapshots are intact: each still holds its own files.
	if b, _ := os.ReadFile(h.fsPath("/tank/dst/copy/var/db/rows")); string(b) != "2\n" {
		t.Errorf("rows: %q", b)
	}
	h.must("zfs", "clone", "tank/dst/copy@v3", "tank/dst/v3")
	if b, _ := os.ReadFile(h.fsPath("/tank/dst/v3/var/db/rows")); string(b) != "1\n" {
		t.Errorf("rows in a clone of @v3 after @v4 was received: %q", b)
	}
	if m, _ := filepath.Glob(filepath.Join(h.root, ".recv-*")); len(m) > 0 {
		t.Errorf("staging left behind: %v", m)
	}
}
