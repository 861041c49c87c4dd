package e2e_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/execstream"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/simtest"
)

// An edit token's exec runs in the pod's zone with the zone's rights, the
// simulated in-zone commands included: the simulator runs those itself,
// but a file they name is the zone's. ipnat's parse errors print the first
// word of each line of its -f file, so reading the control plane's admin
// token file would print the token.
func TestExecCannotReadTheHostsFilesThroughInZoneCommands(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(`{"metadata":{"name":"tenant"},"spec":{"containers":[{"name":"app","image":"base","command":["sh","-c","exec sleep 1000"]}]}}`)
	c.waitPhase("tenant", model.PodRunning, false, 90*time.Second)
	const base = "/api/v1/namespaces/default/pods/tenant"

	tokenFile := controlplane.AdminTokenFile(c.cpConfig.StateDir)
	if b, err := os.ReadFile(tokenFile); err != nil || !strings.Contains(string(b), c.cp.AdminToken()) {
		t.Fatalf("the admin token file %s: %v (the test needs it to hold the token)", tokenFile, err)
	}
	edit, _, err := (&auth.Tokens{Pool: c.cp.Store.Pool()}).Issue(context.Background(), auth.RoleEdit, "default", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	editor := &http.Client{Transport: auth.Bearer{Token: edit, Next: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.cp.CA().Pool()}}}}

	for _, tc := range []struct {
		argv   []string
		code   int
		stderr string
	}{
		{[]string{"ipnat", "-f", tokenFile}, 0, "fopen(" + tokenFile + ") failed: No such file or directory\n"},
		{[]string{"/usr/sbin/ipnat", "-f", tokenFile}, 0, "fopen(" + tokenFile + ") failed: No such file or directory\n"},
		{[]string{"svccfg", "import", tokenFile}, 1, "svccfg: Unable to stat file " + tokenFile + ".  No such file or directory\n"},
	} {
		out, errOut, code := execAs(t, c, editor, base, tc.argv...)
		if strings.Contains(out+errOut, c.cp.AdminToken()) {
			t.Fatalf("%q printed the admin token: stdout %q stderr %q", tc.argv, out, errOut)
		}
		// An exec runs after the shell that sets the container's
		// environment, as the zone's user, for whom the simulator's
		// commands are not executable (126); run alone, the simulator
		// runs them, with the zone's view of files.
		refused := code == 126 && strings.HasSuffix(errOut, "Permission denied\n")
		if out != "" || !refused && (errOut != tc.stderr || code != tc.code) {
			t.Errorf("%q: stdout %q stderr %q exit %d, want stderr %q exit %d, or not executable", tc.argv, out, errOut, code, tc.stderr, tc.code)
		}
	}
}

// execAs runs argv in the pod at base through the API as client's token.
func execAs(t *testing.T, c *cluster, client *http.Client, base string, argv ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	q := execstream.Options{Command: argv, Stdout: true, Stderr: true}.Values()
	s, err := execstream.Dial(ctx, client, c.api+base+"/exec?"+q.Encode(), nil)
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	var out, errOut strings.Builder
	code, err := s.Run(ctx, nil, &out, &errOut, nil)
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	return out.String(), errOut.String(), code
}

// A pod cannot fork past the processes its zone is allowed: its
// annotation zonewright.io/max-processes (100) becomes the zone's
// max-processes, which the host enforces, while a pod beside it without
// the annotation forks 150. A fork bomb stays inside its own zone.
//
// Make limitProcesses (internal/sim/runas.go) return nil at once to see
// it fail: the limited pod forks all 150.
func TestAPodCannotForkPastItsMaxProcesses(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	c.createPod(`{"metadata":{"name":"bounded","annotations":{"zonewright.io/max-processes":"100"}},"spec":{"containers":[{"name":"app","image":"base","command":["sh","-c","exec sleep 1000"]}]}}`)
	c.createPod(`{"metadata":{"name":"unbounded"},"spec":{"containers":[{"name":"app","image":"base","command":["sh","-c","exec sleep 1000"]}]}}`)
	c.waitPhase("bounded", model.PodRunning, false, 90*time.Second)
	c.waitPhase("unbounded", model.PodRunning, false, 90*time.Second)
	forked := func(pod string) int {
		out, errOut, code := execAs(t, c, c.http, "/api/v1/namespaces/default/pods/"+pod, "python3", "-c", simtest.ForkUpTo(150))
		n, err := strconv.Atoi(strings.TrimSpace(out))
		if code != 0 || err != nil {
			t.Fatalf("forking in %s: exit %d, stdout %q, stderr %q", pod, code, out, errOut)
		}
		return n
	}
	if n := forked("bounded"); n >= 100 {
		t.Errorf("a pod with max-processes 100 forked %d processes", n)
	}
	if n := forked("unbounded"); n != 150 {
		t.Errorf("a pod without a limit of its own forked %d of 150", n)
	}
}

// A pod cannot take memory past its limit: resources.limits.memory
// (64Mi) becomes its zone's capped-memory, which the host enforces, so a
// process of the pod that allocates 256 MiB dies (Linux's OOM killer in
// the zone's cgroup; an allocation that fails on illumos), while the pod
// itself and a pod beside it without a limit keep running.
//
// Make makeZoneCgroup (internal/sim/zone_cgroup.go) return nil, nil at
// once to see it fail: the bounded pod's process gets the 256 MiB.
func TestAPodCannotAllocatePastItsMemoryLimit(t *testing.T) {
	c := newIsolatedCluster(t, 1)
	c.createPod(`{"metadata":{"name":"bounded"},"spec":{"containers":[{"name":"app","image":"base","command":["sh","-c","exec sleep 1000"],"resources":{"limits":{"memory":"64Mi"}}}]}}`)
	c.createPod(`{"metadata":{"name":"neighbour"},"spec":{"containers":[{"name":"app","image":"base","command":["sh","-c","exec sleep 1000"]}]}}`)
	c.waitPhase("bounded", model.PodRunning, false, 90*time.Second)
	c.waitPhase("neighbour", model.PodRunning, false, 90*time.Second)
	logs, _ := filepath.Glob(filepath.Join(c.nodes.Nodes[0].Root, "run", "*", "zoneadmd.log"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), "caps not enforced") {
			t.Skip(regexp.MustCompile(`memory and CPU caps not enforced.*`).FindString(string(b)))
		}
	}
	const allocate = "b = bytearray(256 << 20); print('allocated')"
	out, errOut, code := execAs(t, c, c.http, "/api/v1/namespaces/default/pods/bounded", "python3", "-c", allocate)
	if code == 0 || strings.Contains(out, "allocated") {
		t.Errorf("a pod limited to 64Mi allocated 256 MiB: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, pod := range []string{"bounded", "neighbour"} {
		if out, errOut, code := execAs(t, c, c.http, "/api/v1/namespaces/default/pods/"+pod, "echo", "alive"); code != 0 || out != "alive\n" {
			t.Errorf("pod %s after the allocation: exit %d, stdout %q, stderr %q", pod, code, out, errOut)
		}
		if p, ok := c.pod(pod); !ok || p.Status.Phase != model.PodRunning {
			t.Errorf("pod %s is %s after the allocation", pod, p.Status.Phase)
		}
	}
	if out, errOut, code := execAs(t, c, c.http, "/api/v1/namespaces/default/pods/neighbour", "python3", "-c", allocate); code != 0 || out != "allocated\n" {
		t.Errorf("a pod without a limit could not allocate 256 MiB: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
