package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/fabric"
)

// In isolation mode a zone sees its own resolver files and nodename, as
// on illumos: zlogin's commands, its services and the simulator's own
// in-zone commands run in the zone's mount and UTS namespaces, where the
// zone root's /etc/resolv.conf, /etc/hosts and /etc/nsswitch.conf cover
// the host's and the hostname is the zone's nodename; the host's stay as
// they were. A link the zone planted in place of a file is not followed.
//
// Remove the bindZoneFile loop of setupZoneView (internal/sim/zonens.go)
// to see it fail: the zone reads the host's resolv.conf.
func TestIsolatedZoneSeesItsOwnResolverFilesAndNodename(t *testing.T) {
	if err := fabric.IsolationSupported(); err != nil {
		t.Skip(err)
	}
	const network = 202
	fab, err := fabric.New(t.TempDir(), fabric.IsolatedUnderlay(network), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fab.Remove)
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
