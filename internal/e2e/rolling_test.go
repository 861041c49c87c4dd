package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/model"
)

// Replacing a service's three backends one by one (delete one, wait for
// its successor to be Ready, repeat) fails none of the requests a client
// makes at 50 a second through the ClusterIP, even with a node slow to
// change its rules: a terminating pod leaves every node's rules before
// its containers stop.
func TestRollingReplacementDropsNoRequest(t *testing.T) {
	t.Parallel()
	cidr := fmt.Sprintf("127.97.%d.0/24", os.Getpid()%250+1)
	c := newClusterWith(t, 3, func(cfg *controlplane.Config) { cfg.ServiceCIDR = cidr })
	code, b := c.do("POST", "/api/v1/namespaces/default/services",
		`{"metadata":{"name":"echo"},"spec":{"selector":{"app":"echo"},"ports":[{"port":80,"targetPort":8080}]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create service: %d %s", code, b)
	}
	var svc model.Service
	_ = json.Unmarshal(b, &svc)
	echo := func(name string) {
		c.createPod(fmt.Sprintf(`{"metadata":{"name":%q,"labels":{"app":"echo"}},"spec":{"terminationGracePeriodSeconds":10,
		  "containers":[{"name":"http","image":"base",
		  "command":["sh","-c","echo %s > whoami && exec python3 -m http.server --bind $POD_IP 8080"],
		  "readinessProbe":{"httpGet":{"path":"/whoami","port":8080},"periodSeconds":1}}]}}`, name, name))
	}
	for i := range 3 {
		echo(fmt.Sprintf("echo-%d", i))
	}
	for i := range 3 {
		c.waitPhase(fmt.Sprintf("echo-%d", i), model.PodRunning, true, 90*time.Second)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (string, error) {
		resp, err := client.Get("http://" + svc.Spec.ClusterIP + "/whoami")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("status %d", resp.StatusCode)
		}
		return strings.TrimSpace(string(body)), nil
	}
	c.eventually(10*time.Second, "the ClusterIP to answer", func() bool { _, err := get(); return err == nil })
	// One node is slow to change its rules: a pod stopped as soon as it
	// left the Endpoints would still get that node's traffic.
	c.sim(2, "fault", "latency", "ipnat", "1500ms")

	var (
		mu       sync.Mutex
		requests int
		failures []string
		served   = map[string]int{}
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				who, err := get()
				mu.Lock()
				defer mu.Unlock()
				requests++
				if err != nil {
					failures = append(failures, time.Now().Format("15:04:05.000")+" "+err.Error())
				} else {
					served[who]++
				}
			}()
		}
	}()
	for i := range 3 {
		old, next := fmt.Sprintf("echo-%d", i), fmt.Sprintf("echo-%d-b", i)
		if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/"+old, nil); code != http.StatusOK {
			t.Fatalf("delete %s: %d %s", old, code, b)
		}
		echo(next)
		c.waitPhase(next, model.PodRunning, true, 90*time.Second)
		c.waitGone(old, 60*time.Second)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d requests through %s while the backends were replaced, served by %v", requests, svc.Spec.ClusterIP, served)
	if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed: %s", len(failures), requests, strings.Join(failures[:min(len(failures), 10)], "; "))
	}
	if requests < 200 {
		t.Fatalf("only %d requests made", requests)
	}
	for i := range 3 {
		if served[fmt.Sprintf("echo-%d-b", i)] == 0 {
			t.Fatalf("successor echo-%d-b served nothing: %v", i, served)
		}
	}
}
