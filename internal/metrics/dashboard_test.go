package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/deploy"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/metrics"
)

// metricName finds the families a PromQL expression names.
var metricName = regexp.MustCompile(`\b(?:zonewright|temporal)_[a-z0-9_]+\b`)

// Every panel of the example dashboard queries something, and every
// metric it names is one serve or an agent exports: zonewright's own
// families, and the Temporal SDK's as a worker with a failing activity
// on node/n1 reports them through TemporalHandler.
func TestTheDashboardNamesMetricsThatExist(t *testing.T) {
	families := exportedFamilies(t)
	var dash struct {
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(deploy.GrafanaDashboard, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	charts := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		charts++
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: %q names no zonewright or Temporal metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				if !exists(families, n) {
					t.Errorf("panel %q: %s is not exported", p.Title, n)
				}
			}
		}
	}
	if charts < 10 {
		t.Fatalf("%d charts; the dashboard lost its panels", charts)
	}
}

// exists: name is a family, or a histogram's _bucket, _sum or _count.
func exists(families map[string]dto.MetricType, name string) bool {
	if _, ok := families[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base] == dto.MetricType_HISTOGRAM {
			return true
		}
	}
	return false
}

// exportedFamilies registers serve's and an agent's families, touches
// every one, and runs a Temporal worker through TemporalHandler until the
// SDK's families arrive.
func exportedFamilies(t *testing.T) map[string]dto.MetricType {
	reg := metrics.NewRegistry()
	s := metrics.NewServe(reg)
	n := metrics.NewNode(reg)
	reg.MustRegister(&metrics.Inventory{Counts: noCounts{}})
	s.PodStarted(time.Second, map[string]time.Duration{"install": time.Second})
	s.ScheduleAttempt(metrics.ScheduleScheduled, time.Millisecond)
	s.APIRequest("/healthz", "get", 200, time.Millisecond)
	s.WatchOpened()
	s.ImageImported(true, 1, time.Second)
	s.NodePullFinished(true, 1, time.Second)
	n.ImagePulled(true, time.Second)
	n.ImageBytes(1)
	n.Reported(metrics.ReportDelivered)
	_, _ = n.Executor(fakeExecutor{}).Run(context.Background(), illumos.Cmd{Path: "/usr/sbin/zoneadm", Args: []string{"list"}})

	tmp := devstack.StartTestTemporal(t)
	handler, closer := metrics.TemporalHandler(reg, nil)
	t.Cleanup(func() { closer.Close() })
	c, err := client.Dial(client.Options{HostPort: tmp.Address(), Namespace: tmp.Namespace(), MetricsHandler: handler,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := worker.New(c, "node/n1", worker.Options{})
	w.RegisterWorkflowWithOptions(failOnce, workflow.RegisterOptions{Name: "failOnce"})
	tries := 0
	w.RegisterActivityWithOptions(func(context.Context) error {
		if tries++; tries == 1 {
			return errors.New("the first try fails")
		}
		return nil
	}, activity.RegisterOptions{Name: "step"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	run, err := c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{TaskQueue: "node/n1"}, "failOnce")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	var families map[string]dto.MetricType
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		families = gatherTypes(t, reg)
		_, failed := families["temporal_activity_execution_failed_total"]
		_, wft := families["temporal_workflow_task_schedule_to_start_latency_seconds"]
		if failed && wft {
			return families
		}
		if time.Now().After(deadline) {
			t.Fatalf("the SDK's metrics did not arrive: %v", families)
		}
	}
}

func failOnce(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 10 * time.Millisecond}})
	return workflow.ExecuteActivity(ctx, "step").Get(ctx, nil)
}

func gatherTypes(t *testing.T, g prometheus.Gatherer) map[string]dto.MetricType {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]dto.MetricType{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetType()
	}
	return out
}

// noCounts is a store with nothing in it.
type noCounts struct{}

func (noCounts) PodsByPhase(context.Context) (map[string]int, error)  { return nil, nil }
func (noCounts) NodesByReady(context.Context) (map[string]int, error) { return nil, nil }
