package sim_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// In isolation mode a zone sees its own resolver files and nodename, as
// on illumos: zlogin's commands and its services run in the zone's mount
// and UTS namespaces, where the zone root's /etc/resolv.conf, /etc/hosts
// and /etc/nsswitch.conf cover the host's and the hostname is the zone's
// nodename (the simulator's own in-zone commands in its UTS namespace);
// the host's stay as they were. A link the zone planted in place of a
// file is not followed.
//
// Remove the bindZoneFile loop of setupZoneView (internal/sim/zonens.go)
// to see it fail: the zone reads the host's resolv.conf.
func TestIsolatedZoneSeesItsOwnResolverFilesAndNodename(t *testing.T) {
	const network = 202
	fab := isolatedFabric(t, network)
	h, _ := isolatedNode(t, fab, network, 1, "exec sleep 1000")
	root := filepath.Join(h.root, "fs", "zones", "pod", "root")
	hostResolv, _ := os.ReadFile("/etc/resolv.conf")
	hostHosts, _ := os.ReadFile("/etc/hosts")
	zoneResolv := "# the zone's\nnameserver 10.202.1.1\nsearch default.svc.cluster.local\n"
	for name, content := range map[string]string{"etc/resolv.conf": zoneResolv, "etc/nodename": "web-7\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The zone's hosts is a link to a host file: it must not be bound.
	if err := os.Symlink("/etc/shadow", filepath.Join(root, "etc", "hosts")); err != nil {
		t.Fatal(err)
	}
	h.must("zoneadm", "-z", "pod", "reboot")

	if r := h.run("zlogin", "pod", "cat", "/etc/resolv.conf"); r.code != 0 || r.stdout != zoneResolv {
		t.Fatalf("the zone's /etc/resolv.conf: exit %d, %q (%s); want the zone root's %q", r.code, r.stdout, r.stderr, zoneResolv)
	}
	if r := h.run("zlogin", "pod", "cat", "/etc/hosts"); r.code != 0 || r.stdout != string(hostHosts) {
		t.Fatalf("the zone's /etc/hosts, its root's a link: exit %d, %q (%s); want the host's", r.code, r.stdout, r.stderr)
	}
	// The kernel's hostname (uname(2)), not the simulated hostname(1).
	if r := h.run("zlogin", "pod", "python3", "-c", `"import socket; print(socket.gethostname())"`); r.code != 0 || strings.TrimSpace(r.stdout) != "web-7" {
		t.Fatalf("the zone's kernel hostname: exit %d, %q (%s); want web-7", r.code, r.stdout, r.stderr)
	}
	// The simulator's own in-zone commands still find their state there.
	if r := h.run("zlogin", "pod", "hostname"); r.code != 0 || strings.TrimSpace(r.stdout) != "web-7" {
		t.Fatalf("hostname in the zone: exit %d, %q (%s)", r.code, r.stdout, r.stderr)
	}
	if r := h.run("zlogin", "pod", "ipadm", "show-addr"); r.code != 0 || !strings.Contains(r.stdout, "10.202.1.2/24") {
		t.Fatalf("ipadm show-addr in the zone: exit %d, %q (%s)", r.code, r.stdout, r.stderr)
	}
	// The host's files and hostname are untouched.
	if b, _ := os.ReadFile("/etc/resolv.conf"); string(b) != string(hostResolv) {
		t.Fatal("the host's /etc/resolv.conf changed")
	}
	if hn, _ := os.Hostname(); hn == "web-7" {
		t.Fatal("the host took the zone's hostname")
	}
}

// In isolation mode a zone sees only its own processes, as on illumos: a
// process in zone pod lists in /proc its own service, its init and
// itself, and not zone zb's service, the supervisor or this test; it
// cannot even name zb's process (kill -0: no such process, not just not
// permitted). Halting the zone leaves none of its processes, not even
// one its init inherited. The host's pids stay what the state records.
//
// Set the Cloneflags of the zone's init to 0 in startZoneInit
// (internal/sim/zonepid.go) to see it fail: the zone's /proc lists every
// process of the machine.
func TestIsolatedZoneSeesOnlyItsOwnProcesses(t *testing.T) {
	const network = 203
	fab := isolatedFabric(t, network)
	h, _ := isolatedNode(t, fab, network, 1, "exec sleep 1001")
	bootWithService(t, h, "zb", "holder", "exec sleep 1002", "")
	waitFor(t, 10*time.Second, "the pod's service online", func() bool {
		st, pid, _ := h.service("pod", "svc:/site/server:default")
		return st == "online" && pid > 0
	})
	_, podService, _ := h.service("pod", "svc:/site/server:default")
	_, zbService, _ := h.service("zb", "svc:/site/holder:default")
	var supervisor int
	for _, z := range h.state().Zones {
		if z.Name == "pod" {
			supervisor = z.SupervisorPID
		}
	}
	if !alive(podService) || !alive(zbService) || !alive(supervisor) {
		t.Fatalf("recorded pids are not the host's: service %d, zb's service %d, supervisor %d", podService, zbService, supervisor)
	}
	// An orphan of a zlogin session, which the zone's init inherits; its
	// command line is this test run's own.
	orphanCmd := fmt.Sprintf("sleep %d", 1000000+os.Getpid())
	expect(t, h.run("zlogin", "pod", orphanCmd+" </dev/null >/dev/null 2>&1 &"), 0, "", "")

	r := h.run("zlogin", "pod", `echo; for p in /proc/[0-9]*; do echo "${p#/proc/}: $(tr '\0' ' ' < $p/cmdline)"; done`)
	if r.code != 0 {
		t.Fatalf("listing the zone's /proc: %v", r)
	}
	// Each command line ends in a space (its NULs turned to spaces), so a
	// command is matched with it: the orphan's "sleep 1002848" (pid 2848)
	// is not zb's "sleep 1002".
	seen := r.stdout
	for _, own := range []string{"\n1: ", "zoneinit", "sleep 1001 ", orphanCmd + " "} {
		if !strings.Contains(seen, own) {
			t.Errorf("the zone does not see its own %q in /proc:\n%s", own, seen)
		}
	}
	for what, foreign := range map[string]string{"zb's service": "sleep 1002 ", "the supervisor": "zoneadmd", "this test": os.Args[0]} {
		if strings.Contains(seen, foreign) {
			t.Errorf("the zone sees %s (%q) in /proc:\n%s", what, foreign, seen)
		}
	}
	if r := h.run("zlogin", "pod", fmt.Sprintf("kill -0 %d", zbService)); r.code == 0 || !strings.Contains(r.stderr, "No such process") {
		t.Errorf("zone pod named zb's process %d (want no such process): %v", zbService, r)
	}

	orphan := hostPidOf(t, orphanCmd)
	t.Cleanup(func() {
		if alive(orphan) {
			syscall.Kill(orphan, syscall.SIGKILL)
		}
	})
	h.must("zoneadm", "-z", "pod", "halt")
	for what, pid := range map[string]int{"service": podService, "zlogin orphan": orphan, "supervisor": supervisor} {
		if alive(pid) {
			t.Errorf("the halted zone's %s (host pid %d) is still alive", what, pid)
		}
	}
	if !alive(zbService) {
		t.Errorf("zone zb's service %d died with zone pod", zbService)
	}
}

// hostPidOf is the host pid of the one process whose command line is
// cmdline.
func hostPidOf(t *testing.T, cmdline string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == cmdline {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("host processes %q: %v, want one", cmdline, found)
	}
	return found[0]
}
