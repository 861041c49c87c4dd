package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/model"
)

// The service network converges whatever stops mid-change: an agent
// killed while endpoints change catches up when it returns; a node whose
// rules are wiped while the control plane is down restores them from the
// snapshot it kept; a control plane stopped and started again carries on,
// and a service deleted afterwards leaves no rule and no address behind.
func TestServiceNetworkConvergesAcrossCrashes(t *testing.T) {
	t.Parallel()
	cidr := fmt.Sprintf("127.95.%d.0/24", os.Getpid()%250+1)
	c := newClusterWith(t, 2, func(cfg *controlplane.Config) { cfg.ServiceCIDR = cidr })
	service := func(name string) model.Service {
		code, b := c.do("POST", "/api/v1/namespaces/default/services",
			fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"selector":{"app":"echo"},"ports":[{"port":80,"targetPort":8080}]}}`, name))
		if code != http.StatusCreated {
			t.Fatalf("create service %s: %d %s", name, code, b)
		}
		var svc model.Service
		_ = json.Unmarshal(b, &svc)
		return svc
	}
	echo := service("echo")
	ips := map[string]string{}
	for _, name := range []string{"echo-1", "echo-2"} {
		c.createPod(fmt.Sprintf(`{"metadata":{"name":%q,"labels":{"app":"echo"}},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"]}]}}`, name))
	}
	for _, name := range []string{"echo-1", "echo-2"} {
		ips[name] = c.waitPhase(name, model.PodRunning, true, 90*time.Second).Status.PodIP
	}
	// rulesAre waits until node i's rules send the ClusterIPs given to
	// exactly the pods given.
	rulesAre := func(i int, within time.Duration, want map[string][]string) {
		t.Helper()
		c.eventually(within, fmt.Sprintf("node %d's rules to be %v", i, want), func() bool {
			rules := c.ipnatRules(i)
			n := 0
			for clusterIP, pods := range want {
				for _, p := range pods {
					if !hasRuleBetween(rules, clusterIP, ips[p]) {
						return false
					}
					n++
				}
			}
			return len(rules) == n
		})
	}
	both := map[string][]string{echo.Spec.ClusterIP: {"echo-1", "echo-2"}}
	rulesAre(0, 10*time.Second, both)
	rulesAre(1, 10*time.Second, both)

	// Node 0's agent dies; meanwhile echo-1 goes and a second service comes.
	c.nodes.Kill(0)
	c.do("DELETE", "/api/v1/namespaces/default/pods/echo-1?gracePeriodSeconds=0", nil)
	other := service("other")
	now := map[string][]string{echo.Spec.ClusterIP: {"echo-2"}, other.Spec.ClusterIP: {"echo-2"}}
	rulesAre(1, 10*time.Second, now)
	if err := c.nodes.Restart(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	rulesAre(0, 10*time.Second, now)

	// The control plane stops; node 1's rules are wiped behind its agent's
	// back and come back from the snapshot the agent kept.
	start := c.stopControlPlane()
	if out, err := exec.Command(filepath.Join(c.nodes.Nodes[1].BinDir, "ipnat"), "-CF").CombinedOutput(); err != nil {
		t.Fatalf("ipnat -CF: %v\n%s", err, out)
	}
	rulesAre(1, 5*time.Second, now)
	start()

	// Started again, it carries on: a deleted service leaves every node,
	// and its address is free again.
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/services/other", nil); code != http.StatusOK {
		t.Fatalf("delete service other: %d %s", code, b)
	}
	last := map[string][]string{echo.Spec.ClusterIP: {"echo-2"}}
	rulesAre(0, 10*time.Second, last)
	rulesAre(1, 10*time.Second, last)
	code, b := c.do("POST", "/api/v1/namespaces/default/services",
		fmt.Sprintf(`{"metadata":{"name":"again"},"spec":{"clusterIP":%q,"selector":{"app":"echo"},"ports":[{"port":80}]}}`, other.Spec.ClusterIP))
	if code != http.StatusCreated {
		t.Fatalf("the deleted service's address %s was not freed: %d %s", other.Spec.ClusterIP, code, b)
	}
}

// hasRuleBetween reports an rdr rule from clusterIP to ip.
func hasRuleBetween(rules []string, clusterIP, ip string) bool {
	for _, r := range rules {
		if strings.Contains(r, " "+clusterIP+"/32 ") && strings.Contains(r, " -> "+ip+" port ") {
			return true
		}
	}
	return false
}
