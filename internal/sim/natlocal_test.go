package sim_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/simtest"
)

// In isolation mode an rdr rule's external address (a ClusterIP) is
// served in the node's namespace, whichever namespace ran ipnat: natd
// runs there and gives the address a local route, so a zone's packets to
// it, sent to its gateway, reach natd, which forwards them to the target
// through the node. The route goes with the rule, and stop-all leaves
// neither route nor natd.
//
// Remove the `syncLocalRoutes(want)` call in (*natd).converge
// (internal/sim/natd.go) to see it fail: the zone's connection times out.
func TestIsolatedNodeServesRdrAddressesToItsZones(t *testing.T) {
	if err := fabric.IsolationSupported(); err != nil {
		t.Skip(err)
	}
	const network = 203
	fab, err := fabric.New(t.TempDir(), fabric.IsolatedUnderlay(network), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fab.Remove)
	server := `exec python3 -c "import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', 8080)); s.listen(8)
while True:
    c, _ = s.accept(); c.sendall(b'hello from ' + socket.gethostname().encode() + b'\n'); c.close()"`
	h, ns := isolatedNode(t, fab, network, 1, server)
	rule := fmt.Sprintf("rdr zwgw0 10.96.0.5/32 port 80 -> 10.%d.1.2 port 8080 tcp\n", network)
	expect(t, h.runIn(rule, "ipnat", "-f", "-"), 0, "", "")

	localRoutes := func() string {
		out, err := inNS(ns, "ip", "route", "show", "table", "local", "proto", "77")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return strings.TrimSpace(out)
	}
	if got := localRoutes(); !strings.Contains(got, "10.96.0.5") {
		t.Fatalf("no local route for the rule's address in the node's namespace: %q", got)
	}
	pid, _ := os.ReadFile(filepath.Join(h.root, "run", "natd.pid"))
	have, err1 := os.Stat(fmt.Sprintf("/proc/%s/ns/net", strings.TrimSpace(string(pid))))
	want, err2 := os.Stat(ns)
	if err1 != nil || err2 != nil || !os.SameFile(have, want) {
		t.Fatalf("natd (pid %s) is not in the node's namespace (%v, %v)", strings.TrimSpace(string(pid)), err1, err2)
	}
	connect := func() result {
		return h.run("zlogin", "pod", "python3", "-c",
			`"import socket; print(socket.create_connection(('10.96.0.5', 80), timeout=2).recv(100).decode().strip())"`)
	}
	waitFor(t, 10*time.Second, "the zone reaching its own server through the rule's address", func() bool {
		r := connect()
		if r.code != 0 {
			t.Log(r)
		}
		return r.code == 0 && strings.HasPrefix(r.stdout, "hello from")
	})

	expect(t, h.runIn(rule, "ipnat", "-rf", "-"), 0, "", "")
	if got := localRoutes(); got != "" {
		t.Fatalf("the removed rule's local route stays: %q", got)
	}
	if r := connect(); r.code == 0 {
		t.Fatalf("the zone reached the removed rule's address: %s", r)
	}

	expect(t, h.runIn(rule, "ipnat", "-f", "-"), 0, "", "")
	if out, err := exec.Command(simtest.Bin(t), "stop-all", "--root", h.root).CombinedOutput(); err != nil {
		t.Fatalf("stop-all: %v\n%s", err, out)
	}
	if got := localRoutes(); got != "" {
		t.Errorf("stop-all left the local route: %q", got)
	}
	if out, _ := exec.Command("pgrep", "-f", "natd "+h.root).Output(); len(out) > 0 {
		t.Errorf("stop-all left natd: %s", out)
	}
}
