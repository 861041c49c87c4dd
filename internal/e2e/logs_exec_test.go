package e2e_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeclient"
	"github.com/zonewright/zonewright/internal/pki"
)

// talker counts its runs in a file of its zone, prints two lines per run,
// then prints whatever appears in the file "say"; its liveness probe
// fails once the file "kill-me" exists, which each run removes.
const talker = `{"metadata":{"name":"talker"},"spec":{"containers":[{"name":"app","image":"base",
  "command":["sh","-c","n=$(cat runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > runs; echo \"run $n line 1\"; echo \"run $n line 2\"; rm -f kill-me; while :; do if [ -e say ]; then cat say; rm -f say; fi; sleep 0.1; done"],
  "livenessProbe":{"exec":{"command":["sh","-c","test ! -e kill-me"]},"periodSeconds":1,"failureThreshold":1}}]}}`

// Logs and exec go API → the pod's node's endpoint, with Kubernetes'
// parameters and semantics, and only the control plane reaches a node's
// endpoint.
func TestPodLogsAndExecEndToEnd(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(talker)
	p := c.waitPhase("talker", model.PodRunning, false, 90*time.Second)
	const base = "/api/v1/namespaces/default/pods/talker"

	// The container's output, without svc.startd's lines.
	c.eventually(10*time.Second, "the first run's lines", func() bool {
		code, b := c.do("GET", base+"/log", nil)
		return code == 200 && string(b) == "run 1 line 1\nrun 1 line 2\n"
	})
	if code, b := c.do("GET", base+"/log?smfLines=true", nil); code != 200 || !strings.Contains(string(b), `Executing start method (`) {
		t.Fatalf("log with smfLines: %d %s", code, b)
	}
	if code, b := c.do("GET", base+"/log?tailLines=1&container=app", nil); code != 200 || string(b) != "run 1 line 2\n" {
		t.Fatalf("tailLines=1: %d %q", code, b)
	}
	for q, want := range map[string]int{"previous=true": 400, "tailLines=-3": 400, "sinceSeconds=x": 400, "container=nope": 404} {
		if code, b := c.do("GET", base+"/log?"+q, nil); code != want {
			t.Fatalf("log?%s: %d %s, want %d", q, code, b, want)
		}
	}
	if code, _ := c.do("GET", "/api/v1/namespaces/default/pods/nobody/log", nil); code != 404 {
		t.Fatalf("log of a pod that does not exist: %d", code)
	}

	// exec: arguments arrive as given, exit codes and stdin too.
	if out, _, code := c.podExec(t, base, nil, "echo", "a b;c"); out != "a b;c\n" || code != 0 {
		t.Fatalf("echo 'a b;c': %q, exit %d", out, code)
	}
	if out, _, code := c.podExec(t, base, nil, "echo", "$(id)", "`id`", "it's"); out != "$(id) `id` it's\n" || code != 0 {
		t.Fatalf("echo of shell syntax: %q, exit %d", out, code)
	}
	if _, _, code := c.podExec(t, base, nil, "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("sh -c 'exit 3': exit %d", code)
	}
	if out, errOut, code := c.podExec(t, base, strings.NewReader("through stdin\n"), "sh", "-c", "cat; echo oops >&2"); out != "through stdin\n" || errOut != "oops\n" || code != 0 {
		t.Fatalf("cat: %q %q, exit %d", out, errOut, code)
	}

	// A terminal: the command sees one, of the size the client asks for
	// (which may reach it a moment after it started, as a resize does).
	tctx, tcancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer tcancel()
	waitSize := `i=0; while [ $i -lt 50 ] && [ "$(stty size)" != "40 100" ]; do sleep 0.2; i=$((i+1)); done; stty size`
	tq := execstream.Options{Command: []string{"sh", "-c", "test -t 0 && echo on a tty; " + waitSize}, Stdin: true, Stdout: true, TTY: true}.Values()
	sess, err := execstream.Dial(tctx, c.http, c.api+base+"/exec?"+tq.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resize := make(chan execstream.Size, 1)
	resize <- execstream.Size{Width: 100, Height: 40}
	var ttyOut strings.Builder
	stdinOpen, stdinEnd := io.Pipe()
	defer stdinEnd.Close()
	if code, err := sess.Run(tctx, stdinOpen, &ttyOut, nil, resize); err != nil || code != 0 ||
		strings.ReplaceAll(ttyOut.String(), "\r\n", "\n") != "on a tty\n40 100\n" {
		t.Fatalf("exec on a terminal: %q, exit %d, %v", ttyOut.String(), code, err)
	}

	// follow: a line the container writes after the request arrives.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.api+base+"/log?follow=true", nil)
	resp, err := c.http.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("follow: %v %v", resp, err)
	}
	lines := bufio.NewScanner(resp.Body)
	for _, want := range []string{"run 1 line 1", "run 1 line 2"} {
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("followed log: %q, want %q (%v)", lines.Text(), want, lines.Err())
		}
	}
	c.podExec(t, base, nil, "sh", "-c", "echo written later > say")
	if !lines.Scan() || lines.Text() != "written later" {
		t.Fatalf("followed log after the request: %q (%v)", lines.Text(), lines.Err())
	}
	resp.Body.Close()

	// A liveness restart: previous is the first run's output.
	c.podExec(t, base, nil, "touch", "kill-me")
	c.eventually(30*time.Second, "the liveness restart", func() bool {
		p, _ := c.pod("talker")
		return containerStatus(p).RestartCount >= 1
	})
	var current string
	c.eventually(10*time.Second, "the new run's lines", func() bool {
		code, b := c.do("GET", base+"/log", nil)
		current = string(b)
		return code == 200 && strings.HasSuffix(current, " line 2\n") && !strings.HasPrefix(current, "run 1 ")
	})
	var n int
	if _, err := fmt.Sscanf(current, "run %d line 1\n", &n); err != nil || n < 2 {
		t.Fatalf("current run's log %q", current)
	}
	// (What the run printed until it was stopped follows its two lines.)
	if code, b := c.do("GET", base+"/log?previous=true", nil); code != 200 || !strings.HasPrefix(string(b), fmt.Sprintf("run %d line 1\nrun %d line 2\n", n-1, n-1)) ||
		strings.Contains(string(b), fmt.Sprintf("run %d ", n)) || strings.Contains(string(b), "[ ") {
		t.Fatalf("previous: %d %q (current %q)", code, b, current)
	}

	// Who may: a view token reads logs but may not exec; a node's
	// certificate neither.
	view, _, err := (&auth.Tokens{Pool: c.cp.Store.Pool()}).Issue(context.Background(), auth.RoleView, "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	viewer := &http.Client{Transport: auth.Bearer{Token: view, Next: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.cp.CA().Pool()}}}}
	if resp, err := viewer.Get(c.api + base + "/log"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a view token reading the log: %v %v", resp, err)
	}
	c.refusedExec(t, viewer, base, 403)
	certPEM, keyPEM, err := c.cp.CA().ClientCert(pki.NodeCNPrefix+"another-node", []string{pki.NodesOrg})
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	asNode := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.cp.CA().Pool(), Certificates: []tls.Certificate{nodeCert}}}}
	c.refusedExec(t, asNode, base, 403)

	// The node's endpoint itself: the control plane's certificate is
	// served; none, or a node's, is refused.
	var node model.Node
	c.get("/api/v1/nodes/"+p.Spec.NodeName, &node)
	endpoint, err := nodeclient.BaseURL(&node)
	if err != nil {
		t.Fatalf("node %s reports no endpoint: %+v", node.Metadata.Name, node.Status)
	}
	logURL := endpoint.String() + nodeclient.LogsPath("default", "talker", p.Metadata.UID, "app")
	cpDialer, err := nodeclient.New(c.cp.CA())
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := (&http.Client{Transport: cpDialer.Transport(node.Metadata.Name)}).Get(logURL); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the control plane's certificate at the endpoint: %v %v", resp, err)
	}
	for name, cfg := range map[string]*tls.Config{
		"no certificate":       {RootCAs: c.cp.CA().Pool(), InsecureSkipVerify: true},
		"a node's certificate": {RootCAs: c.cp.CA().Pool(), InsecureSkipVerify: true, Certificates: []tls.Certificate{nodeCert}},
	} {
		resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}).Get(logURL)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			t.Fatalf("%s at the node's endpoint: %d %s", name, resp.StatusCode, b)
		}
	}
	// And the control plane dials only the pod's node: another name's
	// endpoint is refused at the handshake.
	if _, err := (&http.Client{Transport: cpDialer.Transport("not-" + node.Metadata.Name)}).Get(logURL); err == nil {
		t.Fatal("the control plane accepted a node's endpoint under another node's name")
	}
}

// podExec runs argv in the pod at base through the API and returns its
// stdout, stderr and exit code.
func (c *cluster) podExec(t *testing.T, base string, stdin io.Reader, argv ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	q := execstream.Options{Command: argv, Stdout: true, Stderr: true, Stdin: stdin != nil}.Values()
	s, err := execstream.Dial(ctx, c.http, c.api+base+"/exec?"+q.Encode(), nil)
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	var out, errOut strings.Builder
	code, err := s.Run(ctx, stdin, &out, &errOut, nil)
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	return out.String(), errOut.String(), code
}

// refusedExec asserts that client's exec is refused with code.
func (c *cluster) refusedExec(t *testing.T, client *http.Client, base string, code int) {
	t.Helper()
	q := url.Values{"command": {"true"}, "stdout": {"true"}}
	_, err := execstream.Dial(context.Background(), client, c.api+base+"/exec?"+q.Encode(), nil)
	var re *execstream.RefusedError
	if !errors.As(err, &re) || re.Code != code {
		t.Fatalf("exec: %v, want a %d refusal", err, code)
	}
}
