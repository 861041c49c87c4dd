//go:build !illumos && !nodev

package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/workflows"
)

// temporalServer runs zonewright's Temporal server in a process of its
// own: the production server (--temporal-database-url: PostgreSQL) or a
// stack's whose parts run as separate processes (the chaos harness kills
// it and starts it again; without --temporal-database-url its state is the
// SQLite file in --data-dir). Its frontend always runs mutual TLS with the
// cluster CA of --state-dir, and zonewright's authorizer: admins do
// anything, a node works only its own task queue, and a deleted node's
// certificate nothing (with --database-url).
func temporalServer(ctx context.Context, args []string) error {
	fs, o := temporalServerFlags()
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	log, err := newLogger(o.logLevel)
	if err != nil {
		return err
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(o.stateDir, "tls"), controlplane.CACommonName)
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	if o.shards == 0 && o.temporalDB != "" {
		o.shards = defaultPostgresShards
	}
	if o.shards < 0 || o.shards > maxHistoryShards {
		return fmt.Errorf("--history-shards %d: want 1 to %d", o.shards, maxHistoryShards)
	}
	if o.taskWorkers < 0 || o.taskWorkers > maxTaskWorkers {
		return fmt.Errorf("--task-workers %d: want 0 (Temporal's default) to %d", o.taskWorkers, maxTaskWorkers)
	}
	if services := splitList(o.services); len(services) < 4 && o.temporalDB == "" {
		return fmt.Errorf("--services %s: a server split over processes keeps its state in PostgreSQL: give it --temporal-database-url", o.services)
	}
	revoked, closeDB, err := nodeCertRevocations(ctx, o.zonewrightDB, log)
	if err != nil {
		return err
	}
	defer closeDB()
	ports := map[string]int{}
	for name, p := range map[string]int{devstack.History: o.historyPort, devstack.Matching: o.matchingPort, devstack.WorkerService: o.workerPort} {
		if p != 0 {
			ports[name] = p
		}
	}
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalConfig{Address: o.addr, DataDir: o.dataDir, DatabaseURL: o.temporalDB,
		HistoryShards: o.shards, TaskWorkers: o.taskWorkers, Namespace: o.namespace, CA: ca, ServerNames: splitList(o.sans), NodeCertRevoked: revoked,
		Services: splitList(o.services), BroadcastAddress: o.broadcast, ServicePorts: ports, MembershipPort: o.membershipPort,
		SearchAttributes: devstack.KeywordAttributes(workflows.SearchAttributeNames...), Logger: log.With("component", "temporal-server")})
	if err != nil {
		return fmt.Errorf("Temporal server: %w", err)
	}
	stops := []func() error{tmp.Stop}
	defer func() {
		for _, stop := range stops {
			_ = stop()
		}
	}()
	// The control plane's certificate (serve's --temporal-tls-cert) and an
	// operator's (the Temporal CLI's, a browser's for the UI), issued at
	// every start beside the CA, as `zonewright dev` does.
	tlsDir := filepath.Join(o.stateDir, "tls")
	if _, err := devstack.EnsureClientTLS(ca, tlsDir, "temporal-control-plane", devstack.ControlPlaneName); err != nil {
		return err
	}
	opCert, err := devstack.EnsureClientTLS(ca, tlsDir, "temporal-operator", "operator", devstack.AdminOrg)
	if err != nil {
		return err
	}
	database := tmp.DatabasePath()
	if o.temporalDB != "" {
		database = redact(o.temporalDB)
	}
	attrs := []any{"address", tmp.Address(), "services", o.services, "namespace", o.namespace, "database", database, "client-certificates", tlsDir}
	if o.uiAddr != "" {
		ui, err := devstack.StartAdminUI(devstack.AdminUIConfig{Address: o.uiAddr, CA: ca, ServerNames: splitList(o.sans),
			CertDir: filepath.Join(o.dataDir, "ui"), TemporalAddress: tmp.Address(), Namespace: o.namespace, TLS: opCert})
		if err != nil {
			return fmt.Errorf("Temporal Web UI: %w", err)
		}
		stops = append([]func() error{ui.Stop}, stops...)
		attrs = append(attrs, "ui", ui.URL())
	}
	log.Info("Temporal serving", attrs...)
	<-ctx.Done()
	return nil
}

// temporalServerOptions are the flags of `zonewright temporal`.
type temporalServerOptions struct {
	dataDir, temporalDB, zonewrightDB, sans, stateDir, addr, uiAddr, namespace, logLevel string
	services, broadcast                                                                  string
	shards, taskWorkers, historyPort, matchingPort, workerPort, membershipPort           int
}

func temporalServerFlags() (*flag.FlagSet, *temporalServerOptions) {
	o := &temporalServerOptions{}
	fs := flag.NewFlagSet("temporal", flag.ExitOnError)
	fs.StringVar(&o.dataDir, "data-dir", env("ZW_TEMPORAL_DATA_DIR", ".data/temporal"), "where the server keeps its certificates, and its SQLite database without --temporal-database-url (env ZW_TEMPORAL_DATA_DIR)")
	fs.StringVar(&o.temporalDB, "temporal-database-url", env("ZW_TEMPORAL_DATABASE_URL", ""), "PostgreSQL URL of the server's own database (postgres://user:password@host:5432/temporal); it and <database>"+devstack.VisibilitySuffix+" are created and migrated at start (env ZW_TEMPORAL_DATABASE_URL)")
	fs.StringVar(&o.zonewrightDB, "database-url", env("ZW_DATABASE_URL", ""), "PostgreSQL URL of zonewright's database, serve's: a deleted node's certificate, recorded there, is refused; without it only its expiry ends it (env ZW_DATABASE_URL)")
	fs.IntVar(&o.shards, "history-shards", envInt("ZW_TEMPORAL_HISTORY_SHARDS", 0), "history shards of a new database, fixed once it exists; default 1 on SQLite, "+strconv.Itoa(defaultPostgresShards)+" on PostgreSQL (env ZW_TEMPORAL_HISTORY_SHARDS)")
	fs.IntVar(&o.taskWorkers, "task-workers", envInt("ZW_TEMPORAL_TASK_WORKERS", 0), "how many of history's timer and transfer tasks run at once, each (visibility's: half); 0: Temporal's default, 512. On a small host, fewer keep the tasks past the bound waiting in a queue instead of timing out waiting for a CPU (docs/benchmark.md) (env ZW_TEMPORAL_TASK_WORKERS)")
	fs.StringVar(&o.sans, "tls-san", env("ZW_TEMPORAL_TLS_SAN", ""), "comma-separated names and addresses the frontend's and the UI's certificates carry besides --address and localhost: those agents, serve and browsers reach them by (env ZW_TEMPORAL_TLS_SAN)")
	fs.StringVar(&o.stateDir, "state-dir", env("ZW_STATE_DIR", ".data"), "the control plane's state directory: the cluster CA in its tls/ (made if missing) secures the frontend, and the control plane's and operators' client certificates are issued there (env ZW_STATE_DIR)")
	fs.StringVar(&o.addr, "address", env("ZW_TEMPORAL_ADDRESS", devstack.DefaultTemporalAddress), "frontend address (env ZW_TEMPORAL_ADDRESS)")
	fs.StringVar(&o.uiAddr, "ui-address", env("ZW_TEMPORAL_UI_ADDRESS", ""), "serve the Temporal Web UI here over HTTPS, to cluster admins' client certificates only (tls/temporal-operator.crt); empty: no UI (env ZW_TEMPORAL_UI_ADDRESS)")
	fs.StringVar(&o.namespace, "namespace", env("ZW_TEMPORAL_NAMESPACE", devstack.DefaultNamespace), "namespace made if missing (env ZW_TEMPORAL_NAMESPACE)")
	fs.StringVar(&o.logLevel, "log-level", env("ZW_LOG_LEVEL", "info"), "debug, info, warn or error (env ZW_LOG_LEVEL)")
	fs.StringVar(&o.services, "services", env("ZW_TEMPORAL_SERVICES", "frontend,history,matching,worker"), "the server's services this process runs; fewer than all four make it one process of a server split over several (each service may run as several processes, on several hosts), which needs --temporal-database-url: the processes find each other through that database and gossip over mutual TLS (env ZW_TEMPORAL_SERVICES)")
	fs.StringVar(&o.broadcast, "broadcast-address", env("ZW_TEMPORAL_BROADCAST_ADDRESS", "127.0.0.1"), "with --services: the IP address this process's history, matching and worker services listen on and the other processes reach them at (env ZW_TEMPORAL_BROADCAST_ADDRESS)")
	fs.IntVar(&o.historyPort, "history-port", envInt("ZW_TEMPORAL_HISTORY_PORT", 0), "with --services: the history service's gRPC port; 0: a free one, which the other processes learn through membership (env ZW_TEMPORAL_HISTORY_PORT)")
	fs.IntVar(&o.matchingPort, "matching-port", envInt("ZW_TEMPORAL_MATCHING_PORT", 0), "with --services: the matching service's gRPC port; 0: a free one (env ZW_TEMPORAL_MATCHING_PORT)")
	fs.IntVar(&o.workerPort, "worker-port", envInt("ZW_TEMPORAL_WORKER_PORT", 0), "with --services: the worker service's gRPC port; 0: a free one (env ZW_TEMPORAL_WORKER_PORT)")
	fs.IntVar(&o.membershipPort, "membership-port", envInt("ZW_TEMPORAL_MEMBERSHIP_PORT", 0), "with --services: the first port this process's services gossip on, one each in the order frontend, history, matching, worker (those it runs), at most 32767; 0: a free one each from 20000 to 32767, another at every start (env ZW_TEMPORAL_MEMBERSHIP_PORT)")
	return fs, o
}

// nodeCertRevocations looks deleted nodes' certificates up in zonewright's
// database; without one, it says what that leaves open.
func nodeCertRevocations(ctx context.Context, url string, log *slog.Logger) (func(context.Context, string) (bool, error), func(), error) {
	if url == "" {
		log.Warn("no --database-url: a deleted node's certificate keeps working with Temporal until it expires")
		return nil, func() {}, nil
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("--database-url: %w", err)
	}
	return (&auth.NodeCertificates{Pool: pool}).Revoked, pool.Close, nil
}

// defaultPostgresShards is the history shards of a new PostgreSQL
// database: a shard is the unit a history host owns, so the number
// bounds how far history can be spread over hosts later, and it cannot
// change once the database exists.
const defaultPostgresShards = 128

// maxTaskWorkers bounds --task-workers: Temporal's default is 512.
const maxTaskWorkers = 4096

// maxHistoryShards bounds --history-shards: each shard is a row and a set
// of queue processors on its history host, and more than Temporal's
// largest published clusters use would only cost at rest.
const maxHistoryShards = 16384
