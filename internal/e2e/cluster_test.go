package e2e_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"

	nodeagent "github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devcluster"
	"github.com/zonewright/zonewright/internal/devnodes"
	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/simtest"
	"github.com/zonewright/zonewright/workflows"
)

var binDir string

// defaultParallel is how many tests run at once unless -parallel says
// otherwise. The tests mostly wait (heartbeats, grace periods, back-offs,
// the simulator's latencies) and use under one core on average, so the
// default of GOMAXPROCS would leave the machine idle; at 6 the package
// took 5 minutes on 2 cores where at 2 it took 8.
const defaultParallel = 6

func TestMain(m *testing.M) {
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", strconv.Itoa(defaultParallel))
	}
	dir, err := os.MkdirTemp("", "zw-e2e-bin-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	// zonewright runs here only as the nodes' agent.
	if err := simtest.BuildTagged(dir, []string{"nodev"}, "zonewright", "illumos-sim"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := pgtest.Main(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// e2eTuning shortens the lifecycle's back-offs so tests wait seconds,
// not the minutes Kubernetes' defaults take.
var e2eTuning = workflows.Tuning{RetryMin: 200 * time.Millisecond, RetryMax: 3 * time.Second,
	RestartBackoff: time.Second, RestartMax: 5 * time.Second, HistoryLimit: workflows.DefaultTuning.HistoryLimit}

// cluster is a whole zonewright on this machine.
type cluster struct {
	t        *testing.T
	stack    *devcluster.Cluster
	api      string
	url      string
	temporal tclient.Client
	nodes    *devnodes.Nodes
	cp       *controlplane.ControlPlane
	http     *http.Client        // trusts the cluster CA
	cpConfig controlplane.Config // how cp was started, on its address
}

// podNetworks hands each cluster of this test binary pod networks of its
// own (127.<n>.<node>.0/24), so pods of clusters running in parallel never
// serve on the same address; the dev stack keeps 127.10.
var podNetworks = &counter{n: 19}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) next() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.n == 94 { // 127.94-98 are the service ranges of the bench and tests
		c.n = 99
	}
	return c.n
}

// stopControlPlane stops the control plane (API, worker, controllers);
// the returned function starts it again on the same address.
func (c *cluster) stopControlPlane() (start func()) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.cp.Stop(ctx); err != nil {
		c.t.Fatalf("stop the control plane: %v", err)
	}
	return func() {
		c.t.Helper()
		if err := c.stack.RestartControlPlane(context.Background(), c.cpConfig); err != nil {
			c.t.Fatalf("start the control plane again: %v", err)
		}
		c.cp = c.stack.ControlPlane
	}
}

func newCluster(t *testing.T, nodes int, agentArgs ...string) *cluster {
	t.Helper()
	return newClusterWith(t, nodes, nil, agentArgs...)
}

// newClusterWith is newCluster with the control plane's config adjusted.
// The image map is the dev stack's (deploy/images.yaml).
func newClusterWith(t *testing.T, nodes int, adjust func(*controlplane.Config), agentArgs ...string) *cluster {
	t.Helper()
	return startCluster(t, nodes, false, adjust, agentArgs...)
}

// newIsolatedCluster is newCluster in isolation mode: each node a network
// of its own (devnodes.Config.Underlay), pods reaching other nodes' pods
// only through the routes the nodes hold. It skips the test where
// isolation cannot run, saying why.
func newIsolatedCluster(t *testing.T, nodes int, agentArgs ...string) *cluster {
	t.Helper()
	if err := fabric.DirectIsolationSupported(); err != nil {
		t.Skip(err)
	}
	return startCluster(t, nodes, true, nil, agentArgs...)
}

func startCluster(t *testing.T, nodes int, isolated bool, adjust func(*controlplane.Config), agentArgs ...string) *cluster {
	t.Helper()
	network := podNetworks.next()
	clusterCIDR := devnodes.ClusterCIDR(network)
	var underlay netip.Prefix
	if isolated {
		clusterCIDR, underlay = fabric.IsolatedClusterCIDR(network), fabric.IsolatedUnderlay(network)
	}
	cfg := controlplane.Config{PodTuning: &e2eTuning, PodReconcileInterval: 2 * time.Second,
		ClusterCIDR: clusterCIDR, NodeCIDRMaskSize: devnodes.NodeCIDRMaskSize,
		// The tests' image sources are servers on loopback.
		ImageAllowPrivateSources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if adjust != nil {
		adjust(&cfg)
	}
	// Temporal runs mutual TLS with the authorizer, as in the dev stack:
	// each agent works only its own task queue.
	stack, err := devcluster.Build(context.Background(), devcluster.Options{Dir: t.TempDir(), DatabaseURL: pgtest.NewDatabase(t),
		TemporalLogger: slog.New(slog.NewTextHandler(os.Stderr, nil)), TemporalLogLevel: slog.LevelError,
		ControlPlane: cfg, Zonewright: filepath.Join(binDir, "zonewright"), Sim: filepath.Join(binDir, "illumos-sim"),
		Nodes: nodes, AgentArgs: append([]string{"--heartbeat-interval", "1s"}, agentArgs...), Underlay: underlay, OperatorName: "e2e-operator"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Stop)
	cp := stack.ControlPlane
	c := &cluster{t: t, stack: stack, api: cp.URL(), url: stack.DatabaseURL, cp: cp, cpConfig: stack.ControlPlaneConfig, nodes: stack.Nodes,
		http: &http.Client{Transport: auth.Bearer{Token: cp.AdminToken(), Next: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cp.CA().Pool()}}}}}
	// The tests' own client is an operator's.
	if c.temporal, err = stack.DialOperator(slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.temporal.Close)
	c.eventually(time.Minute, "every node Ready", func() bool {
		var list model.List[model.Node]
		c.get("/api/v1/nodes", &list)
		ready := 0
		for _, n := range list.Items {
			if n.Ready() {
				ready++
			}
		}
		return ready == nodes
	})
	return c
}

func (c *cluster) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			if s, isStr := body.(string); isStr {
				b = []byte(s)
			} else {
				b, _ = json.Marshal(body)
			}
		}
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.api+path, r)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// podCIDR is the pod CIDR the control plane assigned node i.
func (c *cluster) podCIDR(i int) string {
	c.t.Helper()
	var n model.Node
	if code := c.get("/api/v1/nodes/"+c.nodes.Nodes[i].Name, &n); code != 200 || n.Spec.PodCIDR == "" {
		c.t.Fatalf("node %s: %d, pod CIDR %q", c.nodes.Nodes[i].Name, code, n.Spec.PodCIDR)
	}
	return n.Spec.PodCIDR
}

func (c *cluster) get(path string, into any) int {
	c.t.Helper()
	code, b := c.do("GET", path, nil)
	if into != nil {
		_ = json.Unmarshal(b, into)
	}
	return code
}

func (c *cluster) createPod(body string) model.Pod {
	c.t.Helper()
	code, b := c.do("POST", "/api/v1/namespaces/default/pods", body)
	if code != http.StatusCreated {
		c.t.Fatalf("create pod: %d %s", code, b)
	}
	var p model.Pod
	_ = json.Unmarshal(b, &p)
	return p
}

func (c *cluster) pod(name string) (model.Pod, bool) {
	c.t.Helper()
	var p model.Pod
	code := c.get("/api/v1/namespaces/default/pods/"+name, &p)
	return p, code == http.StatusOK
}

func (c *cluster) eventually(timeout time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitPhase waits for the pod to reach phase (and Ready, when asked).
func (c *cluster) waitPhase(name, phase string, ready bool, timeout time.Duration) model.Pod {
	c.t.Helper()
	var p model.Pod
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		p, ok = c.pod(name)
		if ok && p.Status.Phase == phase && (!ready || isReady(p)) {
			return p
		}
		if ok && phase != model.PodFailed && p.Status.Phase == model.PodFailed {
			c.t.Fatalf("pod %s Failed (%s) while waiting for %s: %s\nevents:\n%s", name, p.Status.Reason, phase, p.Status.Message, c.events(name))
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("pod %s is %s (%s: %s) after %s; want %s ready=%t\nevents:\n%s", name, p.Status.Phase, p.Status.Reason, p.Status.Message, timeout, phase, ready, c.events(name))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) waitGone(name string, timeout time.Duration) {
	c.t.Helper()
	c.eventually(timeout, "pod "+name+" to be gone", func() bool { _, ok := c.pod(name); return !ok })
}

func isReady(p model.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == model.PodReady {
			return cond.Status == model.ConditionTrue
		}
	}
	return false
}

func (c *cluster) events(name string) string {
	var list model.List[model.Event]
	c.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D"+name, &list)
	var b strings.Builder
	for _, e := range firstSeenFirst(list.Items) {
		fmt.Fprintf(&b, "  %s %s: %s", e.Type, e.Reason, e.Message)
		if e.Count > 1 {
			fmt.Fprintf(&b, " (x%d)", e.Count)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// firstSeenFirst orders events by when they were first recorded: their
// names say what they are, not when.
func firstSeenFirst(evs []model.Event) []model.Event {
	slices.SortStableFunc(evs, func(a, b model.Event) int {
		return cmp.Compare(a.FirstTimestamp.UnixNano(), b.FirstTimestamp.UnixNano())
	})
	return evs
}

// occurrences is how many times the events were recorded: a repeated
// event is one row that counts them.
func occurrences(evs []model.Event) int {
	n := 0
	for _, e := range evs {
		n += e.Count
	}
	return n
}

// simState is `illumos-sim state` of a node.
type simState struct {
	Zones []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"zones"`
	Links []struct {
		Name  string `json:"name"`
		Class string `json:"class"`
	} `json:"links"`
	Datasets []struct {
		Name string `json:"name"`
	} `json:"datasets"`
}

func (c *cluster) state(node int) (simState, string) {
	c.t.Helper()
	out, err := exec.Command(filepath.Join(binDir, "illumos-sim"), "state", "--root", c.nodes.Nodes[node].Root).Output()
	if err != nil {
		c.t.Fatalf("illumos-sim state: %v", err)
	}
	var s simState
	if err := json.Unmarshal(out, &s); err != nil {
		c.t.Fatalf("parse illumos-sim state: %v\n%s", err, out)
	}
	return s, string(out)
}

// podResources counts what zonewright created on a node: non-global
// zones, VNICs and pod datasets.
func (c *cluster) podResources(node int) (zones, vnics, datasets int) {
	s, _ := c.state(node)
	for _, z := range s.Zones {
		if z.Name != "global" {
			zones++
		}
	}
	for _, l := range s.Links {
		if l.Class == "vnic" && l.Name != nodeagent.GatewayLink { // the node's own, not a pod's
			vnics++
		}
	}
	for _, d := range s.Datasets {
		if strings.Count(d.Name, "/") >= 3 && strings.Contains(d.Name, "/zonewright/zones/") {
			datasets++
		}
	}
	return
}

func (c *cluster) nodeIndex(name string) int {
	for i, n := range c.nodes.Nodes {
		if n.Name == name {
			return i
		}
	}
	c.t.Fatalf("no node %s", name)
	return -1
}

func (c *cluster) sim(node int, args ...string) {
	c.t.Helper()
	full := append(args[:1:1], append([]string{"--root", c.nodes.Nodes[node].Root}, args[1:]...)...)
	if out, err := exec.Command(filepath.Join(binDir, "illumos-sim"), full...).CombinedOutput(); err != nil {
		c.t.Fatalf("illumos-sim %v: %v\n%s", full, err, out)
	}
}
