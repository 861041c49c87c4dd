package metrics

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zonewright/zonewright/internal/illumos"
)

// Node is what the agent measures: the host commands it runs, the images
// it pulls and the supervisor's reports to the control plane.
type Node struct {
	hostCommands *prometheus.HistogramVec
	pulls        *prometheus.CounterVec
	pullBytes    prometheus.Counter
	pullDuration *prometheus.HistogramVec
	reports      *prometheus.CounterVec
}

// NewNode registers the agent's families in reg.
func NewNode(reg prometheus.Registerer) *Node {
	n := &Node{
		hostCommands: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name:    "host_command_duration_seconds",
			Help:    "Host commands the agent ran, by command (zoneadm, zfs, dladm, …), subcommand (install, send, create-vnic, …; empty for none) and outcome (ok, failed, timeout, killed, not_started).",
			Buckets: append(requestBuckets(), 60, 120, 300, 600, 1800)}, []string{"command", "subcommand", "outcome"}),
		pulls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
			Name: "image_pulls_total", Help: "Image pulls this node finished, by result (ok, failed)."}, []string{"result"}),
		pullBytes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace,
			Name: "image_pull_bytes_total", Help: "Bytes this node downloaded for images it pulled."}),
		pullDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
			Name: "image_pull_duration_seconds", Help: "Time an image's pull to this node took, by result.",
			Buckets: DurationBuckets()}, []string{"result"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
			Name: "supervision_reports_total",
			Help: "Pod transitions the supervisor reported to the control plane, by result (delivered, retried, gone)."}, []string{"result"}),
	}
	reg.MustRegister(n.hostCommands, n.pulls, n.pullBytes, n.pullDuration, n.reports)
	return n
}

// Executor measures every command next runs.
func (n *Node) Executor(next illumos.Executor) illumos.Executor {
	if n == nil {
		return next
	}
	return timedExecutor{next: next, hist: n.hostCommands}
}

type timedExecutor struct {
	next illumos.Executor
	hist *prometheus.HistogramVec
}

func (t timedExecutor) Run(ctx context.Context, cmd illumos.Cmd) (illumos.Result, error) {
	start := time.Now()
	res, err := t.next.Run(ctx, cmd)
	t.hist.WithLabelValues(filepath.Base(cmd.Path), subcommand(cmd.Args), outcome(err)).Observe(time.Since(start).Seconds())
	return res, err
}

// subcommands are the verbs of the host commands (zoneadm -z … install,
// zfs send, dladm create-vnic, svcadm enable, …). A command's subcommand
// is the first of its arguments among them: an allowlist, so a zone's or
// dataset's name never becomes a label value.
var subcommands = setOf(`install uninstall boot halt shutdown reboot ready list verify attach detach clone mark
	create destroy snapshot rollback send receive recv get set inherit rename promote mount unmount upgrade status
	create-vnic delete-vnic show-vnic modify-vnic create-etherstub delete-etherstub show-etherstub show-link show-phys
	set-linkprop show-linkprop create-if delete-if create-ip delete-ip show-if create-addr delete-addr show-addr
	set-ifprop show-ifprop set-prop show-prop enable disable restart refresh clear import export delete info add`)

func setOf(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}

func subcommand(args []string) string {
	for _, a := range args {
		if subcommands[a] {
			return a
		}
	}
	return ""
}

// outcome names how a command ended, from its *illumos.ExecError.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var ee *illumos.ExecError
	switch {
	case !errors.As(err, &ee):
		return "failed"
	case ee.TimedOut:
		return "timeout"
	case ee.Signaled:
		return "killed"
	case ee.ExitCode < 0:
		return "not_started"
	}
	return "failed"
}

// ImagePulled counts one pull of an image to this node and its time.
func (n *Node) ImagePulled(ok bool, d time.Duration) {
	if n == nil {
		return
	}
	r := result(ok)
	n.pulls.WithLabelValues(r).Inc()
	n.pullDuration.WithLabelValues(r).Observe(d.Seconds())
}

// ImageBytes counts bytes an image's download read.
func (n *Node) ImageBytes(bytes int64) {
	if n != nil && bytes > 0 {
		n.pullBytes.Add(float64(bytes))
	}
}

// Results of a supervisor's report.
const (
	ReportDelivered = "delivered"
	ReportRetried   = "retried"
	ReportGone      = "gone"
)

// Reported counts one report of a pod's transition.
func (n *Node) Reported(result string) {
	if n != nil {
		n.reports.WithLabelValues(result).Inc()
	}
}
