// Package devstack runs the pieces of the stack that come from Temporal:
// an embedded Temporal server (all services in this process, or some of
// them as one process of a server split over several; state in a SQLite
// file or PostgreSQL) and the Temporal Web UI. `zonewright dev`,
// `zonewright temporal` and the integration tests of other packages use it.
//
// It is the only package that imports go.temporal.io/server and the UI server:
// they are large, slow to link, and have no place in the production binary.
package devstack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/common/resolver"
	"go.temporal.io/server/common/tasktoken"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"

	"github.com/zonewright/zonewright/internal/pki"
)

// Defaults of the dev stack; the same ports as `temporal server start-dev`,
// so the Temporal CLI and UI links work without flags.
const (
	DefaultTemporalAddress = "127.0.0.1:7233"
	DefaultUIAddress       = "127.0.0.1:8233"
	DefaultNamespace       = "default"

	// DatabaseFile is the name of the SQLite file inside TemporalConfig.DataDir.
	DatabaseFile = "temporal.db"
)

const (
	clusterName = "active"
	// loopback is where the internal services of the embedded server listen,
	// whatever the frontend address is.
	loopback = "127.0.0.1"
	// readyTimeout bounds the wait for a started server to serve, for
	// callers whose context has no deadline. A start takes a few seconds.
	readyTimeout = 2 * time.Minute
)

// reservedPortSet lists ports never handed to internal services: the ports
// users and the rest of the dev stack expect to find free.
func reservedPortSet() map[int]bool {
	return map[int]bool{7233: true, 7243: true, 8080: true, 8233: true}
}

// TemporalConfig configures the embedded Temporal server.
type TemporalConfig struct {
	// Address is host:port of the frontend gRPC service; default
	// DefaultTemporalAddress. The internal services (history, matching,
	// worker) always listen on free loopback ports.
	Address string
	// DataDir holds DatabaseFile (unless DatabaseURL is set) and the
	// server's certificates; it is created if missing, and a later start
	// on the same directory resumes the same data.
	DataDir string
	// DatabaseURL, when set, keeps the server's state in PostgreSQL
	// instead of SQLite: in its database and <database>_visibility, made
	// and migrated to this server's schema at start. Several servers may
	// share it (separate hosts of one Temporal cluster).
	DatabaseURL string
	// HistoryShards is the number of history shards of a new database;
	// default 1. It is fixed once the database exists: the server keeps
	// the database's number and logs a mismatch.
	HistoryShards int
	// TaskWorkers bounds how many of history's timer and transfer tasks
	// run at once, each queue (visibility's: half as many); 0: Temporal's
	// default, 512 each. Tasks past the bound wait in the scheduler's
	// queue, without a deadline, instead of each waiting for a CPU past
	// its persistence deadline on a small machine.
	TaskWorkers int
	// Namespace is created if it does not exist; default DefaultNamespace.
	Namespace string
	// SearchAttributes are registered on Namespace if missing, on a new and
	// on an existing database alike. An attribute that exists with another
	// type is an error.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger
	// LogLevel is the least level of server logs passed on; default warn
	// (at info the server logs every shard and queue event).
	LogLevel slog.Leveler
	// CA, when set, secures the frontend with mutual TLS: it serves a
	// certificate from CA and accepts only clients presenting one from CA,
	// and every call is authorized by the client's identity (auth.go):
	// admins do anything, a node works only its own task queue. The
	// server's certificates are kept in DataDir/tls. Nil: plaintext, and
	// every caller is an admin.
	CA *pki.CA
	// CountRequests makes the frontend count the calls it serves
	// (Temporal.FrontendRequests), for measuring how much a workload asks
	// of Temporal. Off by default.
	CountRequests bool
	// NodeCertRevoked, when set, says whether the node certificate with
	// a serial (auth.CertSerial) was revoked (its Node deleted): its
	// calls are then denied. Only with CA.
	NodeCertRevoked func(ctx context.Context, serial string) (bool, error)
	// ServerNames are names (or addresses) the frontend's certificate
	// carries besides its address and the loopback names: those clients
	// on other hosts dial it by. Only with CA.
	ServerNames []string
	// Services are the server's services this process runs (Frontend,
	// History, Matching, WorkerService); empty is all four, a whole
	// server whose services know each other in this process. A part is
	// one process of a Temporal cluster on DatabaseURL (required), which
	// may run each service as several processes on several hosts, as
	// Temporal clusters are scaled: the processes find each other
	// through the database's membership table and gossip (ringpop,
	// mutual TLS with the internode CA when CA is set). Address is then
	// the frontend's, served here only when Services has Frontend.
	Services []string
	// BroadcastAddress is the IP this process's services listen on and
	// the other processes of a split server reach them at; default
	// loopback. Not used by a whole server.
	BroadcastAddress string
	// ServicePorts are the gRPC ports of this process's history,
	// matching and worker services in a split server, by service name;
	// a missing one is a free port, which the others learn through
	// membership.
	ServicePorts map[string]int
	// MembershipPort is the first of the ports this process's services
	// gossip on in a split server, one each, in the order frontend,
	// history, matching, worker (those it runs); 0: a free port each from
	// 20000 to 32767, which differs at every start.
	MembershipPort int
}

// The server's services, as Services names them.
const (
	Frontend      = string(primitives.FrontendService)
	History       = string(primitives.HistoryService)
	Matching      = string(primitives.MatchingService)
	WorkerService = string(primitives.WorkerService)
)

// allServices are a whole server's.
var allServices = []string{Frontend, History, Matching, WorkerService}

// layout is which of the server's services this process runs, and how
// they find the others.
type layout struct {
	services  []string
	split     bool   // some services run elsewhere: membership by gossip
	broadcast string // the IP this process's services listen on
	ports     map[string]int
	gossip    int // the first membership port; 0: free ones
}

func (l layout) runs(service string) bool { return slices.Contains(l.services, service) }

// newLayout checks cfg's Services, BroadcastAddress and ServicePorts.
func newLayout(cfg TemporalConfig) (layout, error) {
	l := layout{services: allServices, broadcast: loopback, ports: cfg.ServicePorts, gossip: cfg.MembershipPort}
	if len(cfg.Services) == 0 {
		if cfg.MembershipPort != 0 {
			return l, errors.New("a membership port is for a server split over processes: a whole server does not gossip")
		}
		return l, nil
	}
	l.services = nil
	for _, s := range cfg.Services {
		if !slices.Contains(allServices, s) {
			return l, fmt.Errorf("service %q: want %s, %s, %s or %s", s, Frontend, History, Matching, WorkerService)
		}
		if !slices.Contains(l.services, s) {
			l.services = append(l.services, s)
		}
	}
	l.split = len(l.services) < len(allServices)
	if !l.split {
		if cfg.MembershipPort != 0 {
			return l, errors.New("a membership port is for a server split over processes: a whole server does not gossip")
		}
		return l, nil
	}
	if last := cfg.MembershipPort + len(l.services) - 1; cfg.MembershipPort < 0 || (cfg.MembershipPort > 0 && last > membershipPortHigh) {
		return l, fmt.Errorf("membership port %d: want 1 to %d for %d services (Temporal's membership table keeps a port as a smallint)",
			cfg.MembershipPort, membershipPortHigh-len(l.services)+1, len(l.services))
	}
	if cfg.DatabaseURL == "" {
		return l, errors.New("a server split over processes keeps its state in PostgreSQL: give it a database URL")
	}
	if cfg.BroadcastAddress != "" {
		ip := net.ParseIP(cfg.BroadcastAddress)
		if ip == nil || ip.IsUnspecified() {
			return l, fmt.Errorf("broadcast address %q: want the IP address the other processes reach this one at", cfg.BroadcastAddress)
		}
		l.broadcast = cfg.BroadcastAddress
	}
	for name, port := range cfg.ServicePorts {
		if name == Frontend || !slices.Contains(allServices, name) || port < 0 || port > 65535 {
			return l, fmt.Errorf("port %d of service %q: want a port of %s, %s or %s", port, name, History, Matching, WorkerService)
		}
	}
	return l, nil
}

// Temporal is a running embedded Temporal server.
type Temporal struct {
	server      temporal.Server
	level       *serverLevel
	address     string
	httpAddress string
	internal    []string // host:port of history, matching and worker
	namespace   string
	dbPath      string
	register    bool            // the namespace is registered through the API
	requests    *requestCounter // nil unless TemporalConfig.CountRequests
	ca          *pki.CA         // nil: plaintext
	systemTLS   *tls.Config     // the server's own admin client; nil: plaintext
	queues      *activityQueues // the authorizer's lookups; nil without it

	stopOnce sync.Once
	stopErr  error
}

// StartTemporal starts an embedded Temporal server with all its services in
// this process and returns once the frontend accepts calls, the namespace
// exists and the search attributes are registered and usable in queries.
// ctx bounds the start; the server itself runs until Stop.
func StartTemporal(ctx context.Context, cfg TemporalConfig) (*Temporal, error) {
	host, port, lay, err := cfg.checkAndDefault()
	if err != nil {
		return nil, err
	}
	level := newServerLevel(cfg.LogLevel)
	logger := newServerLogger(cfg.Logger, level)
	stores, dbPath, release, err := openStores(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	defer release()
	conf, err := serverConfig(host, port, stores, lay)
	if err != nil {
		return nil, fmt.Errorf("start temporal: %w", err)
	}
	t := &Temporal{level: level, address: net.JoinHostPort(dialHost(host), strconv.Itoa(port)),
		httpAddress: net.JoinHostPort(dialHost(host), strconv.Itoa(conf.Services[Frontend].RPC.HTTPPort)),
		internal:    internalAddresses(conf), namespace: cfg.Namespace, dbPath: dbPath, register: cfg.DatabaseURL != "", ca: cfg.CA}
	extra, err := t.secure(cfg, conf, host)
	if err != nil {
		return nil, fmt.Errorf("start temporal: %w", err)
	}
	if cfg.CountRequests {
		t.requests = newRequestCounter()
		extra = append(extra, temporal.WithChainedFrontendGrpcInterceptors(t.requests.intercept))
	}
	t.server, err = newServer(conf, lay, cfg.CA != nil, cfg.TaskWorkers, logger, extra...)
	release() // the cluster's metadata is saved: the other processes may build theirs
	if err != nil {
		return nil, fmt.Errorf("start temporal: %w", err)
	}
	if err := startServer(t.server); err != nil {
		level.stopping()
		_ = stopServer(t.server)
		return nil, fmt.Errorf("start temporal on %s: %w", cfg.Address, err)
	}
	// A process without the frontend is ready once its services have
	// joined; the frontend's process waits for the whole cluster to serve.
	if lay.runs(Frontend) {
		readyCtx, cancel := context.WithTimeout(ctx, readyTimeout)
		defer cancel()
		if err := t.waitReady(readyCtx, cfg.SearchAttributes, cfg.Logger); err != nil {
			_ = t.Stop()
			return nil, fmt.Errorf("start temporal on %s: %w", cfg.Address, err)
		}
	}
	level.started()
	return t, nil
}

// StartTemporalOnFreePorts is StartTemporal on a free loopback port when
// cfg.Address is empty. A port found free can be taken by another process
// (tests run in parallel processes) before the server binds it, and the
// internal services' ports are picked the same way: a start that meets a
// taken port tries again on others, unless the port was the caller's.
func StartTemporalOnFreePorts(ctx context.Context, cfg TemporalConfig) (*Temporal, error) {
	explicitAddress := cfg.Address != ""
	var lastErr error
	for range 3 {
		if !explicitAddress {
			port, err := freePort(loopback, reservedPortSet())
			if err != nil {
				return nil, err
			}
			cfg.Address = net.JoinHostPort(loopback, strconv.Itoa(port))
		}
		srv, err := StartTemporal(ctx, cfg)
		if err == nil {
			return srv, nil
		}
		lastErr = err
		var frontendTaken *PortInUseError
		if !errors.Is(err, syscall.EADDRINUSE) || (explicitAddress && errors.As(err, &frontendTaken)) {
			break
		}
	}
	return nil, lastErr
}

// checkAndDefault fills in cfg's defaults, checks it and makes its data
// directory; it returns the frontend's host and port and the services'
// layout.
func (cfg *TemporalConfig) checkAndDefault() (string, int, layout, error) {
	if cfg.Address == "" {
		cfg.Address = DefaultTemporalAddress
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LogLevel == nil {
		cfg.LogLevel = slog.LevelWarn
	}
	if cfg.HistoryShards == 0 {
		cfg.HistoryShards = 1
	}
	if cfg.DataDir == "" {
		return "", 0, layout{}, errors.New("start temporal: no data directory")
	}
	host, port, err := frontendHostPort(cfg.Address)
	if err != nil {
		return "", 0, layout{}, fmt.Errorf("start temporal: %w", err)
	}
	lay, err := newLayout(*cfg)
	if err != nil {
		return "", 0, layout{}, fmt.Errorf("start temporal: %w", err)
	}
	// Before anything else: a second dev stack must fail here, not after it
	// has opened the database of the first one.
	if lay.runs(Frontend) {
		if err := CheckPortFree(cfg.Address); err != nil {
			return "", 0, layout{}, err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return "", 0, layout{}, fmt.Errorf("start temporal: create data dir: %w", err)
	}
	return host, port, lay, nil
}

// openStores readies the server's state: in PostgreSQL when cfg has a
// database URL, else in the SQLite file it returns the path of.
// In PostgreSQL, release ends the schema lock, held until the server is
// built.
func openStores(ctx context.Context, cfg TemporalConfig, logger serverLogger) (_ persistence, dbPath string, release func(), _ error) {
	var stores persistence
	var err error
	if cfg.DatabaseURL != "" {
		if stores.main, stores.visibility, release, err = postgresStores(ctx, cfg.DatabaseURL, logger); err != nil {
			return stores, "", nil, fmt.Errorf("start temporal: %w", err)
		}
		stores.plugin = "postgres"
		stores.shards = cfg.HistoryShards
		return stores, "", release, nil
	}
	dbPath = filepath.Join(cfg.DataDir, DatabaseFile)
	if stores, err = sqliteStores(dbPath, cfg.Namespace, cfg.SearchAttributes); err != nil {
		return stores, "", nil, fmt.Errorf("start temporal: %s: %w", dbPath, err)
	}
	stores.shards = cfg.HistoryShards
	return stores, dbPath, func() {}, nil
}

// secure, with cfg.CA, serves the frontend with mutual TLS and returns
// the server options of the authorizer and its claim mapper; it keeps the
// server's own client's TLS and the authorizer's lookups in t.
func (t *Temporal) secure(cfg TemporalConfig, conf *config.Config, host string) ([]temporal.ServerOption, error) {
	if cfg.CA == nil {
		return nil, nil
	}
	files, err := ensureServerTLS(cfg.CA, filepath.Join(cfg.DataDir, "tls"), append([]string{dialHost(host)}, cfg.ServerNames...))
	if err != nil {
		return nil, err
	}
	conf.Global.TLS = files.rootTLS()
	if t.systemTLS, err = pki.ClientTLS(files.ca, files.systemCert, files.systemKey); err != nil {
		return nil, err
	}
	address, tlsConf := t.address, t.systemTLS
	t.queues = &activityQueues{dial: func(ctx context.Context) (client.Client, error) {
		return client.DialContext(ctx, systemClientOptions(address, cfg.Namespace, tlsConf, cfg.Logger))
	}}
	authz := &nodeAuthorizer{namespace: cfg.Namespace, tokens: tasktoken.NewSerializer(), queueOf: t.queues.of,
		revoked: cfg.NodeCertRevoked, log: cfg.Logger}
	return []temporal.ServerOption{
		temporal.WithAuthorizer(authz),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper{} }),
	}, nil
}

// Address is the host:port clients dial.
func (t *Temporal) Address() string { return t.address }

// HTTPAddress is the host:port of the frontend's HTTP API (and Nexus
// endpoints), on a free port picked at start.
func (t *Temporal) HTTPAddress() string { return t.httpAddress }

// Namespace is the namespace the server was started with.
func (t *Temporal) Namespace() string { return t.namespace }

// DatabasePath is the SQLite file holding the server's state; empty when
// it is kept in PostgreSQL.
func (t *Temporal) DatabasePath() string { return t.dbPath }

// FrontendRequests returns how many calls the frontend has served since the
// start, by full gRPC method name (e.g.
// "/temporal.api.workflowservice.v1.WorkflowService/PollActivityTaskQueue");
// long polls count once, when they arrive. It returns nil unless the server
// was started with TemporalConfig.CountRequests.
func (t *Temporal) FrontendRequests() map[string]uint64 {
	if t.requests == nil {
		return nil
	}
	return t.requests.snapshot()
}

// Stop stops all services and releases their ports. It is safe to call more
// than once; StartTemporal may then run again on the same DataDir.
func (t *Temporal) Stop() error {
	t.stopOnce.Do(func() {
		t.level.stopping()
		if t.queues != nil {
			t.queues.close()
		}
		if err := stopServer(t.server); err != nil {
			t.stopErr = fmt.Errorf("stop temporal on %s: %w", t.address, err)
		}
	})
	return t.stopErr
}

// frontendHostPort validates the frontend address: the server binds to an IP,
// never a name, so "localhost" is taken as the IPv4 loopback.
func frontendHostPort(addr string) (string, int, error) {
	host, port, err := splitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if port == 0 {
		return "", 0, fmt.Errorf("address %q: the frontend needs a fixed port", addr)
	}
	switch {
	case host == "" || host == "localhost":
		host = loopback
	case net.ParseIP(host) == nil:
		return "", 0, fmt.Errorf("address %q: host must be an IP address", addr)
	}
	return host, port, nil
}

// internalAddresses are where this process's services other than the
// frontend listen.
func internalAddresses(conf *config.Config) []string {
	var out []string
	for name, svc := range conf.Services {
		if name != Frontend && svc.RPC.GRPCPort != 0 {
			out = append(out, net.JoinHostPort(dialHost(svc.RPC.BindOnIP), strconv.Itoa(svc.RPC.GRPCPort)))
		}
	}
	return out
}

// dialHost is the host clients (and the other services) use to reach a
// server bound to host.
func dialHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return loopback
	}
	return host
}

// persistence is where the server keeps its state.
type persistence struct {
	plugin           string // name of the data stores in the configuration
	main, visibility *config.SQL
	shards           int
}

// sqliteStores keeps the state in the SQLite file dbPath, made with the
// namespace if missing. Creating the namespace in the database before the
// server starts (with the search attributes) saves the wait for the
// namespace caches of all services to pick it up. On an existing namespace
// this is a no-op and ensureSearchAttributes adds what is missing through
// the API.
func sqliteStores(dbPath, namespace string, attrs map[string]enumspb.IndexedValueType) (persistence, error) {
	sqlConf := sqliteConfig(dbPath)
	if err := ensureSchema(sqlConf); err != nil {
		return persistence{}, err
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, namespace, false, attrs)
	if err != nil {
		return persistence{}, fmt.Errorf("namespace %s: %w", namespace, err)
	}
	if err := sqliteschema.CreateNamespaces(sqlConf, ns); err != nil {
		return persistence{}, fmt.Errorf("namespace %s: %w", namespace, err)
	}
	return persistence{plugin: "sqlite", main: sqlConf, visibility: sqlConf}, nil
}

func sqliteConfig(dbPath string) *config.SQL {
	return &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: dbPath,
		// mode is a URI parameter, the rest are pragmas. WAL with
		// synchronous=NORMAL is safe against corruption (a power cut can
		// lose the last commits, not the database) and was measured 4x
		// faster than the defaults on the dev machine.
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "1",
		},
	}
}

// ensureSchema creates the Temporal and visibility schemas in a new (or
// empty) database and leaves a complete one alone. A database with only some
// of the tables (a crash during the first start) is reported, not patched.
func ensureSchema(conf *config.SQL) error {
	db, err := sql.NewSQLAdminDB(sqlplugin.DbKindUnknown, conf, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer func() { _ = db.Close() }()

	tables, err := db.ListTables(conf.DatabaseName)
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	// The first table of the main schema and the last one to be created
	// (the visibility schema runs second).
	hasMain := slices.Contains(tables, "namespaces")
	hasVisibility := slices.Contains(tables, "executions_visibility")
	switch {
	case hasMain && hasVisibility:
		return nil
	case len(tables) == 0:
		if err := sqliteschema.SetupSchemaOnDB(db); err != nil {
			return fmt.Errorf("set up schema: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("database has an incomplete Temporal schema (%d tables); remove the file to start afresh", len(tables))
	}
}

// serverConfig is the static configuration of the services lay runs: a
// whole server's four on loopback ports, with static membership (no
// gossip ports), or a split server's part on its broadcast address, with
// gossip on the operator's membership ports or free ones; no metrics or pprof listeners,
// archival off.
func serverConfig(host string, port int, stores persistence, lay layout) (*config.Config, error) {
	avoid := reservedPortSet()
	avoid[port] = true
	services, httpPort, err := serviceConfigs(host, port, lay, avoid)
	if err != nil {
		return nil, err
	}
	if lay.split {
		if err := gossipPorts(services, lay, avoid); err != nil {
			return nil, err
		}
	}
	frontendAddr := net.JoinHostPort(dialHost(host), strconv.Itoa(port))
	conf := &config.Config{}
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = lay.broadcast
	conf.Persistence.DefaultStore = stores.plugin
	conf.Persistence.VisibilityStore = stores.plugin
	conf.Persistence.NumHistoryShards = int32(stores.shards)
	conf.Persistence.DataStores = map[string]config.DataStore{stores.plugin: {SQL: stores.main}}
	if stores.visibility != stores.main {
		conf.Persistence.VisibilityStore = stores.plugin + "-visibility"
		conf.Persistence.DataStores[conf.Persistence.VisibilityStore] = config.DataStore{SQL: stores.visibility}
	}
	conf.ClusterMetadata = clusterMetadata(frontendAddr, net.JoinHostPort(dialHost(host), strconv.Itoa(httpPort)))
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = services
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	// The worker service's SDK client dials this.
	conf.PublicClient.HostPort = frontendAddr
	return conf, nil
}

// serviceConfigs are the RPC settings of the services lay runs: the
// frontend on host:port with a free HTTP port (returned), the others on
// their given ports or free ones.
func serviceConfigs(host string, port int, lay layout, avoid map[int]bool) (map[string]config.Service, int, error) {
	services := map[string]config.Service{}
	httpPort := 0
	if lay.runs(Frontend) {
		p, err := freePort(loopback, avoid)
		if err != nil {
			return nil, 0, err
		}
		httpPort = p
		services[Frontend] = config.Service{RPC: config.RPC{GRPCPort: port, HTTPPort: httpPort, BindOnIP: host}}
	}
	for _, name := range lay.services {
		if name == Frontend {
			continue
		}
		p := lay.ports[name]
		if p == 0 {
			var err error
			if p, err = freePort(lay.broadcast, avoid); err != nil {
				return nil, 0, err
			}
		}
		services[name] = config.Service{RPC: config.RPC{GRPCPort: p, BindOnIP: lay.broadcast}}
	}
	return services, httpPort, nil
}

// gossipPorts gives each service of a split server's part a membership
// port of its own: the operator's, in allServices' order, or a free one.
func gossipPorts(services map[string]config.Service, lay layout, avoid map[int]bool) error {
	next := lay.gossip
	for _, name := range allServices {
		svc, ok := services[name]
		if !ok {
			continue
		}
		p := next
		if next != 0 {
			next++
		} else {
			var err error
			if p, err = freeMembershipPort(svc.RPC.BindOnIP, avoid); err != nil {
				return err
			}
		}
		svc.RPC.MembershipPort = p
		services[name] = svc
	}
	// Membership keeps a ring per service of the configuration; each
	// member tells its own port, so those of other processes need none.
	for _, name := range allServices {
		if _, ok := services[name]; !ok {
			services[name] = config.Service{}
		}
	}
	return nil
}

// clusterMetadata is a single cluster's, its frontend at these addresses.
func clusterMetadata(frontendAddr, httpAddr string) *cluster.Config {
	return &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             frontendAddr,
				HTTPAddress:            httpAddr,
			},
		},
	}
}

// dynamicConfig is the tuning measured on the 2-core dev machine (DESIGN.md,
// "Dev stack and tests"): ~4x the throughput of the defaults and ~40 ms idle
// latency instead of ~550 ms; and TemporalConfig.TaskWorkers when set.
func dynamicConfig(taskWorkers int) dynamicconfig.StaticClient {
	dc := dynamicconfig.StaticClient{
		// The transfer queue (which hands new tasks to matching) is rate
		// limited to a few polls a second by default: the main source of
		// idle latency.
		dynamicconfig.TransferProcessorMaxPollRPS.Key(): 1000,
		// One partition per task queue: with a single matching host and a
		// handful of pollers, more partitions only scatter the pollers.
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,
		// Bounds the occasional missed wake-up of a client long-polling a
		// finished workflow's result to 2 s instead of 20 s.
		dynamicconfig.HistoryLongPollExpirationInterval.Key():     2 * time.Second,
		dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key(): true,
		// From `temporal server start-dev`: a smaller mutable-state cache
		// (memory) and room for the UI's and tests' list queries.
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                 8096,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key(): 100,
		// The worker service starts SDK workers for these background jobs
		// and never stops them (server v1.32.1: "Nothing is gracefully
		// stopping these workers"): after Stop they would keep polling, and
		// after a restart on the same port they would poll the new server
		// with the old one's closed resources. A dev database does not need
		// the scavengers; with the parent-close-policy worker off, history
		// applies parent close policies itself, whatever the child count.
		dynamicconfig.TaskQueueScannerEnabled.Key():       false,
		dynamicconfig.HistoryScannerEnabled.Key():         false,
		dynamicconfig.EnableParentClosePolicyWorker.Key(): false,
	}
	if taskWorkers > 0 {
		dc[dynamicconfig.TimerProcessorSchedulerWorkerCount.Key()] = taskWorkers
		dc[dynamicconfig.TransferProcessorSchedulerWorkerCount.Key()] = taskWorkers
		dc[dynamicconfig.VisibilityProcessorSchedulerWorkerCount.Key()] = max(taskWorkers/2, 1)
	}
	return dc
}

// newServer and startServer turn a panic of the server's startup (our logger
// panics on Fatal, e.g. when a port cannot be bound) into an error.
func newServer(conf *config.Config, lay layout, internodeTLS bool, taskWorkers int, logger serverLogger, extra ...temporal.ServerOption) (srv temporal.Server, err error) {
	defer recoverServerPanic(&err)
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("claim mapper: %w", err)
	}
	dc := dynamicConfig(taskWorkers)
	opts := []temporal.ServerOption{
		temporal.WithConfig(conf),
		temporal.ForServices(lay.services),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
	}
	if lay.split {
		// Gossip between the processes is internode traffic: mutual TLS
		// with the internode CA, as their gRPC calls.
		dc[dynamicconfig.EnableRingpopTLS.Key()] = internodeTLS
	} else {
		hosts := make(map[primitives.ServiceName]static.Hosts, len(conf.Services))
		for name, svc := range conf.Services {
			hosts[primitives.ServiceName(name)] = static.SingleLocalHost(
				net.JoinHostPort(dialHost(svc.RPC.BindOnIP), strconv.Itoa(svc.RPC.GRPCPort)))
		}
		opts = append(opts, temporal.WithStaticHosts(hosts))
	}
	opts = append(append(opts, temporal.WithDynamicConfigClient(dc)), extra...)
	return temporal.NewServer(opts...)
}

func startServer(srv temporal.Server) (err error) {
	defer recoverServerPanic(&err)
	return srv.Start()
}

func stopServer(srv temporal.Server) (err error) {
	defer recoverServerPanic(&err)
	return srv.Stop()
}

func recoverServerPanic(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if p, ok := r.(serverPanic); ok {
		*err = p
		return
	}
	panic(r)
}

// KeywordAttributes maps each name to the Keyword type, the shape of
// TemporalConfig.SearchAttributes for zonewright's workflows.
func KeywordAttributes(names ...string) map[string]enumspb.IndexedValueType {
	out := make(map[string]enumspb.IndexedValueType, len(names))
	for _, n := range names {
		out[n] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	}
	return out
}
