// Package metrics is zonewright's Prometheus instrumentation: each
// process's own registry (never the global default), the families `serve`
// (Serve) and the agent (Node) expose, the pods and nodes counted from the
// store at scrape time (Inventory), the Temporal SDK's metrics in the same
// registry (TemporalHandler), and the handler that serves /metrics.
//
// Every method works on a nil receiver and records nothing, so a library
// wired without metrics (a test, a tool) needs no stand-in.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every family zonewright defines.
const namespace = "zonewright"

// DurationBuckets resolve tens of milliseconds to most of an hour: 10 ms
// doubling to about 44 minutes, as kube-scheduler's pod scheduling SLI. A
// pod's start, an image's import and a zone's install all fall inside.
func DurationBuckets() []float64 { return prometheus.ExponentialBuckets(0.01, 2, 19) }

// requestBuckets resolve API requests and host commands: 1 ms to about
// 33 s (a zone's install outlives it and lands in +Inf).
func requestBuckets() []float64 { return prometheus.ExponentialBuckets(0.001, 2, 16) }

// byteBuckets size downloads: 1 MiB to 64 GiB by fours.
func byteBuckets() []float64 { return prometheus.ExponentialBuckets(1<<20, 4, 9) }

// NewRegistry is a registry with the Go runtime's and the process's
// collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves g's metrics in the Prometheus text format. A collector
// that fails (the store down) leaves its families out; the rest are
// served.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
