package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Serve is what `zonewright serve` measures: pods' starts, scheduling, the
// API, image imports and the pulls of images to nodes.
type Serve struct {
	podStartup      prometheus.Histogram
	podStartupPhase *prometheus.HistogramVec

	scheduleAttempts  *prometheus.CounterVec
	schedulingLatency *prometheus.HistogramVec

	apiRequests *prometheus.CounterVec
	apiDuration *prometheus.HistogramVec
	watches     prometheus.Gauge

	imageImports        *prometheus.CounterVec
	imageImportBytes    prometheus.Counter
	imageImportDuration *prometheus.HistogramVec
	nodePulls           *prometheus.HistogramVec
	nodePullBytes       prometheus.Counter
}

// NewServe registers serve's families in reg.
func NewServe(reg prometheus.Registerer) *Serve {
	s := &Serve{
		podStartup: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace,
			Name: "pod_startup_duration_seconds",
			Help: "Time from a pod's creation to its first Ready, observed once per pod by the control plane.",
			// Kubernetes' pod start buckets, finer below a second.
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}}),
		podStartupPhase: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name:    "pod_startup_phase_duration_seconds",
			Help:    "Time a pod's first start spent in each phase (scheduling, image, install, boot, network, containers, ready); the phases of a start add up to its pod_startup_duration_seconds.",
			Buckets: DurationBuckets()}, []string{"phase"}),

		scheduleAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
			Name: "schedule_attempts_total",
			Help: "Attempts to place a pod on a node, by result (scheduled, unschedulable, error)."}, []string{"result"}),
		schedulingLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name: "scheduling_attempt_duration_seconds",
			Help: "Time one attempt to place a pod took, by result.", Buckets: requestBuckets()}, []string{"result"}),

		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
			Name: "api_requests_total",
			Help: "API requests by route template, verb and HTTP status code."}, []string{"route", "verb", "code"}),
		apiDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name:    "api_request_duration_seconds",
			Help:    "API request latency by route template and verb; watches, which stream for as long as they are open, are not included.",
			Buckets: requestBuckets()}, []string{"route", "verb"}),
		watches: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace,
			Name: "api_open_watches", Help: "Watch streams this API replica holds open."}),

		imageImports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
			Name: "image_imports_total", Help: "Image imports (fetch and verify) finished, by result (ok, failed)."}, []string{"result"}),
		imageImportBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace,
			Name: "image_import_bytes_total", Help: "Bytes fetched by successful image imports."}),
		imageImportDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name: "image_import_duration_seconds", Help: "Time an image's fetch and verification took, by result.",
			Buckets: DurationBuckets()}, []string{"result"}),
		nodePulls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name:    "image_node_pull_duration_seconds",
			Help:    "Time from an image's pull to a node being begun to the node's answer, as the control plane saw it, by result (ok, failed).",
			Buckets: DurationBuckets()}, []string{"result"}),
		nodePullBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace,
			Name: "image_node_pull_bytes_total", Help: "Bytes of the images nodes pulled (each artefact's size, once per node)."}),
	}
	reg.MustRegister(s.podStartup, s.podStartupPhase, s.scheduleAttempts, s.schedulingLatency, s.apiRequests, s.apiDuration,
		s.watches, s.imageImports, s.imageImportBytes, s.imageImportDuration, s.nodePulls, s.nodePullBytes)
	return s
}

// PodStarted observes one pod's first start: its total and the time of
// each phase, which add up to it.
func (s *Serve) PodStarted(total time.Duration, phases map[string]time.Duration) {
	if s == nil {
		return
	}
	s.podStartup.Observe(total.Seconds())
	for phase, d := range phases {
		s.podStartupPhase.WithLabelValues(phase).Observe(d.Seconds())
	}
}

// Results of a scheduling attempt.
const (
	ScheduleScheduled     = "scheduled"
	ScheduleUnschedulable = "unschedulable"
	ScheduleError         = "error"
)

// ScheduleAttempt counts one attempt to place a pod and how long it took.
func (s *Serve) ScheduleAttempt(result string, d time.Duration) {
	if s == nil {
		return
	}
	s.scheduleAttempts.WithLabelValues(result).Inc()
	s.schedulingLatency.WithLabelValues(result).Observe(d.Seconds())
}

// APIRequest counts one request to route (the route's template, never the
// path asked for) and, unless it is a watch, its latency.
func (s *Serve) APIRequest(route, verb string, code int, d time.Duration) {
	if s == nil {
		return
	}
	s.apiRequests.WithLabelValues(route, verb, strconv.Itoa(code)).Inc()
	if verb != "watch" {
		s.apiDuration.WithLabelValues(route, verb).Observe(d.Seconds())
	}
}

// WatchOpened and WatchClosed keep the count of open watch streams.
func (s *Serve) WatchOpened() {
	if s != nil {
		s.watches.Inc()
	}
}

func (s *Serve) WatchClosed() {
	if s != nil {
		s.watches.Dec()
	}
}

// ImageImported counts an image's fetch: its bytes (when it succeeded)
// and how long it took.
func (s *Serve) ImageImported(ok bool, bytes int64, d time.Duration) {
	if s == nil {
		return
	}
	r := result(ok)
	s.imageImports.WithLabelValues(r).Inc()
	s.imageImportDuration.WithLabelValues(r).Observe(d.Seconds())
	if ok {
		s.imageImportBytes.Add(float64(bytes))
	}
}

// NodePullFinished counts a pull of an image to a node that ended, how
// long it took since it was begun and, when it succeeded, the artefact's
// bytes.
func (s *Serve) NodePullFinished(ok bool, bytes int64, d time.Duration) {
	if s == nil {
		return
	}
	s.nodePulls.WithLabelValues(result(ok)).Observe(d.Seconds())
	if ok {
		s.nodePullBytes.Add(float64(bytes))
	}
}

func result(ok bool) string {
	if ok {
		return "ok"
	}
	return "failed"
}
