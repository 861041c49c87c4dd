//go:build !illumos && !nodev

package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/workflows"
)

// temporalServer runs the embedded Temporal server alone, in a process of
// its own, for stacks whose parts run as separate processes (the chaos
// harness kills it and starts it again). Its state is the SQLite file in
// --data-dir, which survives a SIGKILL; its frontend runs mutual TLS with
// the cluster CA of --state-dir, as in the dev stack.
func temporalServer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("temporal", flag.ExitOnError)
	dataDir := fs.String("data-dir", env("ZW_TEMPORAL_DATA_DIR", ".data/temporal"), "where the server keeps its SQLite database (env ZW_TEMPORAL_DATA_DIR)")
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
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalConfig{Address: *addr, DataDir: *dataDir, Namespace: *namespace, CA: ca,
		SearchAttributes: devstack.KeywordAttributes(workflows.SearchAttributeNames...), Logger: log.With("component", "temporal-server")})
	if err != nil {
		return fmt.Errorf("embedded Temporal: %w", err)
	}
	log.Info("Temporal serving", "address", tmp.Address(), "namespace", *namespace, "database", tmp.DatabasePath())
	<-ctx.Done()
	return tmp.Stop()
}
