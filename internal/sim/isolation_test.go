package sim_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two zones of one host are two worlds: a process of zone a cannot read
// the environment of zone b's process, signal it, or read or write zone
// b's files, though each zone does all of this to itself. Only root can
// give each zone a user of its own; without root every zone's processes
// are the caller's and nothing stands between them.
func TestZoneCannotReachAnotherZonesProcessesOrFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("zones are isolated only when illumos-sim runs as root: without it every zone's processes are the caller's")
	}
	h := newHost(t)
	const secret = "zw-isolation-s3cret"
	svc := `echo ` + secret + ` > secret.txt; export ZW_SECRET=` + secret + `; exec sleep 1000`
	bootWithService(t, h, "za", "holder", svc, "")
	bootWithService(t, h, "zb", "holder", svc, "")
	_, pidA, _ := h.service("za", "svc:/site/holder:default")
	_, pidB, _ := h.service("zb", "svc:/site/holder:default")
	rootB := filepath.Join(h.root, "fs", "zones", "zb", "root")
	waitFor(t, 10*time.Second, "zone b's file", func() bool { _, err := os.Stat(filepath.Join(rootB, "secret.txt")); return err == nil })

	uids := map[string]uint32{}
	for _, z := range h.state().Zones {
		uids[z.Name] = z.UID
	}
	if uids["za"] == 0 || uids["za"] == uids["zb"] {
		t.Fatalf("zone uids a=%d b=%d, want two of their own", uids["za"], uids["zb"])
	}

	// Positive controls: a zone reaches its own process and files.
	own := h.run("zlogin", "za", fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ; kill -0 %d && echo signalled; cat secret.txt", pidA, pidA))
	if own.code != 0 || !strings.Contains(own.stdout, "ZW_SECRET="+secret) || !strings.Contains(own.stdout, "signalled") {
		t.Fatalf("zone a cannot reach its own process and files: %v", own)
	}

	if r := h.run("zlogin", "za", fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ", pidB)); r.code == 0 || strings.Contains(r.stdout, secret) {
		t.Errorf("zone a read the environment of zone b's process: %v", r)
	}
	if r := h.run("zlogin", "za", fmt.Sprintf("kill -0 %d", pidB)); r.code == 0 || !strings.Contains(r.stderr, "not permitted") {
		t.Errorf("zone a signalled zone b's process (want EPERM): %v", r)
	}
	if r := h.run("zlogin", "za", "cat "+filepath.Join(rootB, "secret.txt")); r.code == 0 || strings.Contains(r.stdout, secret) {
		t.Errorf("zone a read zone b's file: %v", r)
	}
	if r := h.run("zlogin", "za", "echo planted > "+filepath.Join(rootB, "planted")); r.code == 0 {
		t.Errorf("zone a wrote into zone b's root: %v", r)
	}
	if !alive(pidB) {
		t.Errorf("zone b's process %d died", pidB)
	}
}

// A zone's service log is opened by the supervisor, which is root under
// root: a link the zone plants in the log's place must not send the
// supervisor's lines, or the method's output, into a file of the host's.
func TestServiceLogLinkCannotWriteOutsideTheZone(t *testing.T) {
	h := newHost(t)
	fmri := "svc:/site/web:default"
	bootWithService(t, h, "web01", "web", "echo from-the-zone; exec sleep 1000", "")
	zoneRoot := filepath.Join(h.root, "fs", "zones", "web01", "root")
	hostFile := filepath.Join(t.TempDir(), "host-file")
	if err := os.WriteFile(hostFile, []byte("the host's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What the zone's user can do: replace its own log with a link.
	plant := fmt.Sprintf("rm -f var/svc/log/site-web:default.log && ln -s %s var/svc/log/site-web:default.log", hostFile)
	expect(t, h.run("zlogin", "web01", plant), 0, "", "")
	_, first, _ := h.service("web01", fmri)
	expect(t, h.run("zlogin", "web01", "svcadm", "restart", "web"), 0, "", "")
	// The supervisor cannot open the log inside the zone: the start
	// fails, and the instance ends in maintenance, its log unusable.
	waitFor(t, 10*time.Second, "the restart to settle", func() bool {
		st, pid, _ := h.service("web01", fmri)
		return st == "maintenance" || (st == "online" && pid > 0 && pid != first)
	})
	if b, _ := os.ReadFile(hostFile); string(b) != "the host's\n" {
		t.Errorf("the service's log went through the zone's link into a host file: %q", b)
	}
	if target, err := os.Readlink(filepath.Join(zoneRoot, "var", "svc", "log", "site-web:default.log")); err != nil || target != hostFile {
		t.Errorf("the zone's link: %q, %v", target, err)
	}
}

// A FIFO in a service log's place fails the service's start instead of
// hanging its zone's supervisor, which still halts the zone at once.
func TestServiceLogFIFODoesNotHangTheSupervisor(t *testing.T) {
	h := newHost(t)
	fmri := "svc:/site/web:default"
	bootWithService(t, h, "web01", "web", "exec sleep 1000", "")
	expect(t, h.run("zlogin", "web01", "rm -f var/svc/log/site-web:default.log && mkfifo var/svc/log/site-web:default.log"), 0, "", "")
	_, first, _ := h.service("web01", fmri)
	expect(t, h.run("zlogin", "web01", "svcadm", "restart", "web"), 0, "", "")
	waitFor(t, 10*time.Second, "the restart to settle", func() bool {
		st, pid, _ := h.service("web01", fmri)
		return st == "maintenance" || (st == "online" && pid > 0 && pid != first)
	})
	start := time.Now()
	h.must("zoneadm", "-z", "web01", "halt")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("halt took %v", took)
	}
}

// A lofs-mounted tree (a claim's dataset) that served one zone becomes
// the next zone's when that zone boots with it: the new zone appends to
// the files the old one wrote, and nobody else may enter the tree.
func TestALofsTreeBecomesTheBootingZones(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("zones have users of their own only when illumos-sim runs as root")
	}
	h := newHost(t)
	h.must("zfs", "create", "-o", "mountpoint=/vols/claim", "tank/claim")
	mount := "add fs; set dir=/data; set special=/vols/claim; set type=lofs; end"
	h.zoneSetup("za", "running", mount)
	expect(t, h.run("zlogin", "za", "echo one > data/f"), 0, "", "")
	h.must("zoneadm", "-z", "za", "halt")
	h.zoneSetup("zb", "running", mount)
	expect(t, h.run("zlogin", "zb", "echo two >> data/f && cat data/f"), 0, "one\ntwo\n", "")

	// The top is zb's root's, entered by zb's users alone (its access
	// group, when it owns a block of ids); what is inside is zb's root's.
	var uidB, accessB uint32
	for _, z := range h.state().Zones {
		if z.Name == "zb" {
			uidB, accessB = z.UID, z.UID
			if z.UIDs > 1 {
				accessB = z.UID + z.UIDs - 1
			}
		}
	}
	tree := filepath.Join(h.root, "fs", "vols", "claim")
	for _, p := range []string{tree, filepath.Join(tree, "f")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		wantGid := uidB
		if p == tree {
			wantGid = accessB
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uidB || st.Gid != wantGid {
			t.Errorf("%s is %d:%d, want zone b's %d:%d", p, st.Uid, st.Gid, uidB, wantGid)
		}
		if p == tree && fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("the tree's top is %v, open to others", fi.Mode().Perm())
		}
	}
}

// Two simulated hosts on one machine never give their zones the same
// uid: the uids come from one counter for the machine.
func TestZonesOfTwoHostsGetDifferentUIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("zones have users of their own only when illumos-sim runs as root")
	}
	base := t.TempDir()
	var uids []uint32
	for _, name := range []string{"node1", "node2"} {
		h := newNamedHost(t, base, name)
		h.zoneSetup("web01", "running")
		for _, z := range h.state().Zones {
			if z.Name == "web01" {
				uids = append(uids, z.UID)
			}
		}
	}
	if len(uids) != 2 || uids[0] == 0 || uids[0] == uids[1] {
		t.Fatalf("the two hosts' zones have uids %v, want two of their own", uids)
	}
}
