// Package devcluster builds a whole zonewright on this machine, in named
// steps: the database, the cluster CA and its certificates, the Temporal
// server, the control plane and the simulated nodes with their agents.
// `zonewright dev`, the benchmark, the chaos harness and the end-to-end
// tests build theirs with it; what differs between them is in Options.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	tclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/zonewright/zonewright/deploy"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devnodes"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/pgserver"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/workflows"
)

// Options say which cluster to build. A zero field is the plain choice.
type Options struct {
	// Dir keeps the cluster: it is the control plane's state directory
	// (tls/: the cluster CA and the certificates; admin.token) and holds
	// postgres/, temporal/, images/ and nodes/. Required; a later build on
	// the same directory resumes the same data.
	Dir    string
	Logger *slog.Logger // nil: nothing is logged
	// DatabaseURL is the control plane's database; empty: a private
	// PostgreSQL in Dir/postgres, on PostgresPort (0: a free port).
	DatabaseURL  string
	PostgresPort int
	// TemporalAddress is the Temporal frontend's; empty: a free loopback
	// port.
	TemporalAddress string
	// TemporalLogger receives the Temporal server's logs at
	// TemporalLogLevel and above; nil: Logger, and warn.
	TemporalLogger   *slog.Logger
	TemporalLogLevel slog.Leveler
	// CountRequests makes the Temporal frontend count the calls it serves
	// (devstack.TemporalConfig.CountRequests).
	CountRequests bool
	// TemporalOnPostgres keeps the in-process Temporal server's state in
	// the private PostgreSQL (database "temporal"), with HistoryShards
	// history shards, as production runs it; false: a SQLite file in
	// Dir/temporal with one shard. With Replicas, Temporal is on
	// PostgreSQL anyway, and HistoryShards, when set, are its shards.
	TemporalOnPostgres bool
	HistoryShards      int
	// TemporalTaskWorkers is Temporal's devstack.TemporalConfig.TaskWorkers
	// (`zonewright temporal --task-workers` with Replicas); 0: its default.
	TemporalTaskWorkers int
	// ControlPlane are the control plane's own settings (ranges, tuning,
	// images, DNS, bounds). Build fills in its database, Temporal and
	// state directory and, when empty, Listen (a free loopback port),
	// ImageStore (Dir/images), ImageMap (deploy/images.yaml) and NodeDial
	// (through the nodes' fabric in isolation mode). Not used with
	// Replicas.
	ControlPlane controlplane.Config
	// Replicas, when not zero, runs the control plane as that many
	// `zonewright serve` processes and the Temporal server as a
	// `zonewright temporal` process keeping its state in the private
	// PostgreSQL, each restarted when it dies: production's shape, whose
	// processes can be killed. Zero: both run in this process.
	Replicas int
	// ServeArgs are the replicas' flags besides those Build gives them
	// (database, listen and DNS addresses, state directory, Temporal).
	ServeArgs []string
	// Zonewright and Sim are the binaries the agents (and the processes
	// of Replicas) and the simulated hosts run.
	Zonewright, Sim string
	// Nodes is how many simulated nodes to run, each with its agent,
	// which is given AgentArgs besides what connects it.
	Nodes     int
	AgentArgs []string
	// Underlay, when set, runs the nodes in isolation mode
	// (devnodes.Config.Underlay).
	Underlay netip.Prefix
	// NodeCPUGroups are the cgroups the agents are put in
	// (devnodes.Config.CPUGroups).
	NodeCPUGroups []string
	// SuperviseAgents restarts an agent that exits, as SMF would.
	SuperviseAgents bool
	// OperatorName is the subject of the operator's Temporal certificate
	// (an admin's: the Temporal CLI, the Web UI, a harness's client).
	OperatorName string
}

// Cluster is a running cluster.
type Cluster struct {
	opts Options
	log  *slog.Logger
	// DatabaseURL is the control plane's database.
	DatabaseURL string
	// DB is a pool of the control plane's database: the Temporal
	// authorizer's revocation lookups, the nodes' join tokens, a
	// harness's own view of the tables.
	DB       *pgxpool.Pool
	pgMu     sync.Mutex       // guards postgres across RestartPostgres
	postgres *pgserver.Server // nil with Options.DatabaseURL
	CA       *pki.CA
	// ControlPlaneCert and OperatorCert are Temporal client certificates,
	// in Dir/tls.
	ControlPlaneCert, OperatorCert devstack.ClientTLSFiles
	// Temporal is the server in this process; nil with Options.Replicas,
	// where TemporalProcess runs it.
	Temporal        *devstack.Temporal
	TemporalProcess *Process
	TemporalAddress string
	// ControlPlane is the control plane in this process and
	// ControlPlaneConfig how it was started, Listen its address; zero
	// with Options.Replicas, where Replicas run it.
	ControlPlane       *controlplane.ControlPlane
	ControlPlaneConfig controlplane.Config
	Replicas           []*Process
	// APIURLs are the API's base URLs, one per replica; DNSAddrs the
	// replicas' cluster DNS addresses.
	APIURLs    []string
	DNSAddrs   []string
	AdminToken string
	Nodes      *devnodes.Nodes // nil with no nodes

	// onNodes is what the control plane needs of the nodes once they run.
	onNodes func(*devnodes.Nodes)
	stops   []func()
	stopped bool
}

// Build builds the cluster opts describe, step by step. On an error what
// was started is stopped again.
func Build(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Dir == "" {
		return nil, errors.New("devcluster: no directory")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Replicas > 0 && opts.DatabaseURL != "" {
		return nil, errors.New("devcluster: replicas keep Temporal's state in the private PostgreSQL: no database URL")
	}
	c := &Cluster{opts: opts, log: opts.Logger}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	for _, step := range []func(context.Context) error{c.database, c.certificates, c.temporal, c.controlPlane, c.nodes} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// database starts the private PostgreSQL unless the options name a
// database, and opens the cluster's pool of it.
func (c *Cluster) database(ctx context.Context) error {
	c.DatabaseURL = c.opts.DatabaseURL
	if c.DatabaseURL == "" {
		pg, err := pgserver.Start(ctx, pgserver.Config{DataDir: c.PostgresDir(), Port: c.opts.PostgresPort})
		if err != nil {
			return fmt.Errorf("private PostgreSQL: %w", err)
		}
		c.postgres = pg
		c.onStop(func() {
			c.pgMu.Lock()
			defer c.pgMu.Unlock()
			if err := c.postgres.Stop(); err != nil {
				c.log.Warn("stop PostgreSQL", "err", err)
			}
		})
		if c.DatabaseURL, err = pg.EnsureDatabase(ctx, "zonewright"); err != nil {
			return err
		}
	}
	pool, err := pgxpool.New(ctx, c.DatabaseURL)
	if err != nil {
		return err
	}
	c.DB = pool
	c.onStop(pool.Close)
	return nil
}

// certificates loads or makes the cluster CA in the state directory and
// issues the control plane's and the operator's Temporal certificates
// beside it, at every build.
func (c *Cluster) certificates(context.Context) error {
	tlsDir := filepath.Join(c.opts.Dir, "tls")
	var err error
	if c.CA, err = pki.LoadOrCreateCA(tlsDir, controlplane.CACommonName); err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	if c.ControlPlaneCert, err = devstack.EnsureClientTLS(c.CA, tlsDir, "temporal-control-plane", devstack.ControlPlaneName); err != nil {
		return err
	}
	c.OperatorCert, err = devstack.EnsureClientTLS(c.CA, tlsDir, "temporal-operator", c.opts.OperatorName, devstack.AdminOrg)
	return err
}

// temporal starts the Temporal server: mutual TLS with the cluster CA and
// the authorizer, which denies a node whose certificate was revoked with
// its Node.
func (c *Cluster) temporal(ctx context.Context) error {
	if c.opts.Replicas > 0 {
		return c.temporalProcess(ctx)
	}
	log, level := c.opts.TemporalLogger, c.opts.TemporalLogLevel
	if log == nil {
		log = c.log.With("component", "temporal-server")
	}
	cfg := devstack.TemporalConfig{Address: c.opts.TemporalAddress,
		DataDir: filepath.Join(c.opts.Dir, "temporal"), Namespace: devstack.DefaultNamespace, CA: c.CA,
		SearchAttributes: devstack.KeywordAttributes(workflows.SearchAttributeNames...), Logger: log, LogLevel: level,
		CountRequests: c.opts.CountRequests, NodeCertRevoked: (&auth.NodeCertificates{Pool: c.DB}).Revoked, TaskWorkers: c.opts.TemporalTaskWorkers}
	if c.opts.TemporalOnPostgres {
		if c.postgres == nil {
			return errors.New("devcluster: Temporal on PostgreSQL needs the private PostgreSQL: no database URL")
		}
		var err error
		if cfg.DatabaseURL, err = c.postgres.EnsureDatabase(ctx, "temporal"); err != nil {
			return err
		}
		cfg.HistoryShards = c.opts.HistoryShards
	}
	tmp, err := devstack.StartTemporalOnFreePorts(ctx, cfg)
	if err != nil {
		return fmt.Errorf("embedded Temporal: %w", err)
	}
	c.Temporal, c.TemporalAddress = tmp, tmp.Address()
	c.onStop(func() { _ = tmp.Stop() })
	return nil
}

// controlPlane starts the control plane in this process, on the
// cluster's database and Temporal, or its replicas.
func (c *Cluster) controlPlane(ctx context.Context) error {
	if c.opts.Replicas > 0 {
		return c.replicas(ctx)
	}
	cfg, nodeDial, err := c.controlPlaneConfig()
	if err != nil {
		return err
	}
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	c.onStop(func() { c.stopControlPlane() })
	cfg.Listen = cp.Addr()
	c.ControlPlane, c.ControlPlaneConfig = cp, cfg
	c.APIURLs, c.AdminToken = []string{cp.URL()}, cp.AdminToken()
	if addr := cp.DNSAddr(); addr != "" {
		c.DNSAddrs = []string{addr}
	}
	c.onNodes = func(ns *devnodes.Nodes) {
		if nodeDial != nil {
			nodeDial.Use(ns.Fabric())
		}
	}
	return nil
}

// controlPlaneConfig is Options.ControlPlane on the cluster's database,
// Temporal and state directory, its empty fields filled in; the dialer,
// when not nil, is to be given the nodes' fabric.
func (c *Cluster) controlPlaneConfig() (controlplane.Config, *fabric.Dialer, error) {
	cfg := c.opts.ControlPlane
	cfg.DatabaseURL, cfg.StateDir = c.DatabaseURL, c.opts.Dir
	cfg.TemporalAddress, cfg.TemporalNamespace, cfg.TemporalTLS = c.TemporalAddress, devstack.DefaultNamespace, controlplane.TLSConfig(c.ControlPlaneCert)
	if cfg.Logger == nil {
		cfg.Logger = c.log
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.ImageStore == "" {
		cfg.ImageStore = filepath.Join(c.opts.Dir, "images")
	}
	if cfg.ImageMap == nil {
		m, err := imagemap.Parse(deploy.ImageMap)
		if err != nil {
			return cfg, nil, fmt.Errorf("built-in image map: %w", err)
		}
		cfg.ImageMap = m
	}
	var nodeDial *fabric.Dialer
	if cfg.NodeDial == nil {
		// The nodes' endpoints, once the nodes exist: on the fabric in
		// isolation mode.
		nodeDial = &fabric.Dialer{}
		cfg.NodeDial = nodeDial.DialContext
	}
	return cfg, nodeDial, nil
}

// stopControlPlane stops the control plane in this process, which may
// have been replaced since the build (RestartControlPlane).
func (c *Cluster) stopControlPlane() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = c.ControlPlane.Stop(ctx)
}

// nodes starts the simulated nodes, their agents registering with the
// API (spread over the replicas), and their supervision.
func (c *Cluster) nodes(ctx context.Context) error {
	if c.opts.Nodes == 0 {
		return nil
	}
	ns, err := devnodes.Start(ctx, devnodes.Config{Count: c.opts.Nodes, DataDir: c.NodesDir(), Agent: c.opts.Zonewright, Sim: c.opts.Sim,
		Tokens: &auth.Tokens{Pool: c.DB}, Temporal: c.TemporalAddress, Namespace: devstack.DefaultNamespace, TemporalMTLS: true,
		Logger: c.log, APIURLs: c.APIURLs, APICAFile: controlplane.CAFile(c.opts.Dir), ExtraArgs: c.opts.AgentArgs,
		Underlay: c.opts.Underlay, CPUGroups: c.opts.NodeCPUGroups})
	if err != nil {
		return err
	}
	c.Nodes = ns
	c.onStop(ns.Stop)
	if c.onNodes != nil {
		c.onNodes(ns)
	}
	if c.opts.SuperviseAgents {
		// The supervision ends before the agents are stopped (stops run
		// last to first).
		supervise, stopSupervising := context.WithCancel(context.Background())
		ns.Supervise(supervise)
		c.onStop(stopSupervising)
	}
	return nil
}

// onStop adds f to what Stop does, before what was added earlier.
func (c *Cluster) onStop(f func()) { c.stops = append(c.stops, f) }

// Stop stops everything Build started, last started first. It may be
// called more than once. The directory is left as it is.
func (c *Cluster) Stop() {
	if c.stopped {
		return
	}
	c.stopped = true
	for i := len(c.stops) - 1; i >= 0; i-- {
		c.stops[i]()
	}
}

// PostgresDir is where the private PostgreSQL keeps its data.
func (c *Cluster) PostgresDir() string { return filepath.Join(c.opts.Dir, "postgres") }

// NodesDir holds the nodes' data; in isolation mode it names their
// namespaces (fabric.Leftovers).
func (c *Cluster) NodesDir() string { return filepath.Join(c.opts.Dir, "nodes") }

// Postgres is the private PostgreSQL running now; nil with
// Options.DatabaseURL.
func (c *Cluster) Postgres() *pgserver.Server {
	c.pgMu.Lock()
	defer c.pgMu.Unlock()
	return c.postgres
}

// RestartPostgres stops the private PostgreSQL, fast (SIGINT) or by
// SIGKILL of its whole process group, and starts it again on the same
// data directory and port.
func (c *Cluster) RestartPostgres(ctx context.Context, hard bool) error {
	c.pgMu.Lock()
	defer c.pgMu.Unlock()
	if c.postgres == nil {
		return errors.New("restart PostgreSQL: the cluster runs on a database of the caller's")
	}
	port := c.postgres.Port()
	if hard {
		_ = syscall.Kill(-c.postgres.Pid(), syscall.SIGKILL)
	}
	_ = c.postgres.Stop() // after a kill, only waits for the exit
	var err error
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var pg *pgserver.Server
		if pg, err = pgserver.Start(ctx, pgserver.Config{DataDir: c.PostgresDir(), Port: port}); err == nil {
			c.postgres = pg
			c.log.Info("PostgreSQL restarted", "pid", pg.Pid(), "port", port)
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("start PostgreSQL again: %w", err)
}

// RestartControlPlane starts the control plane in this process again,
// on its address, after its Stop; cfg is ControlPlaneConfig or a variant.
func (c *Cluster) RestartControlPlane(ctx context.Context, cfg controlplane.Config) error {
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	c.ControlPlane = cp
	return nil
}

// DialOperator is a Temporal client of the cluster's server as its
// operator, an admin.
func (c *Cluster) DialOperator(log *slog.Logger) (tclient.Client, error) {
	conf, err := controlplane.TLSConfig(c.OperatorCert).ClientTLS()
	if err != nil {
		return nil, err
	}
	return tclient.NewLazyClient(tclient.Options{HostPort: c.TemporalAddress, Namespace: devstack.DefaultNamespace,
		Logger: sdklog.NewStructuredLogger(log), ConnectionOptions: tclient.ConnectionOptions{TLS: conf}})
}
