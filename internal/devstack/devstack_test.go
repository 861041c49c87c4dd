package devstack_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/devstack"
)

// The attributes `zonewright dev` registers.
var zwAttributes = map[string]enumspb.IndexedValueType{
	"ZwNamespace": enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"ZwPod":       enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"ZwNode":      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	"ZwPhase":     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
}

func withZwAttributes(cfg *devstack.TemporalConfig) { cfg.SearchAttributes = zwAttributes }

func TestTemporalServesNamespaceAttributesWorkflowsAndUI(t *testing.T) {
	start := time.Now()
	srv := devstack.StartTestTemporal(t, withZwAttributes)
	t.Logf("server ready in %v, RSS %s", time.Since(start).Round(time.Millisecond), rss(t))
	c := dial(t, srv)

	t.Run("the namespace exists", func(t *testing.T) {
		resp, err := c.WorkflowService().DescribeNamespace(context.Background(),
			&workflowservice.DescribeNamespaceRequest{Namespace: devstack.DefaultNamespace})
		if err != nil {
			t.Fatalf("describe namespace: %v", err)
		}
		if got := resp.GetNamespaceInfo().GetName(); got != "default" {
			t.Errorf("namespace name = %q, want default", got)
		}
	})

	t.Run("the search attributes are registered as keywords", func(t *testing.T) {
		assertAttributes(t, c, zwAttributes)
	})

	t.Run("a workflow with an activity runs to completion", func(t *testing.T) {
		const queue = "devstack-greet"
		runWorker(t, c, queue)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "greet/1", TaskQueue: queue}, greetWorkflow, "zone")
		if err != nil {
			t.Fatalf("start workflow: %v", err)
		}
		var got string
		if err := run.Get(ctx, &got); err != nil {
			t.Fatalf("workflow result: %v", err)
		}
		if got != "hello zone" {
			t.Errorf("result = %q, want %q", got, "hello zone")
		}
	})

	t.Run("a workflow that upserts ZwPod is found by a list query on it", func(t *testing.T) {
		const queue = "devstack-tag"
		runWorker(t, c, queue)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "pod/default/web", TaskQueue: queue}, tagPodWorkflow, "web")
		if err != nil {
			t.Fatalf("start workflow: %v", err)
		}
		if err := run.Get(ctx, nil); err != nil {
			t.Fatalf("workflow result: %v", err)
		}
		ids := waitForList(t, c, `ZwPod = "web"`, 1)
		if len(ids) != 1 || ids[0] != "pod/default/web" {
			t.Errorf("ZwPod = \"web\" lists %v, want [pod/default/web]", ids)
		}
		if ids := list(t, c, `ZwPod = "db"`); len(ids) != 0 {
			t.Errorf("ZwPod = \"db\" lists %v, want none", ids)
		}
	})

	t.Run("the web UI serves its page and the namespaces through its API", func(t *testing.T) {
		uiAddr := freeAddr(t)
		ui, err := devstack.StartUI(devstack.UIConfig{
			Address:         uiAddr,
			TemporalAddress: srv.Address(),
			Namespace:       devstack.DefaultNamespace,
		})
		if err != nil {
			t.Fatalf("start ui: %v", err)
		}
		t.Cleanup(func() {
			if err := ui.Stop(); err != nil {
				t.Errorf("stop ui: %v", err)
			}
			if err := devstack.CheckPortFree(uiAddr); err != nil {
				t.Errorf("ui port after stop: %v", err)
			}
		})
		if ui.URL() != "http://"+uiAddr {
			t.Errorf("URL = %q, want http://%s", ui.URL(), uiAddr)
		}

		status, ctype, body := get(t, ui.URL()+"/")
		if status != http.StatusOK || !strings.HasPrefix(ctype, "text/html") {
			t.Fatalf("GET / = %d %s", status, ctype)
		}
		if !strings.Contains(strings.ToLower(body), "<html") {
			t.Errorf("GET / is not an HTML page: %.200s", body)
		}

		status, _, body = get(t, ui.URL()+"/api/v1/namespaces")
		if status != http.StatusOK {
			t.Fatalf("GET /api/v1/namespaces = %d: %.300s", status, body)
		}
		var resp struct {
			Namespaces []struct {
				NamespaceInfo struct{ Name string } `json:"namespaceInfo"`
			} `json:"namespaces"`
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatalf("decode namespaces: %v: %.300s", err, body)
		}
		var names []string
		for _, ns := range resp.Namespaces {
			names = append(names, ns.NamespaceInfo.Name)
		}
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " default ") {
			t.Errorf("UI API lists namespaces %v, want default among them", names)
		}
	})
}

func TestRestartOnTheSameDataDirKeepsHistoryAndAttributes(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := devstack.TemporalConfig{Address: addr, DataDir: dir, SearchAttributes: zwAttributes}

	first := start(t, cfg)
	c := dial(t, first)
	const queue = "devstack-restart"
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterActivity(greetActivity)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "greet/restart", TaskQueue: queue}, greetWorkflow, "again")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("workflow result: %v", err)
	}
	w.Stop()
	c.Close()
	if err := first.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := devstack.CheckPortFree(addr); err != nil {
		t.Fatalf("frontend port after stop: %v", err)
	}
	// No SDK worker of the server's own (scanners, parent close policy) is
	// left polling: after a restart on the same port it would poll the new
	// server with the old one's closed resources.
	if stacks := pollerStacks(2 * time.Second); stacks != "" {
		t.Errorf("SDK pollers still running after stop:\n%s", stacks)
	}

	// Same directory, same port, one attribute more: the old ones are left
	// alone and the new one is added to the existing namespace.
	more := map[string]enumspb.IndexedValueType{"ZwImage": enumspb.INDEXED_VALUE_TYPE_KEYWORD}
	for k, v := range zwAttributes {
		more[k] = v
	}
	cfg.SearchAttributes = more
	restart := time.Now()
	second := start(t, cfg)
	t.Logf("restart (with a new search attribute) ready in %v", time.Since(restart).Round(time.Millisecond))
	c = dial(t, second)

	desc, err := c.DescribeWorkflowExecution(ctx, "greet/restart", "")
	if err != nil {
		t.Fatalf("describe workflow after restart: %v", err)
	}
	if got := desc.GetWorkflowExecutionInfo().GetStatus(); got != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("workflow status after restart = %v, want completed", got)
	}
	events := 0
	for it := c.GetWorkflowHistory(ctx, "greet/restart", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT); it.HasNext(); {
		if _, err := it.Next(); err != nil {
			t.Fatalf("read history after restart: %v", err)
		}
		events++
	}
	if events < 5 {
		t.Errorf("history after restart has %d events, want the whole run", events)
	}
	assertAttributes(t, c, more)

	// The new attribute is usable by workflows right away.
	const queue2 = "devstack-restart-tag"
	runWorker(t, c, queue2)
	run, err = c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "image/alpine", TaskQueue: queue2}, tagImageWorkflow, "alpine")
	if err != nil {
		t.Fatalf("start workflow: %v", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("workflow upserting the new attribute: %v", err)
	}
	if ids := waitForList(t, c, `ZwImage = "alpine"`, 1); len(ids) != 1 {
		t.Errorf("ZwImage = \"alpine\" lists %v", ids)
	}

	// A type clash with an existing attribute is reported, not ignored.
	if err := second.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	cfg.SearchAttributes = map[string]enumspb.IndexedValueType{"ZwPod": enumspb.INDEXED_VALUE_TYPE_INT}
	ctx3, cancel3 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel3()
	third, err := devstack.StartTemporal(ctx3, cfg)
	if err == nil {
		_ = third.Stop()
		t.Fatal("start with ZwPod as Int on a database where it is Keyword succeeded, want an error")
	}
	if !strings.Contains(err.Error(), "ZwPod") {
		t.Errorf("type clash error does not name the attribute: %v", err)
	}
	if err := devstack.CheckPortFree(addr); err != nil {
		t.Errorf("frontend port after a failed start: %v", err)
	}
}

func TestATakenPortIsAClearErrorBeforeAnythingStarts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	taken := ln.Addr().String()

	if err := devstack.CheckPortFree(taken); err == nil {
		t.Fatalf("CheckPortFree(%s) = nil for a port in use", taken)
	}

	dataDir := filepath.Join(t.TempDir(), "temporal")
	_, err = devstack.StartTemporal(context.Background(), devstack.TemporalConfig{Address: taken, DataDir: dataDir})
	var inUse *devstack.PortInUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("StartTemporal on a taken port: err = %v, want a PortInUseError", err)
	}
	if want := taken + " is already in use (by another dev stack?)"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if _, statErr := os.Stat(dataDir); !os.IsNotExist(statErr) {
		t.Errorf("data dir was created before the port check (stat: %v)", statErr)
	}

	_, err = devstack.StartUI(devstack.UIConfig{Address: taken, TemporalAddress: "127.0.0.1:1"})
	if !errors.As(err, &inUse) {
		t.Errorf("StartUI on a taken port: err = %v, want a PortInUseError", err)
	}
}

func TestTemporalCountsFrontendRequestsWhenAsked(t *testing.T) {
	srv := devstack.StartTestTemporal(t, func(cfg *devstack.TemporalConfig) { cfg.CountRequests = true })
	c := dial(t, srv)
	// A method no worker calls: DescribeNamespace, which every SDK worker
	// calls as it starts, was counted once more when the server's own
	// workers started during the test.
	const method = "/temporal.api.workflowservice.v1.WorkflowService/GetSearchAttributes"
	before := srv.FrontendRequests()[method]
	for range 3 {
		if _, err := c.WorkflowService().GetSearchAttributes(context.Background(),
			&workflowservice.GetSearchAttributesRequest{}); err != nil {
			t.Fatalf("get search attributes: %v", err)
		}
	}
	if got := srv.FrontendRequests()[method] - before; got != 3 {
		t.Errorf("%s counted %d times, want 3", method, got)
	}
}

func greetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, greetActivity, name).Get(ctx, &out)
	return out, err
}

func greetActivity(ctx context.Context, name string) (string, error) {
	activity.GetLogger(ctx).Debug("greeting", "name", name)
	return "hello " + name, nil
}

func tagPodWorkflow(ctx workflow.Context, pod string) error {
	return workflow.UpsertTypedSearchAttributes(ctx,
		temporal.NewSearchAttributeKeyKeyword("ZwNamespace").ValueSet("default"),
		temporal.NewSearchAttributeKeyKeyword("ZwPod").ValueSet(pod),
	)
}

func tagImageWorkflow(ctx workflow.Context, image string) error {
	return workflow.UpsertTypedSearchAttributes(ctx, temporal.NewSearchAttributeKeyKeyword("ZwImage").ValueSet(image))
}

func start(t *testing.T, cfg devstack.TemporalConfig) *devstack.Temporal {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := devstack.StartTemporal(ctx, cfg)
	if err != nil {
		t.Fatalf("start temporal: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop temporal: %v", err)
		}
	})
	return srv
}

func dial(t *testing.T, srv *devstack.Temporal) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: srv.Namespace(), Logger: quietLogger{}})
	if err != nil {
		t.Fatalf("dial %s: %v", srv.Address(), err)
	}
	t.Cleanup(c.Close)
	return c
}

func runWorker(t *testing.T, c client.Client, queue string) {
	t.Helper()
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterWorkflow(tagPodWorkflow)
	w.RegisterWorkflow(tagImageWorkflow)
	w.RegisterActivity(greetActivity)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker on %s: %v", queue, err)
	}
	t.Cleanup(w.Stop)
}

func assertAttributes(t *testing.T, c client.Client, want map[string]enumspb.IndexedValueType) {
	t.Helper()
	resp, err := c.OperatorService().ListSearchAttributes(context.Background(),
		&operatorservice.ListSearchAttributesRequest{Namespace: devstack.DefaultNamespace})
	if err != nil {
		t.Fatalf("list search attributes: %v", err)
	}
	got := resp.GetCustomAttributes()
	for name, typ := range want {
		if got[name] != typ {
			t.Errorf("search attribute %s = %v, want %v", name, got[name], typ)
		}
	}
}

func list(t *testing.T, c client.Client, query string) []string {
	t.Helper()
	resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: devstack.DefaultNamespace,
		Query:     query,
	})
	if err != nil {
		t.Fatalf("list %q: %v", query, err)
	}
	var ids []string
	for _, e := range resp.GetExecutions() {
		ids = append(ids, e.GetExecution().GetWorkflowId())
	}
	return ids
}

// waitForList polls a list query until it returns n executions: visibility
// is written asynchronously after the workflow's own transaction.
func waitForList(t *testing.T, c client.Client, query string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids := list(t, c, query)
		if len(ids) >= n || time.Now().After(deadline) {
			return ids
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html,application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// pollerStacks waits up to d for every SDK worker poller goroutine to end and
// returns the stacks of those still running.
func pollerStacks(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		var sb strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&sb, 1)
		var found []string
		for _, g := range strings.Split(sb.String(), "\n\n") {
			if strings.Contains(g, "(*baseWorker).runPoller") || strings.Contains(g, "(*baseWorker).runAutoscalingPoller") {
				found = append(found, g)
			}
		}
		if len(found) == 0 || time.Now().After(deadline) {
			return strings.Join(found, "\n\n")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rss is this process's resident memory, from /proc (Linux only).
func rss(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// quietLogger drops the SDK client's info chatter in test output.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(msg string, kv ...any) {
	// Errors of a stopping worker after the test are expected; keep quiet.
}
