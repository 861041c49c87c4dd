package e2e_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/portforward"
)

// In isolation mode nothing outside the nodes reaches a pod's address,
// as on a cluster of hosts; a port-forward does, through the API and the
// pod's node, which makes the connection. A port nothing listens on is
// refused before the upgrade (502), a port that is not one is 400, and
// a pod that is not running is refused.
//
// Make podPortForward (api/podio.go) relay without the pod's address to
// see every forward fail: the node connects only to its own pods'.
func TestPortForwardReachesAPodNothingElseReaches(t *testing.T) {
	c := newIsolatedCluster(t, 1)
	c.createPod(`{"metadata":{"name":"web"},"spec":{"terminationGracePeriodSeconds":1,
	  "containers":[{"name":"http","image":"base","command":["sh","-c","echo forwarded > index.html && exec python3 -m http.server --bind $POD_IP 8080"],
	    "readinessProbe":{"httpGet":{"path":"/","port":8080},"periodSeconds":1}}]}}`)
	pod := c.waitPhase("web", model.PodRunning, true, 90*time.Second)
	// Whatever may answer for the address here (a proxy of this
	// machine's network), it is not the pod.
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, "8080"), 2*time.Second); err == nil {
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.WriteString(conn, "GET /index.html HTTP/1.0\r\n\r\n")
		b, _ := io.ReadAll(conn)
		conn.Close()
		if strings.Contains(string(b), "forwarded") {
			t.Fatalf("this host reached pod address %s directly: the pod network is not isolated", pod.Status.PodIP)
		}
	}
	base := c.api + "/api/v1/namespaces/default/pods/web/portforward?port="
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	get := func() (string, error) {
		conn, err := portforward.Dial(ctx, c.http, base+"8080")
		if err != nil {
			return "", err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "GET /index.html HTTP/1.0\r\n\r\n"); err != nil {
			return "", err
		}
		b, err := io.ReadAll(conn)
		return string(b), err
	}
	for i := range 3 { // one connection each, none kept
		got, err := get()
		if err != nil || !strings.HasPrefix(got, "HTTP/1.0 200") || !strings.HasSuffix(got, "forwarded\n") {
			t.Fatalf("forward %d to the pod's 8080: %q, %v", i, got, err)
		}
	}
	refused := func(query string, code int, says string) {
		t.Helper()
		_, err := portforward.Dial(ctx, c.http, base+query)
		var re *execstream.RefusedError
		if !errors.As(err, &re) || re.Code != code || !strings.Contains(re.Message, says) {
			t.Errorf("port=%s: %v; want %d saying %q", query, err, code, says)
		}
	}
	refused("8081", http.StatusBadGateway, "does not accept connections on port 8081")
	refused("0", http.StatusBadRequest, "not a TCP port")
	refused("http", http.StatusBadRequest, "not a TCP port")

	// A pod not running has nothing to forward to; a pod gone, nothing
	// at all.
	c.createPod(`{"metadata":{"name":"waiting"},"spec":{"containers":[{"name":"c","image":"base","command":["sleep","600"],
	  "resources":{"requests":{"cpu":"1000"}}}]}}`)
	if _, err := portforward.Dial(ctx, c.http, c.api+"/api/v1/namespaces/default/pods/waiting/portforward?port=80"); err == nil ||
		!strings.Contains(err.Error(), "not Running") {
		t.Errorf("a forward to a pod that is not running: %v", err)
	}
}
