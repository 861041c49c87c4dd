package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/syncbuf"
)

// port-forward listens on a local port and carries each connection to
// the pod's port through the API and the pod's node, until interrupted;
// what cannot work is refused before it listens.
func TestPortForward(t *testing.T) {
	t.Parallel()
	namespace(t, "forward")
	apply(t, `apiVersion: v1
kind: Pod
metadata:
  name: site
spec:
  containers:
  - name: http
    image: base
    command: ["/bin/sh", "-c", "echo through the forward > index.html && exec python3 -m http.server --bind $POD_IP 8080"]
    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
`, "-n", "forward")
	must(t, "wait", "pod/site", "-n", "forward", "--for=condition=Ready", "--timeout=60s")

	for _, c := range []struct{ args, says string }{
		{"site x", `"x": want [LOCAL_PORT:]REMOTE_PORT`},
		{"site 80:0", `"80:0": want [LOCAL_PORT:]REMOTE_PORT`},
		{"nobody 80", `Error from server (NotFound): not found: pod "nobody"`},
	} {
		if r := zwctl(t, append([]string{"port-forward", "-n", "forward"}, strings.Fields(c.args)...)...); r.code != 1 || !strings.Contains(r.err, c.says) {
			t.Errorf("port-forward %s: exit %d, %q; want it to say %q", c.args, r.code, r.err, c.says)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"port-forward", "pod/site", "-n", "forward", ":8080"}, streams{in: strings.NewReader(""), out: &out, errOut: &out}, testEnv(nil))
	}()
	listening := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> 8080\n`)
	var local string
	for local == "" {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			local = m[1]
		} else if ctx.Err() != nil {
			t.Fatalf("port-forward printed %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for range 2 {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + local + "/")
		if err != nil {
			t.Fatalf("through %s: %v\n%s", local, err, out.String())
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "through the forward\n" {
			t.Fatalf("through %s: %q", local, b)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("port-forward ended with %d: %s", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("port-forward did not stop when interrupted")
	}
	if got := strings.Count(out.String(), "Handling connection for 8080\n"); got != 2 {
		t.Errorf("port-forward handled %d connections, want 2:\n%s", got, out.String())
	}
}
