package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Counts is what the store answers at scrape time: two grouped counts,
// no rows read into the process.
type Counts interface {
	// PodsByPhase counts pods by status.phase ("" for none yet).
	PodsByPhase(ctx context.Context) (map[string]int, error)
	// NodesByReady counts nodes by their Ready condition's status (True,
	// False, Unknown; Unknown too for a node without one).
	NodesByReady(ctx context.Context) (map[string]int, error)
}

// Inventory counts pods by phase and nodes by readiness when scraped: a
// gauge kept current from the change feed would cost every write.
type Inventory struct {
	Counts Counts
	// Timeout bounds the two counts; zero: 5 s.
	Timeout time.Duration
}

var (
	podsDesc = prometheus.NewDesc(namespace+"_pods", "Pods by phase, counted from the store when scraped.", []string{"phase"}, nil)
	// nodesDesc mirrors kube-state-metrics' kube_node_status_condition.
	nodesDesc = prometheus.NewDesc(namespace+"_nodes", "Nodes by the status of their Ready condition (true, false, unknown), counted from the store when scraped.", []string{"ready"}, nil)
)

// podPhases and readiness are always exported, so a phase with no pods
// reads 0 rather than missing.
var (
	podPhases = []string{"Pending", "Running", "Succeeded", "Failed", "Unknown"}
	readiness = []string{"true", "false", "unknown"}
)

// Describe implements prometheus.Collector.
func (i *Inventory) Describe(ch chan<- *prometheus.Desc) {
	ch <- podsDesc
	ch <- nodesDesc
}

// Collect implements prometheus.Collector; a count that fails is reported
// as the scrape's error and left out.
func (i *Inventory) Collect(ch chan<- prometheus.Metric) {
	timeout := i.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if pods, err := i.Counts.PodsByPhase(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(podsDesc, err)
	} else {
		for phase, n := range withZeros(pods, podPhases, func(p string) string {
			if p == "" {
				return "Pending" // not written yet: the lifecycle has not begun
			}
			return p
		}) {
			ch <- prometheus.MustNewConstMetric(podsDesc, prometheus.GaugeValue, float64(n), phase)
		}
	}
	if nodes, err := i.Counts.NodesByReady(ctx); err != nil {
		ch <- prometheus.NewInvalidMetric(nodesDesc, err)
	} else {
		for ready, n := range withZeros(nodes, readiness, func(s string) string {
			switch s {
			case "True":
				return "true"
			case "False":
				return "false"
			}
			return "unknown"
		}) {
			ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(n), ready)
		}
	}
}

// withZeros folds counts under their label value (by label) and adds the
// values always exported.
func withZeros(counts map[string]int, always []string, label func(string) string) map[string]int {
	out := make(map[string]int, len(always))
	for _, v := range always {
		out[v] = 0
	}
	for k, n := range counts {
		out[label(k)] += n
	}
	return out
}
