package agent_test

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	tworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/simtest"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

func TestMain(m *testing.M) {
	os.Exit(simtest.Main(func() int { return pgtest.Main(m) }))
}

func hasDataset(st simtest.State, name string) bool {
	return slices.ContainsFunc(st.Datasets, func(d simtest.Dataset) bool { return d.Name == name })
}

// newStore is a migrated store of a database of the test's own, and a
// logger for warnings on the test's output.
func newStore(t *testing.T) (*store.Store, *slog.Logger) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	dbURL := pgtest.NewDatabase(t)
	if err := store.MigrateUp(t.Context(), dbURL, log); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st, log
}

// runAgent starts the agent; the returned stop cancels it and returns
// what Run returned.
func runAgent(t *testing.T, cfg agent.Config) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, cfg) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(60 * time.Second):
			t.Fatal("the agent did not stop within 60s of its cancel")
			return nil
		}
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// testAPI is the control plane's API over a store, as the agent reaches
// it: HTTPS with a cluster CA, which signs the node's certificate when it
// joins with the join token.
type testAPI struct {
	url, caFile string
	tokens      *auth.Tokens
	admin       *http.Client // a cluster-admin's client
}

// connect points cfg at the API, with a state directory to join from and
// a join token of its own (one joins once).
func (a testAPI) connect(t *testing.T, cfg agent.Config) agent.Config {
	t.Helper()
	join, _, err := a.tokens.IssueJoin(context.Background(), auth.Identity{}, cfg.Node, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg.JoinTokenFile = filepath.Join(t.TempDir(), "join.token")
	if err := os.WriteFile(cfg.JoinTokenFile, []byte(join), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.APIURL, cfg.APICAFile, cfg.StateDir = a.url, a.caFile, t.TempDir()
	return cfg
}

func startAPI(t *testing.T, st *store.Store, log *slog.Logger) testAPI {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir, "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{Store: st, Logger: log, CA: ca})
	hs := httptest.NewUnstartedServer(srv.Handler())
	certPEM, keyPEM, err := ca.ServerCert([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool()}
	hs.EnableHTTP2 = true // as the API's own server does over TLS
	hs.StartTLS()
	t.Cleanup(hs.Close)
	t.Cleanup(srv.CloseWatches)
	tokens := &auth.Tokens{Pool: st.Pool()}
	admin, _, err := tokens.Issue(context.Background(), auth.RoleClusterAdmin, "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return testAPI{url: hs.URL, caFile: filepath.Join(dir, "ca.crt"), tokens: tokens,
		admin: &http.Client{Transport: auth.Bearer{Token: admin, Next: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}}}
}

// waitNode waits until the Node satisfies ok.
func waitNode(t *testing.T, st *store.Store, what string, ok func(*model.Node) bool) *model.Node {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last *model.Node
	var lastErr error
	for time.Now().Before(deadline) {
		n, err := st.Nodes().Get(context.Background(), "", "node1")
		if err == nil && ok(n) {
			return n
		}
		last, lastErr = n, err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: node %+v, %v", what, last, lastErr)
	return nil
}

// createDatasets is a workflow on a test task queue that runs the host
// activity CreateDatasets on a node's task queue, the way the pod
// lifecycle does.
func createDatasets(ctx workflow.Context, node string, s hostapi.PodSandbox) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           taskqueue.Node(node),
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	return workflow.ExecuteActivity(ctx, "CreateDatasets", s).Get(ctx, nil)
}

func TestAgentRegistersHeartbeatsAndRunsHostActivities(t *testing.T) {
	ctx := t.Context()
	st, log := newStore(t)
	tmp := devstack.StartTestTemporal(t)
	node := simtest.NewNode(t, "node1") // its state root's name, node1, is its host name

	api := startAPI(t, st, log)
	cfg := api.connect(t, agent.Config{
		Node:                   "node1",
		TemporalAddress:        tmp.Address(),
		TemporalNamespace:      tmp.Namespace(),
		PodCIDR:                "127.10.9.0/24",
		BinDir:                 node.Bin,
		ImageDir:               filepath.Join(node.Root, "fs/var/zonewright/images"),
		ZvolDir:                filepath.Join(node.Root, "fs/dev/zvol/rdsk"),
		SystemReservedMilliCPU: 500,
		SystemReservedMemory:   1 << 30,
		HeartbeatInterval:      200 * time.Millisecond,
		WorkerStopTimeout:      5 * time.Second,
		Version:                "test",
		Logger:                 log,
	})

	// A configuration without the API is refused before anything runs.
	bad := cfg
	bad.APIURL = ""
	if err := agent.Run(ctx, bad); err == nil || !strings.Contains(err.Error(), "--api-url") {
		t.Errorf("the agent started without an API URL: %v", err)
	}

	reg := metrics.NewRegistry()
	first := cfg
	first.Metrics = reg
	stop := runAgent(t, first)
	n := waitNode(t, st, "registered and ready", func(n *model.Node) bool {
		c := n.Condition(model.NodeReady)
		return c != nil && c.Status == model.ConditionTrue
	})
	uid := n.Metadata.UID
	// The claims' space: the volumes dataset's used and available bytes.
	storage, err := model.Bytes(n.Status.Allocatable[model.ResourceStorage])
	if err != nil || storage < 1<<30 || n.Status.Capacity[model.ResourceStorage] != n.Status.Allocatable[model.ResourceStorage] {
		t.Errorf("storage: capacity %q, allocatable %q", n.Status.Capacity[model.ResourceStorage], n.Status.Allocatable[model.ResourceStorage])
	}
	delete(n.Status.Capacity, model.ResourceStorage)
	delete(n.Status.Allocatable, model.ResourceStorage)
	if want := (model.ResourceList{"cpu": "8", "memory": "32Gi", "pods": "110"}); !equalLists(n.Status.Capacity, want) {
		t.Errorf("capacity = %v, want %v", n.Status.Capacity, want)
	}
	if want := (model.ResourceList{"cpu": "7500m", "memory": "31Gi", "pods": "110"}); !equalLists(n.Status.Allocatable, want) {
		t.Errorf("allocatable = %v, want %v", n.Status.Allocatable, want)
	}
	if info := n.Status.NodeInfo; !slices.Equal(info.ZoneBrands, []string{"sparse", "ipkg", "lx", "bhyve"}) ||
		info.AgentVersion != "test" || info.OSRelease != "omnios-r151054" || info.KernelVer != "SunOS 5.11" {
		t.Errorf("node info = %+v", info)
	}
	if n.Spec.PodCIDR != "127.10.9.0/24" {
		t.Errorf("pod CIDR = %q", n.Spec.PodCIDR)
	}
	for k, v := range map[string]string{"zonewright.io/hostname": "node1", "zonewright.io/brand-sparse": "true", "zonewright.io/brand-bhyve": "true"} {
		if n.Metadata.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, n.Metadata.Labels[k], v, n.Metadata.Labels)
		}
	}
	if n.Metadata.Annotations["zonewright.io/zones"] != "none" {
		t.Errorf("annotations = %v", n.Metadata.Annotations)
	}
	ready := n.Condition(model.NodeReady)
	if ready.Reason != "AgentReady" || ready.LastHeartbeatTime == nil || ready.LastTransitionTime == nil {
		t.Errorf("Ready = %+v", ready)
	}

	// The host is prepared.
	hostState := node.State(t)
	for _, ds := range []string{"tank/zonewright/zones", "tank/zonewright/images", "tank/zonewright/volumes"} {
		if !hasDataset(hostState, ds) {
			t.Errorf("no dataset %s: %+v", ds, hostState.Datasets)
		}
	}
	if fi, err := os.Stat(cfg.ImageDir); err != nil || !fi.IsDir() {
		t.Errorf("no image directory: %v", err)
	}
	if !slices.ContainsFunc(hostState.Links, func(l simtest.Link) bool {
		return l.Name == "zwstub0" && l.Class == "etherstub"
	}) {
		t.Errorf("no etherstub: %+v", hostState.Links)
	}
	// The pods' gateway: a VNIC on the etherstub holding the CIDR's first
	// address in the global zone. The agent prepares it right after
	// registering, from the CIDR the control plane assigned: it may still
	// be coming.
	holdsGateway := func(s simtest.State) bool {
		return slices.ContainsFunc(s.Zones, func(z simtest.Zone) bool {
			return z.Name == "global" && slices.Contains(z.Addresses, simtest.Address{Obj: agent.GatewayLink + "/v4", Addr: "127.10.9.1/24"})
		})
	}
	for deadline := time.Now().Add(10 * time.Second); !holdsGateway(hostState) && time.Now().Before(deadline); hostState = node.State(t) {
		time.Sleep(50 * time.Millisecond)
	}
	if !slices.ContainsFunc(hostState.Links, func(l simtest.Link) bool { return l.Name == agent.GatewayLink && l.Class == "vnic" }) {
		t.Errorf("no gateway VNIC %s: %+v", agent.GatewayLink, hostState.Links)
	}
	if !holdsGateway(hostState) {
		t.Errorf("the global zone does not hold the pods' gateway 127.10.9.1/24 on %s: %+v", agent.GatewayLink, hostState.Zones)
	}

	// Heartbeats renew the lease; the Node is not written while its
	// status stays the same (once the worker polls, its message is final).
	waitNode(t, st, "the worker polling", func(n *model.Node) bool {
		c := n.Condition(model.NodeReady)
		return c != nil && !strings.Contains(c.Message, "not polling")
	})
	lease := waitLease(t, st, time.Time{})
	rv := nodeVersion(t, st)
	for range 3 {
		lease = waitLease(t, st, *lease.Spec.RenewTime)
	}
	if lease.Spec.HolderIdentity != "node1" || lease.Spec.LeaseDurationSeconds < 1 {
		t.Errorf("lease = %+v", lease.Spec)
	}
	if now := nodeVersion(t, st); now != rv {
		t.Errorf("the Node was written (resourceVersion %s → %s) by heartbeats that changed nothing", rv, now)
	}
	if c := n.Condition(model.NodeReady); !c.LastTransitionTime.Equal(*ready.LastTransitionTime) {
		t.Errorf("lastTransitionTime moved from %v to %v without a transition", ready.LastTransitionTime, c.LastTransitionTime)
	}

	// A host activity through Temporal: a workflow on another task queue
	// sends CreateDatasets to node/node1, which only the agent polls.
	c, err := client.Dial(client.Options{HostPort: tmp.Address(), Namespace: tmp.Namespace(),
		Logger: sdklog.NewStructuredLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := tworker.New(c, "agent-test", tworker.Options{})
	w.RegisterWorkflow(createDatasets)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s := hostapi.PodSandbox{Namespace: "default", Name: "web", UID: "uid-web", IP: "127.10.9.2", PrefixLen: 24}
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "agent-test-create-datasets", TaskQueue: "agent-test"},
		createDatasets, "node1", s)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := run.Get(wctx, nil); err != nil {
		t.Fatalf("CreateDatasets through the agent's worker: %v", err)
	}
	if ds := "tank/zonewright/zones/" + s.ZoneName(); !hasDataset(node.State(t), ds) {
		t.Errorf("dataset %s missing after CreateDatasets ran on the node", ds)
	}

	// The agent's metrics: the node worker's Temporal SDK metrics on its
	// own task queue, the host commands it ran; a clean exposition.
	assertAgentMetrics(t, reg)

	// The zone summary follows the host's zones.
	h := illumos.Host{Runner: &illumos.Runner{BinDir: node.Bin}}
	if err := h.Zonecfg().Create(ctx, illumos.ZoneConfig{Name: "z1", Zonepath: "/zonewright/zones/z1"}); err != nil {
		t.Fatal(err)
	}
	waitNode(t, st, "zones summary", func(n *model.Node) bool {
		return n.Metadata.Annotations["zonewright.io/zones"] == "configured=1"
	})

	// Cancelled, the agent stops cleanly.
	if err := stop(); err != nil {
		t.Fatalf("agent stopped with %v, want nil", err)
	}

	// A second start adopts the same Node: no duplicate, same uid, an
	// operator's label kept.
	n, err = st.Nodes().Get(ctx, "", "node1")
	if err != nil {
		t.Fatal(err)
	}
	n.Metadata.Labels["team"] = "infra"
	if err := st.Nodes().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	last := *n.Condition(model.NodeReady).LastHeartbeatTime
	// Without --pod-cidr now: the node keeps the one it holds.
	cfg.PodCIDR = ""
	stop = runAgent(t, cfg)
	n = waitNode(t, st, "heartbeats after a restart", func(n *model.Node) bool {
		c := n.Condition(model.NodeReady)
		return c != nil && c.LastHeartbeatTime.After(last)
	})
	if n.Metadata.UID != uid || n.Metadata.Labels["team"] != "infra" || n.Spec.PodCIDR != "127.10.9.0/24" {
		t.Errorf("after a restart: uid %s (was %s), labels %v, pod CIDR %s", n.Metadata.UID, uid, n.Metadata.Labels, n.Spec.PodCIDR)
	}
	list, err := st.Nodes().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d nodes after a restart, want 1", len(list.Items))
	}
	if err := stop(); err != nil {
		t.Fatalf("second agent stopped with %v, want nil", err)
	}

	// Configured with another pod CIDR than the one it holds, the node
	// refuses it: it keeps the assigned one and says so (condition,
	// event). Revert nodestatus.go's checkConfiguredPodCIDR and the
	// PodCIDRMismatch condition in apply to see this fail.
	cfg.PodCIDR = "127.10.8.0/24"
	stop = runAgent(t, cfg)
	n = waitNode(t, st, "the configured pod CIDR refused", func(n *model.Node) bool {
		c := n.Condition(agent.ConditionPodCIDRMismatch)
		return c != nil && c.Status == model.ConditionTrue
	})
	if c := n.Condition(agent.ConditionPodCIDRMismatch); n.Spec.PodCIDR != "127.10.9.0/24" || c.Reason != agent.ReasonPodCIDRNotAssigned ||
		!strings.Contains(c.Message, "127.10.8.0/24") || !strings.Contains(c.Message, "uses 127.10.9.0/24 only") {
		t.Errorf("pod CIDR %s, condition %+v", n.Spec.PodCIDR, c)
	}
	// The event is recorded beside the condition, not before it: wait
	// for it before stopping the agent.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		events, err := st.Events().List(ctx, store.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(events.Items, func(e model.Event) bool {
			return e.Reason == agent.ReasonPodCIDRNotAssigned && e.Type == model.EventWarning && e.InvolvedObject.Name == "node1"
		}) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("no %s event on node1", agent.ReasonPodCIDRNotAssigned)
			break
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("agent with another pod CIDR stopped with %v, want nil", err)
	}
	cfg.PodCIDR = ""

	// Deleted (its pod CIDR freed, its certificate revoked) while the
	// agent was away, the node joins again with a new token in place of
	// its certificate, and registers asking for the CIDR its host's
	// gateway holds, not the control plane's first free one.
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, cfg.APIURL+"/api/v1/nodes/node1", nil)
	resp, err := api.admin.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete node1: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := os.Remove(filepath.Join(cfg.StateDir, agent.NodeCertFile)); err != nil {
		t.Fatal(err)
	}
	rejoin := api.connect(t, agent.Config{Node: cfg.Node})
	cfg.JoinTokenFile = rejoin.JoinTokenFile
	stop = runAgent(t, cfg)
	n = waitNode(t, st, "registered again", func(n *model.Node) bool { return n.Metadata.UID != uid && n.Ready() })
	if n.Spec.PodCIDR != "127.10.9.0/24" {
		t.Errorf("registered again with pod CIDR %s; want the host's 127.10.9.0/24", n.Spec.PodCIDR)
	}
	if err := stop(); err != nil {
		t.Fatalf("third agent stopped with %v, want nil", err)
	}
}

// waitLease waits for node1's lease renewed after after.
func waitLease(t *testing.T, st *store.Store, after time.Time) *model.Lease {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		l, _, err := st.NodeLease(context.Background(), "node1")
		if err == nil && l.Spec.RenewTime.After(after) {
			return l
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("node1's lease was not renewed after %v", after)
	return nil
}

func nodeVersion(t *testing.T, st *store.Store) string {
	t.Helper()
	n, err := st.Nodes().Get(context.Background(), "", "node1")
	if err != nil {
		t.Fatal(err)
	}
	return n.Metadata.ResourceVersion
}

func equalLists(a, b model.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// assertAgentMetrics reads the agent's /metrics handler over HTTP: the
// node worker's schedule-to-start latency on node/node1 (the SDK's
// metrics reach the registry every second), the host commands run, and
// not one Prometheus lint problem.
func assertAgentMetrics(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	srv := httptest.NewServer(metrics.Handler(reg))
	t.Cleanup(srv.Close)
	// Each series by its name and some of its labels.
	want := [][]string{
		{"temporal_activity_schedule_to_start_latency_seconds_count{", `activity_type="CreateDatasets"`, `task_queue="node/node1"`},
		{"zonewright_host_command_duration_seconds_count{", `command="zfs"`, `outcome="ok"`},
		{"zonewright_host_command_duration_seconds_count{", `command="zoneadm"`, `outcome="ok"`},
	}
	has := func(body string, series []string) bool {
		return slices.ContainsFunc(strings.Split(body, "\n"), func(line string) bool {
			return strings.HasPrefix(line, series[0]) && !slices.ContainsFunc(series[1:], func(l string) bool { return !strings.Contains(line, l) })
		})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		resp, err := srv.Client().Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		missing := slices.IndexFunc(want, func(w []string) bool { return !has(string(b), w) })
		if missing < 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's metrics lack %v:\n%s", want[missing], b)
		}
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("the agent's metrics fail the lint: %v %+v", err, problems)
	}
}
