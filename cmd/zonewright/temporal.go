//go:build !illumos && !nodev

package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/workflows"
)

// temporalServer runs zonewright's Temporal server in a process of its
// own: the production server (--database-url: PostgreSQL) or a stack's
// whose parts run as separate processes (the chaos harness kills it and
// starts it again; without --database-url its state is the SQLite file in
// --data-dir). Its frontend always runs mutual TLS with the cluster CA of
// --state-dir, and zonewright's authorizer: admins do anything, a node
// works only its own task queue.
func temporalServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("temporal", flag.ExitOnError)
	dataDir := fs.String("data-dir", env("ZW_TEMPORAL_DATA_DIR", ".data/temporal"), "where the server keeps its certificates, and its SQLite database without --database-url (env ZW_TEMPORAL_DATA_DIR)")
	databaseURL := fs.String("database-url", env("ZW_TEMPORAL_DATABASE_URL", ""), "PostgreSQL URL of the server's database (postgres://user:password@host:5432/temporal); it and <database>"+devstack.VisibilitySuffix+" are created and migrated at start (env ZW_TEMPORAL_DATABASE_URL)")
	shards := fs.Int("history-shards", envInt("ZW_TEMPORAL_HISTORY_SHARDS", 0), "history shards of a new database, fixed once it exists; default 1 on SQLite, "+strconv.Itoa(defaultPostgresShards)+" on PostgreSQL (env ZW_TEMPORAL_HISTORY_SHARDS)")
	sans := fs.String("tls-san", env("ZW_TEMPORAL_TLS_SAN", ""), "comma-separated names and addresses the frontend's certificate carries besides --address and localhost: those agents and serve dial it by (env ZW_TEMPORAL_TLS_SAN)")
	stateDir := fs.String("state-dir", env("ZW_STATE_DIR", ".data"), "the control plane's state directory: the cluster CA in its tls/ (made if missing) secures the frontend (env ZW_STATE_DIR)")
	addr := fs.String("address", env("ZW_TEMPORAL_ADDRESS", devstack.DefaultTemporalAddress), "frontend address (env ZW_TEMPORAL_ADDRESS)")
	namespace := fs.String("namespace", env("ZW_TEMPORAL_NAMESPACE", devstack.DefaultNamespace), "namespace made if missing (env ZW_TEMPORAL_NAMESPACE)")
	logLevel := fs.String("log-level", env("ZW_LOG_LEVEL", "info"), "debug, info, warn or error (env ZW_LOG_LEVEL)")
	_ = fs.Parse(args)
	log, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(*stateDir, "tls"), controlplane.CACommonName)
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	if *shards == 0 && *databaseURL != "" {
		*shards = defaultPostgresShards
	}
	if *shards < 0 {
		return fmt.Errorf("--history-shards %d: want a positive number", *shards)
	}
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalConfig{Address: *addr, DataDir: *dataDir, DatabaseURL: *databaseURL,
		HistoryShards: *shards, Namespace: *namespace, CA: ca, ServerNames: splitList(*sans),
		SearchAttributes: devstack.KeywordAttributes(workflows.SearchAttributeNames...), Logger: log.With("component", "temporal-server")})
	if err != nil {
		return fmt.Errorf("Temporal server: %w", err)
	}
	database := tmp.DatabasePath()
	if *databaseURL != "" {
		database = redact(*databaseURL)
	}
	log.Info("Temporal serving", "address", tmp.Address(), "namespace", *namespace, "database", database)
	<-ctx.Done()
	return tmp.Stop()
}

// defaultPostgresShards is the history shards of a new PostgreSQL
// database: a shard is the unit a history host owns, so the number
// bounds how far history can be spread over hosts later, and it cannot
// change once the database exists.
const defaultPostgresShards = 128
