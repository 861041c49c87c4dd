package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/syncbuf"
	zw "github.com/zonewright/zonewright/internal/zwclient"
)

// siteCommand serves a page over HTTP on the pod's port 8080.
const siteCommand = `["/bin/sh", "-c", "echo through kubectl > index.html && exec python3 -m http.server --bind $POD_IP 8080"]`

// portForward is a running kubectl port-forward: its local ports by
// remote port, and its output so far.
type portForward struct {
	out, errOut *syncbuf.Buffer
	local       map[string]string
	exited      chan error
}

// kubectlPortForward starts kubectl port-forward with args (the env's
// settings added to kubectl's) and waits until it listens on every
// port it names.
func kubectlPortForward(t *testing.T, env []string, args ...string) *portForward {
	t.Helper()
	cmd := kubectlCmd(t, append([]string{"port-forward"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	pf := &portForward{out: &syncbuf.Buffer{}, errOut: &syncbuf.Buffer{}, local: map[string]string{}, exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = pf.out, pf.errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { pf.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-pf.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-pf.exited
		}
	})
	want := 0
	for _, a := range args {
		if strings.Contains(a, ":") || regexp.MustCompile(`^\d+$`).MatchString(a) {
			want++
		}
	}
	listening := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> (\d+)\n`)
	deadline := time.After(60 * time.Second)
	for len(pf.local) < want {
		for _, m := range listening.FindAllStringSubmatch(pf.out.String(), -1) {
			pf.local[m[2]] = m[1]
		}
		select {
		case err := <-pf.exited:
			pf.exited <- err
			t.Fatalf("kubectl port-forward %s exited: %v\n%s%s", strings.Join(args, " "), err, pf.out, pf.errOut)
		case <-deadline:
			t.Fatalf("kubectl port-forward %s does not listen:\n%s%s", strings.Join(args, " "), pf.out, pf.errOut)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return pf
}

// get is the body at local's /, through the forward.
func get(local string) (string, error) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + local + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// The machine's kubectl forwards local ports to a pod's: over SPDY
// tunnelled in a WebSocket (what it tries first), and over SPDY upgraded
// from a POST (its fallback, with KUBECTL_PORT_FORWARD_WEBSOCKETS=false),
// several connections at once through one session, each a portforward
// stream to the pod's node. A port nothing listens on is reported on the
// connection's error stream, which kubectl prints before it ends the
// session, as it does with kubelet's. (Drop the
// kubeforward.IsTunnel case in podPortForward to see kubectl fall back
// from the WebSocket; drop the POST portforward route to see the
// fallback fail.)
func TestKubectlPortForward(t *testing.T) {
	t.Parallel()
	namespace(t, "kforward")
	apply(t, `apiVersion: v1
kind: Pod
metadata:
  name: site
spec:
  containers:
  - name: http
    image: base
    command: `+siteCommand+`
    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
`, "-n", "kforward")
	must(t, "wait", "pod/site", "-n", "kforward", "--for=condition=Ready", "--timeout=60s")
	const want = "through kubectl\n"

	// A POST that is no SPDY upgrade is told what the route wants.
	client, err := zw.New(stackSettings(t))
	if err != nil {
		t.Fatal(err)
	}
	err = client.Do(context.Background(), http.MethodPost, "/api/v1/namespaces/kforward/pods/site/portforward", nil, nil, nil)
	if ae := (*zw.APIError)(nil); !errors.As(err, &ae) || ae.Code != http.StatusBadRequest || !strings.Contains(ae.Message, "upgrade to SPDY/3.1") {
		t.Errorf("a POST without Upgrade: %v; want 400, an upgrade to SPDY/3.1", err)
	}

	for _, c := range []struct {
		name string
		env  []string
	}{
		{"websocket", []string{"KUBECTL_PORT_FORWARD_WEBSOCKETS=true"}},
		{"spdy", []string{"KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// -v=4: kubectl says when it falls back from the WebSocket.
			pf := kubectlPortForward(t, c.env, "pod/site", "-n", "kforward", ":8080", ":9", "-v=4")
			if c.name == "websocket" && strings.Contains(pf.errOut.String(), "fallback to secondary dialer") {
				t.Errorf("kubectl fell back from the WebSocket:\n%s", pf.errOut)
			}
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if body, err := get(pf.local["8080"]); err != nil || body != want {
						t.Errorf("request %d through %s: %q, %v; want %q\n%s", i, pf.local["8080"], body, err, want, pf.errOut)
					}
				}()
			}
			wg.Wait()
			if got := strings.Count(pf.out.String(), "Handling connection for "); got != 6 {
				t.Errorf("kubectl handled %d connections, want 6:\n%s", got, pf.out)
			}

			// Port 9: the connection is closed, the error printed.
			c, err := net.Dial("tcp", pf.local["9"])
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(30 * time.Second))
			if b, err := io.ReadAll(c); len(b) != 0 || err != nil {
				t.Errorf("through a closed port: %q, %v", b, err)
			}
			c.Close()
			local9 := strings.TrimPrefix(pf.local["9"], "127.0.0.1:")
			says := fmt.Sprintf("an error occurred forwarding %s -> 9: error forwarding port 9: pod site does not accept connections on port 9: connection refused", local9)
			// kubectl (since 1.23) ends its session on an error stream's
			// message, as it does with kubelet's.
			select {
			case err := <-pf.exited:
				if err == nil || !strings.Contains(pf.errOut.String(), says) || !strings.Contains(pf.errOut.String(), "lost connection to pod") {
					t.Errorf("kubectl port-forward, after forwarding to a closed port: %v\n%s; want it to say %q, then lost connection to pod", err, pf.errOut, says)
				}
				pf.exited <- err
			case <-time.After(30 * time.Second):
				t.Errorf("kubectl port-forward goes on after an error: %s", pf.errOut)
			}
		})
	}
}

// kubectl port-forward deploy/NAME forwards to a pod of the deployment,
// which kubectl picks by the deployment's selector.
func TestKubectlPortForwardToADeployment(t *testing.T) {
	t.Parallel()
	namespace(t, "kforwarddeploy")
	apply(t, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: site
spec:
  replicas: 1
  selector:
    matchLabels: {app: site}
  template:
    metadata:
      labels: {app: site}
    spec:
      containers:
      - name: http
        image: base
        command: `+siteCommand+`
        readinessProbe:
          httpGet: {path: /, port: 8080}
          periodSeconds: 1
`, "-n", "kforwarddeploy")
	must(t, "rollout", "status", "deployment/site", "-n", "kforwarddeploy", "--timeout=120s")
	pf := kubectlPortForward(t, nil, "deploy/site", "-n", "kforwarddeploy", ":8080")
	if body, err := get(pf.local["8080"]); err != nil || body != "through kubectl\n" {
		t.Errorf("through the deployment's forward: %q, %v\n%s", body, err, pf.errOut)
	}
}
