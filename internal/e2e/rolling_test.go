package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/sim"
)

// rollingClientPy requests http://argv[1]/whoami 50 times a second, each
// request on a connection of its own, and prints "ok WHO" or "fail START
// ERROR" for each, START the time the request began. A request is given
// 15 s: on a loaded machine an answer may be slow, and only one that never
// comes (or is refused) is a dropped request.
const rollingClientPy = `import sys, threading, time, urllib.request
url, lock = 'http://' + sys.argv[1] + '/whoami', threading.Lock()
def get():
    start = time.strftime('%H:%M:%S')
    try:
        line = 'ok ' + urllib.request.urlopen(url, timeout=15).read().decode().strip()
    except Exception as e:
        line = 'fail %s %s' % (start, e)
    with lock:
        print(line, flush=True)
while True:
    threading.Thread(target=get, daemon=True).start()
    time.sleep(0.02)
`

// rollingServerPy serves its working directory, with a file whoami
// holding argv[1], on $POD_IP:8080. Its listen backlog is a real server's:
// http.server's 5 drops connections when the machine is busy for a moment,
// which is not what the test is about.
const rollingServerPy = `import os, sys, http.server as s
open('whoami', 'w').write(sys.argv[1] + '\n')
class Server(s.ThreadingHTTPServer):
    request_queue_size = 128
Server((os.environ['POD_IP'], 8080), s.SimpleHTTPRequestHandler).serve_forever()
`

// Replacing a service's three backends one by one (delete one, wait for
// its successor to be Ready, repeat) fails none of the requests a client
// pod makes at 50 a second through the ClusterIP, translated by its node's
// kernel, even with that node slow to change its rules: a terminating pod
// leaves every node's rules before its containers stop.
//
// Make the workflow's leaveEndpoints step return at once to see requests
// fail (they reach a backend that has stopped).
func TestRollingReplacementDropsNoRequest(t *testing.T) {
	t.Parallel()
	c := newIsolatedCluster(t, 3)
	code, b := c.do("POST", "/api/v1/namespaces/default/services",
		`{"metadata":{"name":"echo"},"spec":{"selector":{"app":"echo"},"ports":[{"port":80,"targetPort":8080}]}}`)
	if code != http.StatusCreated {
		t.Fatalf("create service: %d %s", code, b)
	}
	var svc model.Service
	_ = json.Unmarshal(b, &svc)
	server, _ := json.Marshal(rollingServerPy)
	echo := func(name string) {
		c.createPod(fmt.Sprintf(`{"metadata":{"name":%q,"labels":{"app":"echo"}},"spec":{"terminationGracePeriodSeconds":10,
		  "containers":[{"name":"http","image":"base","command":["python3","-c",%s,%q],
		  "readinessProbe":{"httpGet":{"path":"/whoami","port":8080},"periodSeconds":1}}]}}`, name, server, name))
	}
	for i := range 3 {
		echo(fmt.Sprintf("echo-%d", i))
	}
	for i := range 3 {
		c.waitPhase(fmt.Sprintf("echo-%d", i), model.PodRunning, true, 90*time.Second)
	}
	script, _ := json.Marshal(rollingClientPy)
	c.createPod(fmt.Sprintf(`{"metadata":{"name":"client"},"spec":{"nodeName":"node-3","terminationGracePeriodSeconds":1,
	  "containers":[{"name":"c","image":"base","command":["python3","-u","-c",%s,%q]}]}}`, script, svc.Spec.ClusterIP))
	c.waitPhase("client", model.PodRunning, false, 90*time.Second)
	log := func() []string {
		code, b := c.do("GET", "/api/v1/namespaces/default/pods/client/log", nil)
		if code != http.StatusOK {
			t.Fatalf("the client's log: %d %s", code, b)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	// Counted from the moment the ClusterIP has answered 4 s of requests
	// in a row (none still waiting on a rule not yet in force).
	from := 0
	c.eventually(60*time.Second, "the ClusterIP to answer the client", func() bool {
		lines := log()
		if len(lines) < 200 {
			return false
		}
		for _, l := range lines[len(lines)-200:] {
			if !strings.HasPrefix(l, "ok ") {
				return false
			}
		}
		from = len(lines)
		return true
	})
	// The client's node is slow to change its rules: a pod stopped as
	// soon as it left the Endpoints would still get that node's traffic.
	c.sim(2, "fault", "latency", "ipnat", "1500ms")

	for i := range 3 {
		old, next := fmt.Sprintf("echo-%d", i), fmt.Sprintf("echo-%d-b", i)
		if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/"+old, nil); code != http.StatusOK {
			t.Fatalf("delete %s: %d %s", old, code, b)
		}
		echo(next)
		c.waitPhase(next, model.PodRunning, true, 90*time.Second)
		c.waitGone(old, 60*time.Second)
	}
	time.Sleep(16 * time.Second) // the last requests answered or timed out
	lines := log()[from:]
	served := map[string]int{}
	var failures []string
	for _, l := range lines {
		if who, ok := strings.CutPrefix(l, "ok "); ok {
			served[who]++
		} else {
			failures = append(failures, l)
		}
	}
	t.Logf("%d requests through %s while the backends were replaced, served by %v", len(lines), svc.Spec.ClusterIP, served)
	if len(failures) > 0 {
		for i, n := range c.nodes.Nodes {
			ns, _ := os.ReadFile(filepath.Join(n.Root, sim.NetnsFile))
			out, err := exec.Command("nsenter", "--net="+strings.TrimSpace(string(ns)), "conntrack", "-L").CombinedOutput()
			t.Logf("node-%d's connections not answered (%v):\n%s", i+1, err, unanswered(out))
		}
		t.Fatalf("%d of %d requests failed: %s", len(failures), len(lines), strings.Join(failures[:min(len(failures), 10)], "; "))
	}
	if len(lines) < 200 {
		t.Fatalf("only %d requests made", len(lines))
	}
	for i := range 3 {
		if served[fmt.Sprintf("echo-%d-b", i)] == 0 {
			t.Fatalf("successor echo-%d-b served nothing: %v", i, served)
		}
	}
}

// unanswered are the lines of `conntrack -L` output of connections that
// saw no reply.
func unanswered(out []byte) string {
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "UNREPLIED") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
