package metrics_test

import (
	"context"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// serve's families and the store's counts, as a scrape sees them: counts
// from the store, zeros for phases with no pods, a clean lint.
func TestServeMetricsCountFromTheStoreAndPassTheLint(t *testing.T) {
	ctx := t.Context()
	st := storetest.New(t)
	for _, name := range []string{"a", "b"} {
		p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
			Spec: model.PodSpec{Containers: []model.Container{{Name: "c", Image: "i", Command: []string{"c"}}}}}
		if err := st.CreatePod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Pods().Modify(ctx, model.DefaultNamespace, "b", func(p *model.Pod) bool {
		p.Status.Phase = model.PodRunning
		return true
	}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, n := range []struct{ name, ready string }{{"n1", model.ConditionTrue}, {"n2", model.ConditionFalse}, {"n3", ""}} {
		node := &model.Node{Metadata: model.ObjectMeta{Name: n.name}}
		if n.ready != "" {
			node.Status.Conditions = []model.NodeCondition{{Type: model.NodeReady, Status: n.ready, LastTransitionTime: &now}}
		}
		if err := st.Nodes().Create(ctx, node); err != nil {
			t.Fatal(err)
		}
	}

	reg := metrics.NewRegistry()
	m := metrics.NewServe(reg)
	reg.MustRegister(&metrics.Inventory{Counts: st})
	m.PodStarted(10*time.Second, map[string]time.Duration{"scheduling": time.Second, "install": 9 * time.Second})
	m.ScheduleAttempt(metrics.ScheduleScheduled, 3*time.Millisecond)
	m.APIRequest("/api/v1/namespaces/:ns/pods", "create", 201, 20*time.Millisecond)
	m.APIRequest("/api/v1/pods", "watch", 200, time.Minute)
	m.WatchOpened()
	m.ImageImported(true, 1<<20, time.Second)

	for series, want := range map[string]float64{
		`zonewright_pods{phase="Pending"}`:                                            1,
		`zonewright_pods{phase="Running"}`:                                            1,
		`zonewright_pods{phase="Failed"}`:                                             0,
		`zonewright_nodes{ready="true"}`:                                              1,
		`zonewright_nodes{ready="false"}`:                                             1,
		`zonewright_nodes{ready="unknown"}`:                                           1,
		`zonewright_api_open_watches`:                                                 1,
		`zonewright_pod_startup_duration_seconds_count`:                               1,
		`zonewright_api_requests_total{code="200",route="/api/v1/pods",verb="watch"}`: 1,
	} {
		if got := scrape(t, reg, series); got != want {
			t.Errorf("%s = %v; want %v", series, got, want)
		}
	}
	// A watch streams as long as it is open: its time is no latency.
	if got := scrape(t, reg, `zonewright_api_request_duration_seconds_count{route="/api/v1/pods",verb="watch"}`); got != -1 {
		t.Errorf("a watch's duration was observed as a request latency")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
}

// scrape reads one series' value from reg's /metrics handler, -1 when
// it is absent. series is written as the exposition writes it (labels in
// name order).
func scrape(t *testing.T, reg *prometheus.Registry, series string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

func TestHostCommandsAreTimedByCommandAndOutcome(t *testing.T) {
	reg := metrics.NewRegistry()
	n := metrics.NewNode(reg)
	exec := n.Executor(fakeExecutor{})
	ctx := context.Background()
	for _, c := range []illumos.Cmd{
		{Path: "/usr/sbin/zoneadm", Args: []string{"-z", "list", "list", "-p"}}, // a zone named list
		{Path: "/usr/sbin/zfs", Args: []string{"fail", "send", "tank/x@base"}},
		{Path: "/usr/sbin/zfs", Args: []string{"timeout", "tank/not-a-verb"}},
	} {
		_, _ = exec.Run(ctx, c)
	}
	for _, series := range []string{`zonewright_host_command_duration_seconds_count{command="zoneadm",outcome="ok",subcommand="list"}`,
		`zonewright_host_command_duration_seconds_count{command="zfs",outcome="failed",subcommand="send"}`,
		`zonewright_host_command_duration_seconds_count{command="zfs",outcome="timeout",subcommand=""}`} {
		if got := scrape(t, reg, series); got != 1 {
			t.Errorf("%s = %v; want 1", series, got)
		}
	}
	got, err := testutil.GatherAndCount(reg, "zonewright_host_command_duration_seconds")
	if err != nil || got != 3 {
		t.Fatalf("%d series of host commands (%v); want zoneadm list ok, zfs send failed, zfs timeout", got, err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
}

// fakeExecutor fails as its first argument says.
type fakeExecutor struct{}

func (fakeExecutor) Run(_ context.Context, c illumos.Cmd) (illumos.Result, error) {
	switch c.Args[0] {
	case "fail":
		return illumos.Result{ExitCode: 1}, &illumos.ExecError{Argv: c.Argv(), ExitCode: 1}
	case "timeout":
		return illumos.Result{ExitCode: -1}, &illumos.ExecError{Argv: c.Argv(), ExitCode: -1, TimedOut: true, Err: context.DeadlineExceeded}
	}
	return illumos.Result{}, nil
}
