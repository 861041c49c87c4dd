// Package controlplane assembles the control plane that `zonewright serve`
// runs and the dev stack embeds: migrations, the store, the REST API and the
// control-plane Temporal worker.
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	tworker "go.temporal.io/sdk/worker"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/worker"
	"github.com/zonewright/zonewright/workflows"
)

// Config is everything the control plane needs to start.
type Config struct {
	DatabaseURL       string
	Listen            string // API address, host:port
	TemporalAddress   string
	TemporalNamespace string
	TemporalTLS       TLSConfig
	// Schedules tune the control plane's Temporal Schedules (host
	// reconciliation interval, orphan grace period).
	Schedules worker.ScheduleOptions
	// NodeGracePeriod without a heartbeat makes a node NotReady;
	// NodeEvictionTimeout later its pods are evicted. Zero: the defaults
	// (workflows.DefaultNodeGracePeriod, DefaultNodeEvictionTimeout).
	NodeGracePeriod     time.Duration
	NodeEvictionTimeout time.Duration
	Logger              *slog.Logger
}

// TLSConfig holds client certificate options for a Temporal server with mTLS.
type TLSConfig struct {
	CertFile, KeyFile, CAFile, ServerName string
}

func (t TLSConfig) enabled() bool { return t.CertFile != "" || t.CAFile != "" || t.ServerName != "" }

// ClientTLS is the TLS configuration of a Temporal client (the agent's):
// nil, for plaintext, when no TLS option is set.
func (t TLSConfig) ClientTLS() (*tls.Config, error) {
	if !t.enabled() {
		return nil, nil
	}
	return t.build()
}

func (t TLSConfig) build() (*tls.Config, error) {
	cfg := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load Temporal client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read Temporal CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificates in %s", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	Store    *store.Store
	Temporal client.Client
	nodes    workflows.NodeClient
	addr     string
	http     *http.Server
	log      *slog.Logger
	cancel   context.CancelFunc
	sched    worker.ScheduleOptions
	bg       sync.WaitGroup
	worker   tworker.Worker
	workerMu sync.Mutex
	served   chan error
}

// Start migrates the database (waiting for it if it is not up yet), then
// serves the API and runs the control-plane worker. The worker connects in
// the background, so the API answers (and /readyz says why it is not
// ready) while Temporal is unreachable.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("API address %s: %w (is another zonewright running? pass --listen)", cfg.Listen, err)
	}
	if err := migrateWhenUp(ctx, cfg.DatabaseURL, log); err != nil {
		ln.Close()
		return nil, err
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if err := st.EnsureNamespace(ctx, model.DefaultNamespace); err != nil {
		st.Close()
		ln.Close()
		return nil, fmt.Errorf("create the default namespace: %w", err)
	}
	opts := client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace, Logger: sdklog.NewStructuredLogger(log.With("component", "temporal-client"))}
	if cfg.TemporalTLS.enabled() {
		if opts.ConnectionOptions.TLS, err = cfg.TemporalTLS.build(); err != nil {
			st.Close()
			ln.Close()
			return nil, err
		}
	}
	tc, err := client.NewLazyClient(opts)
	if err != nil {
		st.Close()
		ln.Close()
		return nil, fmt.Errorf("Temporal client: %w", err)
	}
	nodes := workflows.NodeClient{Temporal: tc, GracePeriod: cfg.NodeGracePeriod, EvictionTimeout: cfg.NodeEvictionTimeout}
	srv := api.New(api.Config{Store: st, Logger: log, Lifecycles: &workflows.PodClient{Temporal: tc}, Nodes: &nodes, Ready: []api.ReadyCheck{
		{Name: "postgres", Check: st.Ping},
		{Name: "temporal", Check: func(ctx context.Context) error {
			_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}},
	}})
	bgCtx, cancel := context.WithCancel(context.Background())
	cp := &ControlPlane{Store: st, Temporal: tc, nodes: nodes, addr: ln.Addr().String(), log: log, cancel: cancel, sched: cfg.Schedules, served: make(chan error, 1),
		http: &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}}
	cp.http.RegisterOnShutdown(srv.CloseWatches)
	go func() { cp.served <- cp.http.Serve(ln) }()
	cp.bg.Add(1)
	go cp.runWorker(bgCtx)
	return cp, nil
}

// Addr is the address the API listens on.
func (cp *ControlPlane) Addr() string { return cp.addr }

// Served reports the API server's exit.
func (cp *ControlPlane) Served() <-chan error { return cp.served }

// runWorker starts the control-plane worker and schedules once Temporal
// answers, retrying until it does.
func (cp *ControlPlane) runWorker(ctx context.Context) {
	defer cp.bg.Done()
	for attempt := 0; ; attempt++ {
		err := worker.EnsureSchedules(ctx, cp.Temporal, cp.sched)
		if err == nil {
			w := worker.NewControl(cp.Temporal, cp.Store, cp.nodes)
			if err = w.Start(); err == nil {
				cp.workerMu.Lock()
				cp.worker = w
				cp.workerMu.Unlock()
				cp.log.Info("control-plane worker polling", "taskQueue", "zonewright-control")
				cp.bg.Add(1)
				go cp.watchNodes(ctx)
				return
			}
		}
		if attempt%10 == 0 {
			cp.log.Warn("Temporal not reachable yet; the control-plane worker will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// Stop shuts the API down gracefully, then the worker, client and store.
func (cp *ControlPlane) Stop(ctx context.Context) error {
	err := cp.http.Shutdown(ctx)
	cp.cancel()
	cp.bg.Wait()
	cp.workerMu.Lock()
	if cp.worker != nil {
		cp.worker.Stop()
	}
	cp.workerMu.Unlock()
	cp.Temporal.Close()
	cp.Store.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func migrateWhenUp(ctx context.Context, url string, log *slog.Logger) error {
	for attempt := 0; ; attempt++ {
		err := store.Reachable(ctx, url)
		if err == nil {
			return store.MigrateUp(ctx, url, log)
		}
		if !errors.Is(err, store.ErrUnavailable) {
			return err
		}
		if attempt%10 == 0 {
			log.Warn("waiting for the database", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
