package e2e_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// dnsQueryPy asks the DNS server argv[2] for argv[1]'s A records over UDP
// with nothing but python3's socket module, and prints them.
const dnsQueryPy = `import socket, struct, sys
name, ns = sys.argv[1], sys.argv[2]
q = struct.pack('>HHHHHH', 0x5a17, 0x0100, 1, 0, 0, 0) + b''.join(bytes([len(p)]) + p.encode() for p in name.split('.')) + b'\0' + struct.pack('>HH', 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.sendto(q, (ns, 53))
r = s.recv(4096)
i, out = len(q), []
for _ in range(struct.unpack('>H', r[6:8])[0]):
    if r[i] & 0xc0 == 0xc0:
        i += 2
    else:
        while r[i]:
            i += r[i] + 1
        i += 1
    t, _, _, n = struct.unpack('>HHIH', r[i:i+10])
    i += 10
    if t == 1:
        out.append(socket.inet_ntoa(r[i:i+n]))
    i += n
print(' '.join(out))
`

// In isolation mode a Service works as on a cluster of hosts: a pod on
// node-1 reaches a ClusterIP whose only backend is a pod on node-2 (node-1's
// kernel translates the ClusterIP to the backend by the agent's rdr rules,
// and routes it through node-1's route to node-2's pod CIDR; the backend
// sees the client's own address) and one whose backend is on node-1
// (through the hairpin map rule); with node-1's route to node-2's pods
// deleted the cross-node request fails, and works again once the agent has
// put the route back. The node's cluster DNS, on the pods' gateway,
// answers the service's name with its ClusterIP, and the pod resolves the
// short name through the resolv.conf the node wrote into its zone, which
// its mount namespace shows at /etc; a pod on node-2 is found by its
// hostname under a headless service named as its subdomain.
//
// Make syncKernelNAT (internal/sim/natkernel.go) return at once to see it
// fail: no rule is in force in the nodes' kernels. Remove the hairpin rule
// from servicenat.Rules to see the node-local service fail. Remove the
// bindZoneFile loop of setupZoneView (internal/sim/zonens.go) to see the
// lookup by short name fail: the zone reads the host's resolv.conf.
func TestServiceClusterIPAcrossNodesInIsolation(t *testing.T) {
	c := newIsolatedCluster(t, 2, "--node-route-interval", crossNodeRouteInterval.String())
	for _, s := range []struct{ name, node string }{{"web", "node-2"}, {"near", "node-1"}} {
		code, b := c.do("POST", "/api/v1/namespaces/default/services",
			fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"selector":{"app":%q},"ports":[{"name":"http","port":80,"targetPort":8080}]}}`, s.name, s.name))
		if code != http.StatusCreated {
			t.Fatalf("create service %s: %d %s", s.name, code, b)
		}
		c.createPod(fmt.Sprintf(`{"metadata":{"name":"%s-0","labels":{"app":%q}},"spec":{"nodeName":%q,"terminationGracePeriodSeconds":1,
		  "containers":[{"name":"http","image":"base","command":["sh","-c","echo %s-on-%s > index.html && exec python3 -m http.server --bind $POD_IP 8080"],
		    "readinessProbe":{"httpGet":{"path":"/","port":8080},"periodSeconds":1}}]}}`, s.name, s.name, s.node, s.name, s.node))
	}
	// A headless service and a pod on node-2 named in its domain by its
	// hostname and subdomain.
	if code, b := c.do("POST", "/api/v1/namespaces/default/services",
		`{"metadata":{"name":"db"},"spec":{"clusterIP":"None","selector":{"app":"db"},"ports":[{"port":5432}]}}`); code != http.StatusCreated {
		t.Fatalf("create headless service: %d %s", code, b)
	}
	c.createPod(`{"metadata":{"name":"db-1","labels":{"app":"db"}},"spec":{"nodeName":"node-2","hostname":"db-0","subdomain":"db","terminationGracePeriodSeconds":1,
	  "containers":[{"name":"app","image":"base","command":["sleep","600"]}]}}`)
	c.createPod(`{"metadata":{"name":"client"},"spec":{"nodeName":"node-1","hostname":"client-box","terminationGracePeriodSeconds":1,
	  "containers":[{"name":"c","image":"base","command":["sleep","600"],
	    "readinessProbe":{"exec":{"command":["grep","-q","zonewright","/etc/resolv.conf"]},"periodSeconds":1}}]}}`)
	c.waitPhase("web-0", model.PodRunning, true, 90*time.Second)
	c.waitPhase("near-0", model.PodRunning, true, 90*time.Second)
	// Its exec probe runs in the zone's namespaces: it reads the zone's
	// resolv.conf, which the node wrote.
	c.waitPhase("client", model.PodRunning, true, 90*time.Second)
	clusterIP := func(name string) string {
		var svc model.Service
		if code := c.get("/api/v1/namespaces/default/services/"+name, &svc); code != http.StatusOK || svc.Spec.ClusterIP == "" {
			t.Fatalf("service %s: %d, ClusterIP %q", name, code, svc.Spec.ClusterIP)
		}
		if netip.MustParseAddr(svc.Spec.ClusterIP).IsLoopback() {
			t.Fatalf("service %s has a loopback ClusterIP %s: pods' packets never reach one", name, svc.Spec.ClusterIP)
		}
		return svc.Spec.ClusterIP
	}
	web, near := clusterIP("web"), clusterIP("near")
	fetch := func(ip string) (string, error) {
		out, errOut, code := c.podExec(t, "/api/v1/namespaces/default/pods/client", nil, "python3", "-c",
			fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('http://%s/', timeout=2).read().decode().strip())", ip))
		if code != 0 {
			return "", fmt.Errorf("exit %d: %s", code, lastLine(errOut))
		}
		return strings.TrimSpace(out), nil
	}
	// The rules reach every node soon after the endpoints: allow for it.
	for ip, want := range map[string]string{web: "web-on-node-2", near: "near-on-node-1"} {
		var last string
		var lastErr error
		deadline := time.Now().Add(20 * time.Second)
		for {
			if last, lastErr = fetch(ip); lastErr == nil && last == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("client on node-1 through ClusterIP %s: %q, %v; want %q", ip, last, lastErr, want)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	// The backend sees the client pod's own address: node-1's kernel
	// translated only the destination (a forwarder shows its node's).
	client, _ := c.pod("client")
	c.eventually(10*time.Second, "web-0's log naming the client pod's address", func() bool {
		_, b := c.do("GET", "/api/v1/namespaces/default/pods/web-0/log", nil)
		return client.Status.PodIP != "" && strings.Contains(string(b), client.Status.PodIP+" - - [")
	})

	// The node's cluster DNS on the pods' gateway answers the name.
	var n1, n2 model.Node
	c.get("/api/v1/nodes/node-1", &n1)
	c.get("/api/v1/nodes/node-2", &n2)
	gateway := model.PodGateway(netip.MustParsePrefix(n1.Spec.PodCIDR)).String()
	out, errOut, code := c.podExec(t, "/api/v1/namespaces/default/pods/client", nil, "python3", "-c", dnsQueryPy, "web.default.svc.cluster.local", gateway)
	if code != 0 || strings.TrimSpace(out) != web {
		t.Fatalf("the node's DNS at %s for web.default.svc.cluster.local: exit %d, %q %s; want %s", gateway, code, out, lastLine(errOut), web)
	}

	// Inside the zone, its own resolver configuration (the node's DNS),
	// not the host's, finds the service by its short name; and the zone's
	// kernel hostname (uname(2), not the simulated hostname(1)) is the
	// pod's.
	inZone := func(what string, argv ...string) string {
		t.Helper()
		out, errOut, code := c.podExec(t, "/api/v1/namespaces/default/pods/client", nil, argv...)
		if code != 0 {
			t.Fatalf("%s in the client: exit %d: %s", what, code, lastLine(errOut))
		}
		return strings.TrimSpace(out)
	}
	if got := inZone("the lookup of web", "python3", "-c", "import socket; print(socket.gethostbyname('web'))"); got != web {
		t.Fatalf("socket.gethostbyname('web') in the client: %q; want the ClusterIP %s", got, web)
	}
	// The pod on node-2 by its per-pod name, through the client's own
	// resolver (search list), from node-1.
	db := c.waitPhase("db-1", model.PodRunning, true, 90*time.Second)
	c.eventually(10*time.Second, "db-0.db to resolve in the client to db-1's address", func() bool {
		out, _, code := c.podExec(t, "/api/v1/namespaces/default/pods/client", nil, "python3", "-c", "import socket; print(socket.gethostbyname('db-0.db'))")
		return code == 0 && strings.TrimSpace(out) == db.Status.PodIP
	})
	if got := inZone("the hostname", "python3", "-c", "import socket; print(socket.gethostname())"); got != "client-box" {
		t.Fatalf("the client's kernel hostname: %q; want client-box", got)
	}
	if out, errOut, code := c.podExec(t, "/api/v1/namespaces/default/pods/client", strings.NewReader("through nsenter\n"), "cat"); code != 0 || out != "through nsenter\n" {
		t.Fatalf("exec with stdin in the client: exit %d, %q %s", code, out, lastLine(errOut))
	}
	if got := inZone("cat /etc/resolv.conf", "cat", "/etc/resolv.conf"); !strings.Contains(got, "nameserver "+gateway+"\n") {
		t.Fatalf("the client's /etc/resolv.conf names no nameserver %s:\n%s", gateway, got)
	}

	// Without node-1's route to node-2's pods the ClusterIP leads nowhere.
	cidr, gw := netip.MustParsePrefix(n2.Spec.PodCIDR), netip.MustParseAddr(n2.InternalIP())
	failed := false
	for attempt := 0; attempt < 5 && !failed; attempt++ {
		if out, code := c.simCmd(0, "route", "delete", "-net", cidr.String(), gw.String()); code != 0 {
			t.Fatalf("route delete: exit %d\n%s", code, out)
		}
		_, err := fetch(web)
		switch {
		case err != nil:
			failed = true
			t.Logf("through %s without the route: %v", web, err)
		case !c.routesVia(0, cidr, gw):
			t.Fatal("the client reached node-2's pod through the ClusterIP with node-1's route to it deleted")
		}
	}
	if !failed {
		t.Fatal("the route came back before every request: cannot tell whether it is needed")
	}
	if out, err := fetch(near); err != nil || out != "near-on-node-1" {
		t.Fatalf("the node-local service without the route to node-2: %q, %v", out, err)
	}
	c.eventually(3*crossNodeRouteInterval+10*time.Second, "the route back and the ClusterIP through", func() bool {
		out, err := fetch(web)
		return err == nil && out == "web-on-node-2"
	})
}
