package sim_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/sim"
	"github.com/zonewright/zonewright/internal/simtest"
)

// isolatedNode is a simulated node in a network namespace of its own on
// fab, with its underlay address on net0, an etherstub whose gateway
// VNIC holds 10.<net>.<i>.1/24 forwarding, and a running zone on a VNIC
// over it at 10.<net>.<i>.2 whose service is start.
func isolatedNode(t testing.TB, fab *fabric.Fabric, network, i int, start string) (*simHost, string) {
	t.Helper()
	h := newNamedHost(t, t.TempDir(), fmt.Sprintf("node%d", i))
	nsPath, underlay, err := fab.AddNode(i)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.root, sim.NetnsFile), []byte(nsPath+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gw := fmt.Sprintf("10.%d.%d.1", network, i)
	h.must("ipadm", "create-if", "net0")
	h.must("ipadm", "create-addr", "-T", "static", "-a", underlay.String(), "net0/v4")
	h.must("dladm", "create-etherstub", "zwstub0")
	h.must("dladm", "create-vnic", "-l", "zwstub0", "zwgw0")
	h.must("ipadm", "create-if", "zwgw0")
	h.must("ipadm", "create-addr", "-T", "static", "-a", gw+"/24", "zwgw0/v4")
	for _, ifc := range []string{"zwgw0", "net0"} {
		h.must("ipadm", "set-ifprop", "-p", "forwarding=on", "-m", "ipv4", ifc)
	}
	h.must("dladm", "create-vnic", "-l", "zwstub0", "pod0")
	// The pod's address and default route as the agent gives them:
	// allowed-address and defrouter, put in place at boot.
	h.zoneSetup("pod", "running", "add net; set physical=pod0; set allowed-address="+fmt.Sprintf("10.%d.%d.2/24", network, i)+"; set defrouter="+gw+"; end")
	expect(t, h.runIn(manifest("server", start, "", true), "zlogin", "pod", "svccfg", "import", "/dev/stdin"), 0, "", "")
	return h, nsPath
}

// isolatedFabric is a fabric for isolated nodes on 10.<network>, removed
// when the test ends; the test skips where isolation mode cannot run.
func isolatedFabric(t testing.TB, network int) *fabric.Fabric {
	t.Helper()
	if err := fabric.DirectIsolationSupported(); err != nil {
		t.Skip(err)
	}
	fab, err := fabric.New(t.TempDir(), fabric.IsolatedUnderlay(network), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fab.Remove)
	return fab
}

// inNS runs a command inside the namespace at path.
func inNS(path string, args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"--net=" + path, "--"}, args...)...).CombinedOutput()
	return string(out), err
}

// Two simulated nodes in isolation mode are two networks joined by a
// fabric: a zone on node 1 reaches a zone on node 2 only while node 1
// routes node 2's pod network to node 2's underlay address (and node 2
// routes back), exactly as on illumos; and halting, deleting and stop-all
// leave nothing behind. In shared mode the connection would succeed
// without any route: delete the `route replace` line of stackPlan
// (internal/sim/netkernel.go) to see the positive half fail.
func TestIsolatedNodesReachEachOthersZonesOnlyThroughRoutes(t *testing.T) {
	if err := fabric.DirectIsolationSupported(); err != nil {
		t.Skip(err)
	}
	const network = 201
	dir := t.TempDir()
	fab, err := fabric.New(dir, fabric.IsolatedUnderlay(network), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fab.Remove)
	server := `exec python3 -c "import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('0.0.0.0', 8080)); s.listen(8)
while True:
    c, _ = s.accept(); c.sendall(b'hello from ' + socket.gethostname().encode() + b'\n'); c.close()"`
	h1, ns1 := isolatedNode(t, fab, network, 1, "exec sleep 1000")
	h2, ns2 := isolatedNode(t, fab, network, 2, server)

	target := fmt.Sprintf("10.%d.2.2", network)
	connect := func() error {
		r := h1.run("zlogin", "pod", "python3", "-c",
			fmt.Sprintf(`"import socket; print(socket.create_connection(('%s', 8080), timeout=2).recv(100).decode())"`, target))
		if r.code != 0 {
			return fmt.Errorf("%s", r)
		}
		return nil
	}
	// Node 2's server is up (from its own namespace, through its bridge).
	waitFor(t, 10*time.Second, "node 2's server answers its node", func() bool {
		out, err := inNS(ns2, "python3", "-c", fmt.Sprintf("import socket; socket.create_connection(('%s', 8080), timeout=1)", target))
		if err != nil {
			t.Log(out)
		}
		return err == nil
	})
	if err := connect(); err == nil {
		t.Fatal("node 1's zone reached node 2's zone with no route between the nodes")
	}
	h1.must("route", "-p", "add", "-net", fmt.Sprintf("10.%d.2.0/24", network), fmt.Sprintf("10.%d.255.2", network))
	h2.must("route", "-p", "add", "-net", fmt.Sprintf("10.%d.1.0/24", network), fmt.Sprintf("10.%d.255.1", network))
	if err := connect(); err != nil {
		out, _ := inNS(ns1, "ip", "route")
		t.Fatalf("node 1's zone cannot reach node 2's zone through the routes: %v\nnode 1's routes:\n%s", err, out)
	}
	// A zone's own ipadm and route act in its namespace, not the node's.
	zoneNS := ""
	for _, z := range h1.state().Zones {
		if z.Name == "pod" {
			zoneNS = fmt.Sprintf("/proc/%d/ns/net", z.SupervisorPID)
		}
	}
	extra := fmt.Sprintf("10.%d.250.0/24", network)
	h1.must("zlogin", "pod", "route", "add", "-net", extra, fmt.Sprintf("10.%d.1.1", network))
	h1.must("zlogin", "pod", "ipadm", "create-addr", "-T", "static", "-a", fmt.Sprintf("10.%d.1.3/24", network), "pod0/extra")
	zoneOut, _ := inNS(zoneNS, "sh", "-c", "ip route; ip -4 -o addr")
	nodeOut, _ := inNS(ns1, "sh", "-c", "ip route; ip -4 -o addr")
	if !strings.Contains(zoneOut, extra+" via") || !strings.Contains(zoneOut, fmt.Sprintf("10.%d.1.3/24", network)) ||
		strings.Contains(nodeOut, extra) || strings.Contains(nodeOut, fmt.Sprintf("10.%d.1.3/", network)) {
		t.Errorf("the zone's route and address: zone\n%s\nnode\n%s", zoneOut, nodeOut)
	}
	h1.must("zlogin", "pod", "route", "delete", "-net", extra, fmt.Sprintf("10.%d.1.1", network))
	if out, _ := inNS(zoneNS, "ip", "route"); strings.Contains(out, extra) {
		t.Errorf("the zone's deleted route is still in its namespace:\n%s", out)
	}

	// An operator deletes node 1's route: the request fails again.
	h1.must("route", "delete", "-net", fmt.Sprintf("10.%d.2.0/24", network), fmt.Sprintf("10.%d.255.2", network))
	if err := connect(); err == nil {
		t.Fatal("node 1's zone reached node 2's zone after the route was deleted")
	}
	// Nothing outside the namespaces reaches a zone: this host has no
	// route to the pods (whatever answers there is not the zone).
	if c, err := net.DialTimeout("tcp", target+":8080", time.Second); err == nil {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if strings.Contains(string(b), "hello from") {
			t.Fatal("the host reached a zone's address")
		}
	}

	// Halting the zone ends its namespace and its link; deleting the VNIC
	// and stop-all remove the node's links.
	h1.must("zoneadm", "-z", "pod", "halt")
	h1.must("dladm", "delete-vnic", "pod0")
	if out, _ := inNS(ns1, "ip", "-o", "link"); strings.Contains(out, "pod0") {
		t.Errorf("node 1 keeps the deleted VNIC's link:\n%s", out)
	}
	for _, x := range []struct {
		h  *simHost
		ns string
	}{{h1, ns1}, {h2, ns2}} {
		if out, err := exec.Command(simtest.Bin(t), "stop-all", "--root", x.h.root).CombinedOutput(); err != nil {
			t.Fatalf("stop-all: %v\n%s", err, out)
		}
		out, err := inNS(x.ns, "ip", "-o", "link")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if !strings.Contains(l, " lo:") && !strings.Contains(l, " net0@") {
				t.Errorf("left in the node's namespace after stop-all: %s", l)
			}
		}
	}
}
