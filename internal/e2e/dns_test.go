package e2e_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/clusterdns"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
)

// lookup asks the control plane's cluster DNS for name's A records over
// UDP and returns the rcode and the addresses.
func (c *cluster) lookup(name string) (int, []string) {
	c.t.Helper()
	return c.lookupAt(c.cp.DNSAddr(), name)
}

// lookupAt asks the DNS server at addr for name's A records over UDP.
func (c *cluster) lookupAt(addr, name string) (int, []string) {
	c.t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := new(dns.Client).Exchange(q, addr)
	if err != nil {
		c.t.Fatalf("query %s: %v", name, err)
	}
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return r.Rcode, ips
}

// The cluster DNS that serve runs answers from what the API holds: a new
// service resolves within a second of its creation, a headless service to
// its ready pod and to nothing once the pod goes, and names outside the
// cluster are refused when no upstream is configured.
func TestClusterDNSFollowsServicesAndPods(t *testing.T) {
	t.Parallel()
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) {
		cfg.DNS = clusterdns.Config{Addr: "127.0.0.1:0", Upstreams: []string{}}
	})
	code, b := c.do("POST", "/api/v1/namespaces/default/services", `{"metadata":{"name":"web"},"spec":{"selector":{"app":"web"},"ports":[{"port":80}]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create service: %d %s", code, b)
	}
	created := time.Now()
	var svc model.Service
	_ = json.Unmarshal(b, &svc)
	c.eventually(time.Second, "web.default.svc.cluster.local to resolve", func() bool {
		rcode, ips := c.lookup("WEB.default.svc.cluster.local")
		return rcode == dns.RcodeSuccess && len(ips) == 1 && ips[0] == svc.Spec.ClusterIP
	})
	t.Logf("the new service resolved %s after its creation", time.Since(created).Round(time.Millisecond))

	if code, b := c.do("POST", "/api/v1/namespaces/default/services",
		`{"metadata":{"name":"db"},"spec":{"clusterIP":"None","selector":{"app":"db"},"ports":[{"port":5432}]}}`); code != http.StatusCreated {
		t.Fatalf("create headless service: %d %s", code, b)
	}
	c.eventually(time.Second, "the headless service without endpoints to be NXDOMAIN", func() bool {
		rcode, _ := c.lookup("db.default.svc.cluster.local")
		return rcode == dns.RcodeNameError
	})
	c.createPod(`{"metadata":{"name":"db-1","labels":{"app":"db"}},"spec":{"hostname":"db-0","subdomain":"db",
	  "containers":[{"name":"app","image":"base","command":["sleep","3600"]}]}}`)
	p := c.waitPhase("db-1", model.PodRunning, true, 90*time.Second)
	c.eventually(2*time.Second, "the headless service to resolve to its ready pod", func() bool {
		rcode, ips := c.lookup("db.default.svc.cluster.local")
		return rcode == dns.RcodeSuccess && len(ips) == 1 && ips[0] == p.Status.PodIP
	})
	// Its hostname and subdomain name the pod in the service's domain,
	// and the zone took the hostname as its node name.
	if rcode, ips := c.lookup("db-0.db.default.svc.cluster.local"); rcode != dns.RcodeSuccess || len(ips) != 1 || ips[0] != p.Status.PodIP {
		t.Fatalf("db-0.db.default.svc.cluster.local: %s %v, want %s", dns.RcodeToString[rcode], ips, p.Status.PodIP)
	}
	zone := names.ZoneName(p.Metadata.Namespace, p.Metadata.Name, p.Metadata.UID)
	bin := c.nodes.Nodes[c.nodeIndex(p.Spec.NodeName)].BinDir
	if out, err := exec.Command(filepath.Join(bin, "zlogin"), zone, "hostname").CombinedOutput(); err != nil || string(out) != "db-0\n" {
		t.Fatalf("the zone's node name: %q %v, want the pod's hostname db-0", out, err)
	}

	// The pod's zone was given a resolver that is its node's: short names
	// resolve through the search list, at the address the file names.
	nameserver, search := zoneResolver(t, c, p)
	if want := []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}; strings.Join(search, " ") != strings.Join(want, " ") {
		t.Fatalf("the zone's search list is %q, want %q", search, want)
	}
	if gw := strings.TrimSuffix(c.podCIDR(0), "0/24") + "1"; nameserver != gw {
		t.Fatalf("the zone's nameserver is %s, want its node's pod gateway %s", nameserver, gw)
	}
	podDNS := net.JoinHostPort(nameserver, "53")
	if rcode, ips := c.lookupAt(podDNS, "web."+search[0]); rcode != dns.RcodeSuccess || len(ips) != 1 || ips[0] != svc.Spec.ClusterIP {
		t.Fatalf("web via the pod's resolver: %s %v, want %s", dns.RcodeToString[rcode], ips, svc.Spec.ClusterIP)
	}
	if rcode, ips := c.lookupAt(podDNS, "db.default."+search[1]); rcode != dns.RcodeSuccess || len(ips) != 1 || ips[0] != p.Status.PodIP {
		t.Fatalf("db.default via the pod's resolver: %s %v, want %s", dns.RcodeToString[rcode], ips, p.Status.PodIP)
	}

	c.do("DELETE", "/api/v1/namespaces/default/pods/db-1?gracePeriodSeconds=0", nil)
	c.waitGone("db-1", 60*time.Second)
	c.eventually(time.Second, "the deleted pod out of DNS", func() bool {
		rcode, _ := c.lookup("db.default.svc.cluster.local")
		return rcode == dns.RcodeNameError
	})
	c.eventually(time.Second, "the deleted pod out of the node's DNS", func() bool {
		rcode, _ := c.lookupAt(podDNS, "db.default.svc.cluster.local")
		return rcode == dns.RcodeNameError
	})
	if rcode, _ := c.lookup("example.org"); rcode != dns.RcodeRefused {
		t.Fatalf("a name outside the cluster with no upstream answered %s, want REFUSED", dns.RcodeToString[rcode])
	}
}

// zoneResolver reads the resolv.conf the pod's node wrote into its zone
// (the simulator keeps the zone root under the node's state root) and
// returns its nameserver and search list, checking ndots.
func zoneResolver(t *testing.T, c *cluster, p model.Pod) (string, []string) {
	t.Helper()
	n := c.nodes.Nodes[c.nodeIndex(p.Spec.NodeName)]
	zone := names.ZoneName(p.Metadata.Namespace, p.Metadata.Name, p.Metadata.UID)
	b, err := os.ReadFile(filepath.Join(n.Root, "fs", agent.DefaultZonesPath, zone, "root/etc/resolv.conf"))
	if err != nil {
		t.Fatalf("the zone's resolv.conf: %v", err)
	}
	var nameserver string
	var search []string
	ndots := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "nameserver":
			nameserver = f[1]
		case len(f) > 1 && f[0] == "search":
			search = f[1:]
		case len(f) == 2 && f[0] == "options" && f[1] == "ndots:5":
			ndots = true
		}
	}
	if nameserver == "" || len(search) < 2 || !ndots {
		t.Fatalf("the zone's resolv.conf lacks a nameserver, search list or ndots:5:\n%s", b)
	}
	return nameserver, search
}
