package e2e_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	prommodel "github.com/prometheus/common/model"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeclient"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// startupPhases are the phases a pod's start divides into.
var startupPhases = []string{controlapi.StartupScheduling, controlapi.StartupImage, controlapi.StartupInstall,
	controlapi.StartupBoot, controlapi.StartupNetwork, controlapi.StartupContainers, controlapi.StartupReady}

// TestMetricsMeasureEveryPodsStartOnce reads /metrics through the API as a
// cluster-admin while pods start: each start is observed exactly once, its
// phases add up to it, the exposition passes Prometheus' lint, and a
// namespace's viewer may not read it.
func TestMetricsMeasureEveryPodsStartOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	before := c.metrics()
	const pods = 3
	for i := range pods - 1 {
		c.createPod(sleepPod(fmt.Sprintf("m%d", i), "sparse", ""))
	}
	// One with a readiness probe: Ready comes after its containers run.
	c.createPod(fmt.Sprintf(`{"metadata":{"name":"m%d"},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","3600"],
	  "readinessProbe":{"exec":{"command":["true"]},"periodSeconds":1}}]}}`, pods-1))
	for i := range pods {
		c.waitPhase(fmt.Sprintf("m%d", i), model.PodRunning, true, 60*time.Second)
	}
	// The start is measured by the write that made the pod Ready, an
	// instant after the API could show it.
	var after map[string]*dto.MetricFamily
	c.eventually(5*time.Second, "three starts measured", func() bool {
		after = c.metrics()
		return histogramCount(after, "zonewright_pod_startup_duration_seconds", "", "") >= histogramCount(before, "zonewright_pod_startup_duration_seconds", "", "")+pods
	})
	// Ready pods report nothing more: a scrape a moment later counts the same.
	time.Sleep(time.Second)
	after = c.metrics()
	starts := histogramCount(after, "zonewright_pod_startup_duration_seconds", "", "") - histogramCount(before, "zonewright_pod_startup_duration_seconds", "", "")
	if starts != pods {
		t.Fatalf("%d starts measured for %d pods", starts, pods)
	}
	total := histogramSum(after, "zonewright_pod_startup_duration_seconds", "", "") - histogramSum(before, "zonewright_pod_startup_duration_seconds", "", "")
	var phases float64
	var each []string
	for _, p := range startupPhases {
		n := histogramCount(after, "zonewright_pod_startup_phase_duration_seconds", "phase", p) -
			histogramCount(before, "zonewright_pod_startup_phase_duration_seconds", "phase", p)
		if n != pods {
			t.Errorf("phase %s observed %d times; want once per pod", p, n)
		}
		d := histogramSum(after, "zonewright_pod_startup_phase_duration_seconds", "phase", p) -
			histogramSum(before, "zonewright_pod_startup_phase_duration_seconds", "phase", p)
		phases += d
		each = append(each, fmt.Sprintf("%s %.3fs", p, d))
	}
	if total <= 0 || phases < total*0.95 || phases > total*1.05 {
		t.Fatalf("the phases add up to %.3fs, the starts to %.3fs: more than 5%% apart", phases, total)
	}
	if ready := histogramSum(after, "zonewright_pod_startup_phase_duration_seconds", "phase", controlapi.StartupReady) -
		histogramSum(before, "zonewright_pod_startup_phase_duration_seconds", "phase", controlapi.StartupReady); ready <= 0 {
		t.Errorf("the probed pod's wait for Ready is not in the ready phase")
	}
	t.Logf("%d starts took %.3fs in all; phases %.3fs: %s", pods, total, phases, strings.Join(each, ", "))

	// The rest of serve's families, and the Temporal SDK's.
	for _, want := range []struct {
		family, label, value string
		atLeast              float64
	}{
		{"zonewright_pods", "phase", "Running", pods},
		{"zonewright_nodes", "ready", "true", 1},
		{"zonewright_schedule_attempts_total", "result", "scheduled", pods},
		{"zonewright_api_requests_total", "route", "/api/v1/namespaces/:ns/pods", pods},
		{"temporal_request_total", "", "", 1},
	} {
		if got := sum(after, want.family, want.label, want.value); got < want.atLeast {
			t.Errorf("%s{%s=%q} = %v; want at least %v", want.family, want.label, want.value, got, want.atLeast)
		}
	}
	if _, ok := after["temporal_workflow_task_schedule_to_start_latency_seconds"]; !ok {
		t.Errorf("the control-plane worker's Temporal metrics are missing")
	}

	// The node's own metrics, scraped at its endpoint with a cluster-admin's
	// certificate: its worker's schedule-to-start on its task queue and
	// the host commands that made the pods.
	var node model.Node
	c.get("/api/v1/nodes/"+c.nodes.Nodes[0].Name, &node)
	endpoint, err := nodeclient.BaseURL(&node)
	if err != nil {
		t.Fatalf("node %s reports no endpoint: %+v", node.Metadata.Name, node.Status)
	}
	certPEM, keyPEM, err := c.cp.CA().ClientCert("prometheus", []string{pki.ClusterAdminsOrg})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	// The node's endpoint serves under its node's serving name: a scraper
	// verifies it as Prometheus does, with that name as the server name.
	scraper := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{admin},
		RootCAs: c.cp.CA().Pool(), ServerName: pki.NodeServingName(node.Metadata.Name)}}}
	resp, err := scraper.Get(endpoint.String() + "/metrics")
	if err != nil {
		t.Fatalf("scrape the node's metrics: %v", err)
	}
	nodeFams := parseMetrics(t, resp)
	queue := "node/" + node.Metadata.Name
	if histogramCount(nodeFams, "temporal_activity_schedule_to_start_latency_seconds", "task_queue", queue) == 0 {
		t.Errorf("the node's metrics have no activity schedule-to-start on %s", queue)
	}
	if histogramCount(nodeFams, "zonewright_host_command_duration_seconds", "command", "zoneadm") == 0 {
		t.Errorf("the node's metrics have no zoneadm command")
	}

	// A namespace's viewer may not read the cluster's metrics.
	var tok struct {
		Token string `json:"token"`
	}
	code, b := c.do("POST", "/api/v1/namespaces/default/tokens", map[string]any{"role": auth.RoleView})
	if code != http.StatusCreated {
		t.Fatalf("issue a view token: %d %s", code, b)
	}
	if err := json.Unmarshal(b, &tok); err != nil {
		t.Fatal(err)
	}
	viewer := &http.Client{Transport: auth.Bearer{Token: tok.Token, Next: c.http.Transport.(auth.Bearer).Next}}
	resp, err = viewer.Get(c.api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a viewer's GET /metrics: %d; want 403", resp.StatusCode)
	}

	// A whole lifecycle whose provision returned its step times, for the
	// replay test.
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/m0?gracePeriodSeconds=0", nil); code != http.StatusOK {
		t.Fatalf("delete m0: %d %s", code, b)
	}
	c.waitGone("m0", 30*time.Second)
	c.waitClosed("m0")
	c.recordHistory(podcontract.WorkflowID("default", "m0"), "pod-startup-measured.json")
}

// metrics scrapes /metrics as the cluster-admin and lints the exposition.
func (c *cluster) metrics() map[string]*dto.MetricFamily {
	c.t.Helper()
	code, b := c.do("GET", "/metrics", nil)
	if code != http.StatusOK {
		c.t.Fatalf("GET /metrics: %d %s", code, b)
	}
	return lintedMetrics(c.t, b)
}

// parseMetrics reads a scrape's answer and lints the exposition.
func parseMetrics(t *testing.T, resp *http.Response) map[string]*dto.MetricFamily {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v %s", resp.StatusCode, err, b)
	}
	return lintedMetrics(t, b)
}

func lintedMetrics(t *testing.T, b []byte) map[string]*dto.MetricFamily {
	t.Helper()
	problems, err := promlint.New(bytes.NewReader(b)).Lint()
	if err != nil || len(problems) > 0 {
		t.Fatalf("the exposition fails the lint: %v %+v", err, problems)
	}
	p := expfmt.NewTextParser(prommodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.Reader(bytes.NewReader(b)))
	if err != nil {
		t.Fatalf("parse the exposition: %v", err)
	}
	return fams
}

// matches: the metric carries label=value (any metric when label is "").
func matches(m *dto.Metric, label, value string) bool {
	if label == "" {
		return true
	}
	for _, l := range m.GetLabel() {
		if l.GetName() == label && l.GetValue() == value {
			return true
		}
	}
	return false
}

func histogramCount(fams map[string]*dto.MetricFamily, name, label, value string) uint64 {
	var n uint64
	for _, m := range fams[name].GetMetric() {
		if matches(m, label, value) {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

func histogramSum(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	var s float64
	for _, m := range fams[name].GetMetric() {
		if matches(m, label, value) {
			s += m.GetHistogram().GetSampleSum()
		}
	}
	return s
}

// sum adds up a counter's or gauge's series carrying label=value.
func sum(fams map[string]*dto.MetricFamily, name, label, value string) float64 {
	var s float64
	for _, m := range fams[name].GetMetric() {
		if matches(m, label, value) {
			s += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return s
}
