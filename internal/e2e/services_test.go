package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/servicenet"
)

// endpointsOf is the ready and not-ready addresses of a service's
// Endpoints, as "ip:port" lists.
func (c *cluster) endpointsOf(name string) (ready, notReady []string) {
	c.t.Helper()
	var ep model.Endpoints
	if c.get("/api/v1/namespaces/default/endpoints/"+name, &ep) != http.StatusOK {
		return nil, nil
	}
	for _, s := range ep.Subsets {
		for _, p := range s.Ports {
			for _, a := range s.Addresses {
				ready = append(ready, fmt.Sprintf("%s:%d", a.IP, p.Port))
			}
			for _, a := range s.NotReadyAddresses {
				notReady = append(notReady, fmt.Sprintf("%s:%d", a.IP, p.Port))
			}
		}
	}
	return ready, notReady
}

// A service's Endpoints and the service network snapshot follow its pod
// through the real lifecycle: not ready, Ready (within a second of the
// pod's condition), deleted; the named targetPort resolves on the pod.
func TestServiceEndpointsFollowTheirPod(t *testing.T) {
	c := newCluster(t, 1)
	code, b := c.do("POST", "/api/v1/namespaces/default/services",
		`{"metadata":{"name":"web"},"spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80,"targetPort":"http"}]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create service: %d %s", code, b)
	}
	var svc model.Service
	_ = json.Unmarshal(b, &svc)
	if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !netip.MustParsePrefix("10.96.0.0/16").Contains(ip) {
		t.Fatalf("clusterIP %q not from the default service CIDR", svc.Spec.ClusterIP)
	}
	c.createPod(`{"metadata":{"name":"web-1","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"],
	  "ports":[{"name":"http","containerPort":8080}],
	  "readinessProbe":{"exec":{"command":["test","-e","ready"]},"periodSeconds":1,"failureThreshold":1}}]}}`)
	p := c.waitPhase("web-1", model.PodRunning, false, 90*time.Second)
	want := p.Status.PodIP + ":8080"
	c.eventually(5*time.Second, "the running, not-ready pod in notReadyAddresses", func() bool {
		ready, notReady := c.endpointsOf("web")
		return len(ready) == 0 && len(notReady) == 1 && notReady[0] == want
	})

	// Ready: the Endpoints follow within a second of the pod's condition.
	c.zoneRun(p, "touch", "ready")
	var podAt, epAt time.Time
	deadline := time.Now().Add(30 * time.Second)
	for (podAt.IsZero() || epAt.IsZero()) && time.Now().Before(deadline) {
		if cur, ok := c.pod("web-1"); ok && podAt.IsZero() && podReady(cur) {
			podAt = time.Now()
		}
		if ready, _ := c.endpointsOf("web"); epAt.IsZero() && len(ready) == 1 && ready[0] == want {
			epAt = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if podAt.IsZero() || epAt.IsZero() {
		t.Fatalf("pod Ready seen %v, endpoints ready seen %v", podAt, epAt)
	}
	if lag := epAt.Sub(podAt); lag > time.Second {
		t.Fatalf("endpoints followed the pod's Ready after %s; want within 1s", lag)
	}

	// The snapshot nodes and DNS read carries it.
	var snap servicenet.Snapshot
	c.eventually(5*time.Second, "the ready pod in the service network snapshot", func() bool {
		if c.get("/api/v1/servicenet", &snap) != http.StatusOK {
			return false
		}
		for _, s := range snap.Services {
			if s.Name == "web" && s.ClusterIP == svc.Spec.ClusterIP && len(s.Endpoints) == 1 &&
				s.Endpoints[0].IP == p.Status.PodIP && s.Endpoints[0].TargetPorts[0] == 8080 && s.Endpoints[0].Pod == "web-1" {
				return true
			}
		}
		return false
	})

	// Deleted: gone from the Endpoints, and the snapshot's generation moves on.
	code, b = c.do("DELETE", "/api/v1/namespaces/default/pods/web-1?gracePeriodSeconds=0", nil)
	if code != http.StatusOK {
		t.Fatalf("delete pod: %d %s", code, b)
	}
	c.waitGone("web-1", 60*time.Second)
	gone := time.Now()
	c.eventually(time.Second, "the deleted pod out of the endpoints", func() bool {
		ready, notReady := c.endpointsOf("web")
		return len(ready) == 0 && len(notReady) == 0
	})
	t.Logf("endpoints empty %s after the pod row went", time.Since(gone).Round(time.Millisecond))
	var next servicenet.Snapshot
	if code := c.get(fmt.Sprintf("/api/v1/servicenet?after=%d&timeoutSeconds=5", snap.Generation), &next); code != http.StatusOK || next.Generation <= snap.Generation {
		t.Fatalf("no newer snapshot after the delete: %d, generation %d (had %d)", code, next.Generation, snap.Generation)
	}
}
