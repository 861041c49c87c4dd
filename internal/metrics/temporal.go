package metrics

import (
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// temporalReportEvery is how often the SDK's metrics reach the registry.
const temporalReportEvery = time.Second

// temporalSanitize is the SDK's Prometheus sanitising for names and label
// keys; label values keep '/', '-', '.' and ':' (any value is valid in
// Prometheus), so a node's task queue reads task_queue="node/<name>".
var temporalSanitize = tally.SanitizeOptions{
	NameCharacters:       sdktally.PrometheusSanitizeOptions.NameCharacters,
	KeyCharacters:        sdktally.PrometheusSanitizeOptions.KeyCharacters,
	ValueCharacters:      tally.ValidCharacters{Ranges: tally.AlphanumericRange, Characters: []rune{'_', '/', '-', '.', ':'}},
	ReplacementCharacter: tally.DefaultReplacementCharacter,
}

// TemporalHandler gives the Temporal SDK's client and worker metrics
// (temporal_activity_schedule_to_start_latency_seconds{task_queue=…},
// temporal_workflow_task_…, temporal_request_…) to reg, as histograms in
// seconds with DurationBuckets. Close the returned closer with the client.
func TemporalHandler(reg prometheus.Registerer, log *slog.Logger) (client.MetricsHandler, io.Closer) {
	if log == nil {
		log = slog.Default()
	}
	reporter := tallyprom.NewReporter(tallyprom.Options{
		Registerer:              reg,
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: DurationBuckets(),
		// Not the reporter's default panic: a metric the SDK names with
		// another set of tags must not stop the process.
		OnRegisterError: func(err error) { log.Debug("a Temporal SDK metric was not registered", "err", err) },
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &temporalSanitize,
		// tally's own counts of its series are no Temporal metric (and
		// their names fail Prometheus' lint).
		OmitCardinalityMetrics: true,
	}, temporalReportEvery)
	return sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)), closer
}
