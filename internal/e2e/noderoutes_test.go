package e2e_test

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nodeagent "github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/model"
)

// nodeRouteInterval is the agents' --node-route-interval here: repairs are
// awaited for a few of them.
const nodeRouteInterval = time.Second

// Each node routes the other's pod CIDR to the other's address in its
// global zone, with forwarding on for the pods' gateway link; a route an
// operator deletes (the sim's route(8), as on a host) and forwarding an
// operator turns off come back within the agents' interval; a node
// removed from the cluster loses its route on the others. The simulator
// shares one loopback, so this checks the routing tables, not packets.
//
// Remove `go a.programNodeRoutes(supCtx)` in internal/agent/agent.go to
// see it fail.
func TestNodesRouteEachOthersPodCIDRs(t *testing.T) {
	c := newCluster(t, 2, "--node-route-interval", nodeRouteInterval.String())
	type peer struct {
		name string
		cidr netip.Prefix
		ip   netip.Addr
	}
	peers := make([]peer, 2)
	for i := range peers {
		var n model.Node
		if code := c.get("/api/v1/nodes/"+c.nodes.Nodes[i].Name, &n); code != 200 {
			t.Fatalf("node %d: %d", i, code)
		}
		cidr, err1 := netip.ParsePrefix(n.Spec.PodCIDR)
		ip, err2 := netip.ParseAddr(n.InternalIP())
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("node %s: pod CIDR %q, InternalIP %q: %v", n.Metadata.Name, n.Spec.PodCIDR, n.InternalIP(), err)
		}
		peers[i] = peer{n.Metadata.Name, cidr, ip}
	}

	for i, other := range []int{1, 0} {
		p := peers[other]
		c.eventually(15*time.Second, "node "+peers[i].name+" routes "+p.name+"'s pod CIDR "+p.cidr.String()+" via "+p.ip.String(), func() bool {
			return c.routesVia(i, p.cidr, p.ip)
		})
		if out, _ := c.simCmd(i, "route", "-p", "show"); !strings.Contains(out, "add -net "+p.cidr.String()+" "+p.ip.String()+"\n") {
			t.Errorf("node %s: the route to %s is not persistent:\n%s", peers[i].name, p.cidr, out)
		}
		if c.routesVia(i, peers[i].cidr, p.ip) {
			t.Errorf("node %s routes its own pod CIDR away", peers[i].name)
		}
		if v, _ := c.simCmd(i, "ipadm", "show-ifprop", "-c", "-o", "current", "-p", "forwarding", "-m", "ipv4", nodeagent.GatewayLink); v != "on\n" {
			t.Errorf("node %s: IPv4 forwarding on %s is %q", peers[i].name, nodeagent.GatewayLink, v)
		}
	}

	// An operator deletes node 0's route from the kernel's table, and
	// turns forwarding off; both come back within the interval.
	p := peers[1]
	if out, code := c.simCmd(0, "route", "delete", "-net", p.cidr.String(), p.ip.String()); code != 0 {
		t.Fatalf("route delete: exit %d\n%s", code, out)
	}
	if out, code := c.simCmd(0, "ipadm", "set-ifprop", "-p", "forwarding=off", "-m", "ipv4", nodeagent.GatewayLink); code != 0 {
		t.Fatalf("ipadm set-ifprop: exit %d\n%s", code, out)
	}
	deleted := time.Now()
	c.eventually(4*nodeRouteInterval, "the deleted route back", func() bool { return c.routesVia(0, p.cidr, p.ip) })
	t.Logf("the deleted route came back after %v", time.Since(deleted).Round(10*time.Millisecond))
	c.eventually(4*nodeRouteInterval, "forwarding back on", func() bool {
		v, _ := c.simCmd(0, "ipadm", "show-ifprop", "-c", "-o", "current", "-p", "forwarding", "-m", "ipv4", nodeagent.GatewayLink)
		return v == "on\n"
	})

	// Node 1 leaves the cluster: its agent stops, its Node is deleted,
	// and node 0 drops the route to its pods, persistent copy too.
	c.nodes.Terminate(1)
	if code, body := c.do("DELETE", "/api/v1/nodes/"+p.name, nil); code != 200 {
		t.Fatalf("delete node %s: %d %s", p.name, code, body)
	}
	deleted = time.Now()
	c.eventually(15*time.Second, "node "+peers[0].name+"'s route to the deleted node gone", func() bool {
		out, _ := c.simCmd(0, "route", "-p", "show")
		return !c.routesVia(0, p.cidr, p.ip) && !strings.Contains(out, p.cidr.String())
	})
	t.Logf("the deleted node's route went after %v", time.Since(deleted).Round(10*time.Millisecond))
}

// simCmd runs an illumos command on node i as an operator would, from
// the node's command directory; it returns stdout and the exit status.
func (c *cluster) simCmd(node int, name string, args ...string) (string, int) {
	c.t.Helper()
	cmd := exec.Command(filepath.Join(c.nodes.Nodes[node].BinDir, name), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		c.t.Fatalf("%s %v: %v", name, args, err)
	}
	if errb.Len() > 0 {
		c.t.Logf("%s %v: %s", name, args, errb.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// routesVia reports whether node i's global zone sends dest's traffic to
// gw: `route -n get` of an address in dest answers a route to dest
// itself through gw.
func (c *cluster) routesVia(node int, dest netip.Prefix, gw netip.Addr) bool {
	c.t.Helper()
	probe := dest.Addr().Next().Next()
	out, code := c.simCmd(node, "route", "-n", "get", probe.String())
	if code != 0 {
		return false
	}
	var gotDest, gotMask, gotGW string
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "destination":
			gotDest = strings.TrimSpace(v)
		case "mask":
			gotMask = strings.TrimSpace(v)
		case "gateway":
			gotGW = strings.TrimSpace(v)
		}
	}
	// route(8) prints the network and its mask apart; the simulator the
	// network with its length.
	m := net.CIDRMask(dest.Bits(), 32)
	mask := net.IPv4(m[0], m[1], m[2], m[3]).String()
	sameDest := gotDest == dest.String() || (gotDest == dest.Addr().String() && gotMask == mask)
	return sameDest && gotGW == gw.String()
}
