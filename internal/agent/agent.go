// Package agent is `zonewright agent`, the process each illumos host runs
// under SMF. It prepares the host (prepare.go: the zones' parent dataset
// and the etherstub pod VNICs sit on), registers the host as a Node and
// heartbeats (nodestatus.go, heartbeat.go), runs the node's Temporal
// worker (the host activities on task queue node/<name>, which only this
// agent polls), supervises the pods running here (supervise.go, over
// internal/supervisor), reconciles its own host (reconcile.go), and
// programs the service NAT rules from the control plane's service network
// snapshots (servicenat.go, over internal/servicenat) and answers its
// pods' DNS from them (poddns.go), and routes the other nodes' pod CIDRs
// to them (noderoutes.go, over internal/noderoutes). It serves its pods'
// logs and exec sessions to the control plane only, on its own endpoint (endpoint.go,
// over internal/nodeserver). It reads the secret values its pods'
// containers take from their environment when it starts them
// (internal/hostops/secretenv.go). Settings are in config.go. Every call to the control
// plane's API goes through one client trusting Config.APICAFile
// (apiclient.go).
//
// Trust: the agent reaches the control plane only through its API
// (internal/nodeapi, under /api/v1/nodes/<name>/… and its pods' reports),
// over one *http.Client (Config.HTTPClient); it holds no database
// credential. Liveness is a lease renewed every heartbeat interval,
// outside the change feed; the Node's status is written only when it
// changed. Its pod CIDR is assigned by the control plane at registration.
//
// Starting, after preparing the host and before registering (so before the
// node reports Ready) and before the worker polls, the agent removes the
// zonewright resources of pods no longer bound to its node and adopts the
// rest untouched (see cleanHost). Stopping (SIGTERM from SMF, or the
// context) stops the worker gracefully: running activities get up to
// Config.WorkerStopTimeout to finish. Zones keep running; the next agent
// adopts them, since every host activity finds its earlier work by name.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	tworker "go.temporal.io/sdk/worker"

	"github.com/zonewright/zonewright/internal/containerlog"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/supervisor"
	"github.com/zonewright/zonewright/worker/nodeworker"
)

// Agent is one running node agent.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	host  illumos.Host
	api   *nodeapi.Client
	facts illumos.HostFacts
	// podCIDR is the pod network the control plane assigned at
	// registration; kept (and asked for again) for the agent's life.
	podCIDR netip.Prefix
	// podNetwork is podCIDR for the endpoint's handlers, which may read
	// it while a registration sets it.
	podNetwork atomic.Pointer[netip.Prefix]
	// hostCIDR is the pod network the host's gateway holds from an
	// earlier run (invalid when none): asked for when the Node is new.
	hostCIDR netip.Prefix

	// endpointIP and endpointPort are where the control plane reaches
	// the node's endpoint (zero: none), reported in its status.
	endpointIP   string
	endpointPort int

	mu        sync.Mutex
	workerErr error // why the worker is not polling yet; nil once it is

	// registry holds the agent's metrics (MetricsHandler serves them):
	// host commands, image pulls, reports, the node worker's Temporal SDK.
	registry *prometheus.Registry
	metrics  *metrics.Node

	// serviceNet is the newest service network snapshot the node got:
	// what its NAT rules and its pods' DNS answers follow.
	serviceNet servicenet.Holder
	serviceNAT serviceNATState

	// keptLogs holds the containers' logs after their zones halted or
	// went, until their pods are deleted (nil without a state directory).
	keptLogs *containerlog.Kept

	// observedZones is the supervisor's last list of the zones (set
	// before the goroutines that read it start); nil: none yet.
	observedZones func() (map[string]string, time.Time)

	// hostRead is the last reading of the host's zones and space and
	// when it was taken (latestSummary).
	hostRead struct {
		sync.Mutex
		summary hostSummary
		at      time.Time
	}
}

// Run runs the agent until ctx ends, then stops it gracefully and returns
// nil. It returns an error when the host cannot be prepared or the
// configuration is wrong.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	hc := cfg.HTTPClient
	var cred *credential
	if hc == nil {
		var err error
		if hc, err = newAPIClient(cfg); err != nil {
			return err
		}
		if cred, err = presentNodeCredential(ctx, hc, cfg); err != nil {
			return err
		}
		// One identity for the API and Temporal: over TLS without a
		// certificate of its own, the node presents the one it joined
		// with (renewed since), which the Temporal authorizer keeps to
		// node/<name>.
		if t := cfg.TemporalTLS; t != nil && len(t.Certificates) == 0 && t.GetClientCertificate == nil {
			cfg.TemporalTLS = t.Clone()
			cfg.TemporalTLS.GetClientCertificate = cred.clientCertificate
		}
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.With("node", cfg.Node), registry: cfg.Metrics}
	if a.registry == nil {
		a.registry = metrics.NewRegistry()
	}
	a.metrics = metrics.NewNode(a.registry)
	a.api = nodeapi.New(hc, cfg.APIURL, cfg.Node)
	a.host = illumos.Host{Runner: a.metrics.Executor(&illumos.Runner{BinDir: cfg.BinDir, Logger: a.log})}
	err := a.run(ctx, cred)
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil // stopped while starting: not a failure
	}
	return err
}

// run prepares the host, registers the node and runs the agent's parts
// until ctx ends.
func (a *Agent) run(ctx context.Context, cred *credential) error {
	cfg := a.cfg
	if err := a.prepareHost(ctx); err != nil {
		return err
	}
	if cfg.StateDir != "" {
		a.keptLogs = &containerlog.Kept{Dir: filepath.Join(cfg.StateDir, KeptLogsDir)}
	}
	// Before registering, so the first status names the endpoint.
	endpoint, err := a.serveEndpoint(cred)
	if err != nil {
		return err
	}
	if endpoint != nil {
		defer endpoint.Close()
	}
	if err := a.readFacts(ctx); err != nil {
		return err
	}
	h := a.hostOps()
	a.hostCIDR = a.gatewayCIDR(ctx)

	// Before the node reports Ready and before its worker polls: remove
	// what belongs to pods no longer bound here, adopt the rest.
	if _, err := a.cleanHost(ctx, h, "at agent start"); err != nil {
		return err
	}
	if err := a.registerNode(ctx); err != nil {
		return err
	}
	// The pods' gateway and resolver sit in the CIDR the control plane
	// assigned; the worker, which makes pods, polls only after.
	if err := a.prepareGateway(ctx); err != nil {
		return err
	}
	h.PodCIDR = a.podCIDR
	if dns := a.servePodDNS(); dns != nil {
		defer dns.Shutdown(context.Background())
		h.ZoneDNS = &hostops.ZoneDNS{Nameserver: a.podGateway().String(), Domain: cfg.ClusterDomain}
	}

	tc, closeTemporal, err := a.temporalClient()
	if err != nil {
		return err
	}
	defer closeTemporal()

	// The supervisor watches the pods running here before the worker
	// takes new ones, so an agent restart loses no probe state.
	sup, err := a.startSupervisor(ctx, h)
	if err != nil {
		return err
	}
	supCtx, stopSupervising := context.WithCancel(ctx)
	defer stopSupervising()
	a.startNodeLoops(supCtx, h, sup, cred)
	a.work(ctx, tc, h, sup)
	a.log.Info("agent stopped; zones keep running")
	return nil
}

// work runs the node's worker, started as soon as Temporal answers, and
// the heartbeat until ctx ends, then stops the worker gracefully.
func (a *Agent) work(ctx context.Context, tc client.Client, h *hostops.Host, sup *supervisor.Supervisor) {
	workerCtx, stopStarting := context.WithCancel(ctx)
	defer stopStarting()
	started := make(chan tworker.Worker, 1)
	go func() { started <- a.startWorker(workerCtx, tc, h) }()

	a.heartbeat(ctx, h, sup)

	stopStarting()
	if w := <-started; w != nil {
		a.log.Info("stopping the worker", "timeout", a.cfg.WorkerStopTimeout)
		w.Stop() // waits for running activities up to WorkerStopTimeout
	}
}

// readFacts reads the host's CPUs and memory, retrying while the host's
// commands fail.
func (a *Agent) readFacts(ctx context.Context) error {
	facts, err := retryHost(ctx, a.log, "read host facts", func() (illumos.HostFacts, error) {
		return a.host.Facts(ctx, a.cfg.ZonesDataset)
	})
	if err != nil {
		return fmt.Errorf("read host facts: %w", err)
	}
	a.facts = facts
	return nil
}

// hostOps is what the host activities act with, from the configuration;
// the pod network and the pods' resolver are set once registered.
func (a *Agent) hostOps() *hostops.Host {
	cfg := a.cfg
	h := &hostops.Host{
		Host:           a.host,
		Node:           cfg.Node,
		Etherstub:      cfg.Etherstub,
		ZonesDataset:   cfg.ZonesDataset,
		ZonesPath:      cfg.ZonesPath,
		ImagesDataset:  cfg.ImagesDataset,
		VolumesDataset: cfg.VolumesDataset,
		ImageDir:       cfg.ImageDir,
		ZvolDir:        cfg.ZvolDir,
		ZonesDir:       cfg.ZonesDir,
		KeptLogs:       a.keptLogs,
		API:            a.api.HTTP(),
		StepRetry:      cfg.ProvisionRetry,
		ZoneQuota:      cfg.ZoneQuota,
		MaxProcesses:   cfg.ZoneMaxProcesses,
		MaxLWPs:        cfg.ZoneMaxLWPs,
		Log:            a.log.With("component", "host"),
		Metrics:        a.metrics,
	}
	if cfg.MaxConcurrentInstalls > 0 {
		h.Installs = make(chan struct{}, cfg.MaxConcurrentInstalls)
	}
	h.Secrets = a.api
	if cfg.BinDir == "" {
		// The commands act on this machine: give zonepaths the mode
		// zoneadm install demands. (With another command directory the
		// zonepaths are not ours to chmod.)
		h.PrepareZonepath = func(p string) error { return os.Chmod(p, 0o700) }
	}
	return h
}

// registerNode registers the node and renews its lease once, so it is
// live before the first heartbeat.
func (a *Agent) registerNode(ctx context.Context) error {
	cfg := a.cfg
	node, err := a.register(ctx)
	if err != nil {
		return fmt.Errorf("register node %s: %w", cfg.Node, err)
	}
	if _, err := a.api.RenewLease(ctx, cfg.Node, leaseDurations*cfg.HeartbeatInterval, ""); err != nil {
		a.log.Warn("first lease renewal failed; the heartbeat renews it", "err", err)
	}
	a.log.Info("node registered", "uid", node.Metadata.UID, "cpus", a.facts.CPUs, "memory", a.facts.MemoryBytes,
		"allocatable", node.Status.Allocatable, "brands", cfg.ZoneBrands, "podCIDR", a.podCIDR)
	return nil
}

// temporalClient is the node worker's Temporal client, its SDK metrics in
// the agent's registry; closeTemporal closes both.
func (a *Agent) temporalClient() (tc client.Client, closeTemporal func(), err error) {
	cfg := a.cfg
	temporalMetrics, temporalMetricsCloser := metrics.TemporalHandler(a.registry, a.log.With("component", "metrics"))
	opts := client.Options{
		HostPort:       cfg.TemporalAddress,
		Namespace:      cfg.TemporalNamespace,
		Logger:         sdklog.NewStructuredLogger(a.log.With("component", "temporal")),
		MetricsHandler: temporalMetrics,
	}
	opts.ConnectionOptions.TLS = cfg.TemporalTLS
	tc, err = client.NewLazyClient(opts)
	if err != nil {
		temporalMetricsCloser.Close()
		return nil, nil, fmt.Errorf("Temporal client: %w", err)
	}
	return tc, func() {
		tc.Close()
		temporalMetricsCloser.Close()
	}, nil
}

// startSupervisor makes the node's supervisor and has it watch the pods
// already bound here; it does not run it yet.
func (a *Agent) startSupervisor(ctx context.Context, h *hostops.Host) (*supervisor.Supervisor, error) {
	cfg := a.cfg
	seq, err := a.reportSequence()
	if err != nil {
		return nil, err
	}
	sup := supervisor.New(supervisor.Config{Node: cfg.Node, Host: supervisor.IllumosHost{Host: a.host},
		Reporter: lifecycleReporter{api: a.api, metrics: a.metrics}, ObserveEvery: cfg.ObserveEvery, Sequence: seq, Log: a.log})
	h.Supervisor = sup
	a.observedZones = sup.ObservedZones
	if _, err := a.superviseBound(ctx, sup, true); err != nil {
		return nil, fmt.Errorf("list the pods bound to node %s: %w", cfg.Node, err)
	}
	return sup, nil
}

// startNodeLoops starts what runs beside the worker until ctx ends: the
// supervisor, the host's reconciler, the service network's NAT rules, the
// routes to the other nodes, the credential's renewal.
func (a *Agent) startNodeLoops(ctx context.Context, h *hostops.Host, sup *supervisor.Supervisor, cred *credential) {
	go sup.Run(ctx)
	go a.reconcileHost(ctx, h, sup)
	newer := make(chan struct{}, 1)
	go a.followServiceNet(ctx, newer)
	go a.programServiceNAT(ctx, newer, a.writeServiceNetworkStatus)
	go a.programNodeRoutes(ctx)
	if cred != nil {
		go a.renewCredential(ctx, cred)
	}
}

// reportSequence numbers the supervisor's reports from StateDir, so the
// pods' lifecycles take them after a restart whatever the clock did; nil
// (numbers from the clock) without a state directory.
func (a *Agent) reportSequence() (*supervisor.Sequence, error) {
	if a.cfg.StateDir == "" {
		return nil, nil
	}
	seq, err := supervisor.OpenSequence(filepath.Join(a.cfg.StateDir, supervisor.SequenceFile), time.Now())
	if err != nil {
		return nil, fmt.Errorf("the state directory: %w", err)
	}
	return seq, nil
}

// MetricsHandler serves the agent's metrics in the Prometheus text format:
// host commands, image pulls, the supervisor's reports, the node worker's
// Temporal SDK metrics (task_queue="node/<name>"), Go and the process.
// The agent's endpoint mounts it at /metrics, behind its own
// authorisation.
func (a *Agent) MetricsHandler() http.Handler { return metrics.Handler(a.registry) }

// startWorker starts the node's worker, retrying until Temporal answers.
// It returns the running worker, or nil when ctx ends first.
func (a *Agent) startWorker(ctx context.Context, tc client.Client, h *hostops.Host) tworker.Worker {
	for attempt := 0; ; attempt++ {
		w := nodeworker.New(tc, h, nodeworker.Options{
			MaxConcurrentActivities: a.cfg.MaxConcurrentActivities,
			StopTimeout:             a.cfg.WorkerStopTimeout,
		})
		err := w.Start()
		a.mu.Lock()
		a.workerErr = err
		a.mu.Unlock()
		if err == nil {
			a.log.Info("node worker polling", "taskQueue", "node/"+a.cfg.Node, "temporal", a.cfg.TemporalAddress)
			return w
		}
		if attempt%10 == 0 {
			a.log.Warn("Temporal not reachable yet; the node worker will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
