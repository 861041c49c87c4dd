package e2e_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// In isolation mode each node is a network of its own and a pod reaches a
// pod on another node only through the route its node holds to that
// node's pod CIDR, as on illumos: a pod on node-1 reaches a server pod
// on node-2 by its pod IP; with node-1's route deleted (the sim's
// route(8), as an operator would) the request fails; the agent's
// reconciliation puts the route back and it works again.
//
// Remove `go a.programNodeRoutes(supCtx)` in internal/agent/agent.go to
// see it fail: no route, no request (in shared-loopback mode the request
// would pass without any route).
// crossNodeRouteInterval is long enough for a request to fail between a
// route's deletion and its repair.
const crossNodeRouteInterval = 5 * time.Second

func TestPodsOnDifferentNodesReachEachOtherThroughNodeRoutes(t *testing.T) {
	c := newIsolatedCluster(t, 2, "--node-route-interval", crossNodeRouteInterval.String())
	c.createPod(`{"metadata":{"name":"server"},"spec":{"nodeName":"node-2","terminationGracePeriodSeconds":1,
	  "containers":[{"name":"http","image":"base","command":["sh","-c","echo hello-from-node-2 > index.html && exec python3 -m http.server --bind $POD_IP 8080"],
	    "readinessProbe":{"httpGet":{"path":"/","port":8080},"periodSeconds":1}}]}}`)
	c.createPod(`{"metadata":{"name":"client"},"spec":{"nodeName":"node-1","terminationGracePeriodSeconds":1,
	  "containers":[{"name":"c","image":"base","command":["sleep","600"]}]}}`)
	server := c.waitPhase("server", model.PodRunning, true, 90*time.Second)
	c.waitPhase("client", model.PodRunning, false, 90*time.Second)
	if server.Spec.NodeName != "node-2" {
		t.Fatalf("server on %s", server.Spec.NodeName)
	}
	fetch := func() (string, error) {
		out, errOut, code := c.podExec(t, "/api/v1/namespaces/default/pods/client", nil, "python3", "-c",
			fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('http://%s:8080/index.html', timeout=2).read().decode().strip())", server.Status.PodIP))
		if code != 0 {
			return "", fmt.Errorf("exit %d: %s", code, lastLine(errOut))
		}
		return strings.TrimSpace(out), nil
	}
	// Node-1 learns node-2's pod CIDR within one route interval of
	// node-2's registration: the first fetch may come before.
	var out string
	var err error
	c.eventually(3*crossNodeRouteInterval, "the client on node-1 fetching from the server on node-2", func() bool {
		out, err = fetch()
		if err != nil || out != "hello-from-node-2" {
			t.Logf("fetch from node-2 (%s): %q, %v", server.Status.PodIP, out, err)
		}
		return err == nil && out == "hello-from-node-2"
	})

	var n1, n2 model.Node
	c.get("/api/v1/nodes/node-1", &n1)
	c.get("/api/v1/nodes/node-2", &n2)
	cidr, gw := netip.MustParsePrefix(n2.Spec.PodCIDR), netip.MustParseAddr(n2.InternalIP())
	if !netip.MustParsePrefix("10.0.0.0/8").Contains(gw) || netip.MustParseAddr(n1.InternalIP()) == gw {
		t.Fatalf("InternalIPs %s and %s: want the nodes' underlay addresses", n1.InternalIP(), gw)
	}
	// The operator deletes node-1's route to node-2's pods: the request
	// fails. Should the agent repair the route before the request is
	// over, delete it again.
	failed := false
	for attempt := 0; attempt < 5 && !failed; attempt++ {
		if out, code := c.simCmd(0, "route", "delete", "-net", cidr.String(), gw.String()); code != 0 {
			t.Fatalf("route delete: exit %d\n%s", code, out)
		}
		_, err := fetch()
		switch {
		case err != nil:
			failed = true
			t.Logf("without the route: %v", err)
		case !c.routesVia(0, cidr, gw):
			t.Fatal("the client reached node-2's pod with node-1's route to it deleted")
		}
	}
	if !failed {
		t.Fatal("the route came back before every request: cannot tell whether it is needed")
	}
	deleted := time.Now()
	c.eventually(3*crossNodeRouteInterval+10*time.Second, "the deleted route back and the request through", func() bool {
		out, err := fetch()
		return err == nil && out == "hello-from-node-2"
	})
	t.Logf("the request went through again %v after it failed", time.Since(deleted).Round(10*time.Millisecond))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
