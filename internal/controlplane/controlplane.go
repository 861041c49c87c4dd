// Package controlplane assembles the control plane that `zonewright serve`
// runs and the dev stack embeds: migrations, the store, the REST API, the
// control-plane Temporal worker, the endpoints controller and the service
// network snapshot.
package controlplane

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	tworker "go.temporal.io/sdk/worker"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/clusterdns"
	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/connbounds"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/endpoints"
	"github.com/zonewright/zonewright/internal/imagegc"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/imagestore"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeclient"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/podcidr"
	"github.com/zonewright/zonewright/internal/roomfeed"
	"github.com/zonewright/zonewright/internal/scheduler"
	"github.com/zonewright/zonewright/internal/servicefeed"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/transfer"
	"github.com/zonewright/zonewright/internal/workloadfeed"
	"github.com/zonewright/zonewright/worker/controlworker"
	"github.com/zonewright/zonewright/workflows"
)

// Config is everything the control plane needs to start.
type Config struct {
	DatabaseURL       string
	Listen            string // API address, host:port
	TemporalAddress   string
	TemporalNamespace string
	TemporalTLS       TLSConfig
	// TemporalInsecure: Temporal is reached in plaintext on purpose
	// (TLSConfig.Check).
	TemporalInsecure bool
	Logger           *slog.Logger
	// ImageStore is the directory imported images are kept in.
	ImageStore string
	// TransferDir holds the streams of claims moving between nodes while
	// they are relayed; empty: "volume-transfers" beside ImageStore.
	TransferDir string
	// AdvertiseURL is the API's base URL as nodes reach it; empty derives
	// it from the listen address.
	AdvertiseURL string
	// NodeDial connects to nodes' endpoints (logs, exec, port-forward);
	// nil dials as any program does (nodeclient.Dialer.NetDial).
	NodeDial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ImageMap is the loaded image map; nil: none.
	ImageMap *imagemap.Map
	// ImageStallTimeout fails a fetch that receives nothing for this long
	// (a slow transfer that keeps receiving is not stalled).
	ImageStallTimeout time.Duration
	// InsecureRegistries (host[:port]) are spoken to over plain http.
	InsecureRegistries []string
	// ImageSourceDir: file:// image sources only beneath it; empty
	// refuses them.
	ImageSourceDir string
	// ImageAllowPrivateSources are the non-public ranges http(s) image
	// sources may reach anyway; nil: public addresses only.
	ImageAllowPrivateSources []netip.Prefix
	// PodRegistryImageTTL is how long a registry image pods added to the
	// catalog is kept once no pod uses it; zero:
	// controlops.DefaultUnusedPodImageTTL.
	PodRegistryImageTTL time.Duration
	// MaxPodRegistryImages bounds the registry images pods may add to the
	// catalog; zero: api.DefaultMaxPodRegistryImages.
	MaxPodRegistryImages int
	// ImageMaxBytes bounds an image's download and its decompressed
	// artefact; zero: imagestore.DefaultMaxBytes.
	ImageMaxBytes int64
	// ImageGC are the thresholds of nodes' image garbage collection;
	// zero: the kubelet's (85 and 80).
	ImageGC imagegc.Thresholds
	// NodeGracePeriod without a heartbeat makes a node NotReady;
	// NodeEvictionTimeout later its pods are evicted. Zero: the defaults
	// (workflows.DefaultNodeGracePeriod, DefaultNodeEvictionTimeout).
	NodeGracePeriod     time.Duration
	NodeEvictionTimeout time.Duration
	// PodTuning is written into every pod lifecycle started (back-offs,
	// retries); nil: workflows.DefaultTuning.
	PodTuning *workflows.Tuning
	// PodReconcileInterval is how often pod rows are checked for their
	// lifecycles; zero: controlworker.ReconcileEvery.
	PodReconcileInterval time.Duration
	// PodSettle is how long a pod row is given to get its lifecycle before
	// the reconciler starts one; zero: controlworker.PodSettle.
	PodSettle time.Duration
	// ServiceCIDR is the range services' cluster IPs come from; empty:
	// clusterip.DefaultCIDR.
	ServiceCIDR string
	// ClusterCIDR is the range nodes' pod CIDRs are assigned from, in
	// blocks of NodeCIDRMaskSize bits; empty and zero: podcidr's
	// defaults (DefaultClusterCIDR, DefaultNodeMaskSize).
	ClusterCIDR      string
	NodeCIDRMaskSize int
	// DNS is the cluster DNS this replica serves; an empty DNS.Addr
	// serves none.
	DNS clusterdns.Config
	// Capacity bounds the pods carrying a label or naming an image that
	// run at once across the cluster (--capacity); nil: no bounds.
	Capacity scheduler.Capacity
	// StateDir keeps what the control plane must find again on restart:
	// the cluster CA and the API's server certificate (tls/).
	StateDir string
	// APITLS is how the API serves HTTPS.
	APITLS APITLS
	// AuditLog receives a JSON line per mutating or refused API request;
	// nil: none.
	AuditLog io.Writer
	// MaxWatches bounds the watches one identity holds open; zero:
	// api.DefaultMaxWatches.
	MaxWatches int
	// MaxConnections bounds the API connections held open at once
	// (--max-connections); those past it wait in the kernel's accept queue,
	// costing the process no file descriptor. Zero: DefaultMaxConnections.
	MaxConnections int
	// MaxUnauthenticated bounds those of them whose clients have not
	// been authenticated yet (--max-unauthenticated-connections): one
	// accepted past it closes the one that has waited longest, so that
	// clients that connect and stall cannot keep out those that bring
	// credentials, nor probes of /readyz. Zero: a quarter of
	// MaxConnections.
	MaxUnauthenticated int
	// HeaderTimeout is how long a connection may take to send its request
	// headers (and its TLS handshake); zero: DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// BodyTimeout is how long a request's body may take to arrive once
	// its headers have; a streaming route (a watch, logs, exec, a volume
	// transfer) is freed of it once its caller is authenticated. Zero:
	// api.DefaultBodyTimeout.
	BodyTimeout time.Duration
	// MinRequestTimeout bounds watches (--min-request-timeout); zero:
	// api.DefaultMinRequestTimeout.
	MinRequestTimeout time.Duration
	// StreamIdleTimeout ends pods' exec sessions, port-forwards and logs
	// that carry nothing for this long
	// (--streaming-connection-idle-timeout); zero:
	// api.DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// EncryptionKey seals secrets at rest (--encryption-key-file); nil:
	// the API keeps no secrets, and the control plane refuses to start
	// over a database that holds some.
	EncryptionKey *encryption.Key
}

// Defaults of Config.MaxConnections and Config.HeaderTimeout.
const (
	DefaultMaxConnections = connbounds.DefaultMaxConnections
	DefaultHeaderTimeout  = connbounds.DefaultHeader
)

// AdminTokenFile is the cluster-admin token's file in the state directory:
// made on first start (0600), reused while it authenticates.
func AdminTokenFile(stateDir string) string { return filepath.Join(stateDir, "admin.token") }

// TLSConfig holds client certificate options for a Temporal server with mTLS.
type TLSConfig struct {
	CertFile, KeyFile, CAFile, ServerName string
}

func (t TLSConfig) enabled() bool { return t.CertFile != "" || t.CAFile != "" || t.ServerName != "" }

// Check refuses a plaintext Temporal the operator did not ask for
// (insecure, --temporal-insecure): whoever reaches a plaintext frontend
// starts, signals and completes the cluster's workflows.
func (t TLSConfig) Check(insecure bool) error {
	switch {
	case insecure && t.enabled():
		return errors.New("--temporal-insecure with --temporal-tls-* options: choose one")
	case !insecure && !t.enabled():
		return errors.New("Temporal would be reached in plaintext, where anyone who reaches it drives the cluster: " +
			"give --temporal-tls-ca (and --temporal-tls-cert/--temporal-tls-key where the caller has no certificate of its own), " +
			"or --temporal-insecure to accept that")
	}
	return nil
}

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
	Store        *store.Store
	Temporal     client.Client
	nodes        workflows.NodeClient
	podTuning    *workflows.Tuning
	pods         *workflows.PodClient // the pod lifecycles, the API's and the room feed's
	podReconcile time.Duration
	podSettle    time.Duration
	moves        controlworker.Moves
	addr         string
	url          string
	ca           *pki.CA
	adminToken   string
	http         *http.Server
	log          *slog.Logger
	bgCtx        context.Context // the background work's, ended by cancel
	cancel       context.CancelFunc
	bg           sync.WaitGroup
	worker       tworker.Worker
	workerMu     sync.Mutex
	served       chan error

	imgMap       *imagemap.Map
	catalog      imagemap.Catalog
	imageOps     *controlops.Images
	imagesSeeded bool

	serviceCIDR *clusterip.Range
	serviceNet  *servicenet.Holder
	dns         *clusterdns.Server // nil: this replica serves no DNS
	capacity    scheduler.Capacity

	metrics             *metrics.Serve
	stopTemporalMetrics func()
}

// ServiceNet holds the current service network snapshot (every service,
// its address and ready endpoints), kept current from the change feed: the
// cluster DNS server answers from it.
func (cp *ControlPlane) ServiceNet() *servicenet.Holder { return cp.serviceNet }

// DNSAddr is the address the cluster DNS answers on; empty when this
// replica serves none.
func (cp *ControlPlane) DNSAddr() string {
	if cp.dns == nil {
		return ""
	}
	return cp.dns.Addr()
}

// ServiceCIDR is the range services' cluster IPs come from.
func (cp *ControlPlane) ServiceCIDR() *clusterip.Range { return cp.serviceCIDR }

// ClusterDNSAddress is the address the cluster DNS serves on and zones'
// resolv.conf names: the service CIDR's base + 10, never a service's.
func (cp *ControlPlane) ClusterDNSAddress() netip.Addr { return cp.serviceCIDR.DNSAddress() }

// Start migrates the database (waiting for it if it is not up yet), then
// serves the API and runs the control-plane worker. The worker connects in
// the background, so the API answers (and /readyz says why it is not
// ready) while Temporal is unreachable.
func Start(ctx context.Context, cfg Config) (_ *ControlPlane, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	imgMap := cfg.ImageMap
	if imgMap == nil {
		imgMap = &imagemap.Map{}
	}
	serviceCIDR, podRange, err := cfg.checkAndDefault()
	if err != nil {
		return nil, err
	}
	// What is opened is closed again when a later step fails.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	o := opened{serviceCIDR: serviceCIDR, podRange: podRange, serviceNet: &servicenet.Holder{}, scheme: "https"}
	if cfg.APITLS.InsecureHTTP {
		log.Warn("the API serves plain HTTP (--insecure-http): anyone on the network path reads and alters every request")
		o.scheme = "http"
	} else if o.serverTLS, o.ca, err = serverTLS(cfg.StateDir, cfg.APITLS, serverHosts(cfg.Listen, cfg.AdvertiseURL, cfg.APITLS.SANs)); err != nil {
		return nil, err
	}
	if err := cfg.checkConnections(); err != nil {
		return nil, err
	}
	if o.ln, o.dns, err = listen(&cfg, log, o.serviceNet); err != nil {
		return nil, err
	}
	undo = append(undo, func() {
		o.ln.Close()
		if o.dns != nil {
			_ = o.dns.Shutdown(context.Background())
		}
	})
	if o.st, err = openStore(ctx, cfg, log); err != nil {
		return nil, err
	}
	undo = append(undo, o.st.Close)
	// One registry for the API's /metrics: the control plane's own
	// families, the store's counts at scrape time, the Temporal SDK's.
	o.registry = metrics.NewRegistry()
	o.metrics = metrics.NewServe(o.registry)
	o.registry.MustRegister(&metrics.Inventory{Counts: o.st})
	if o.tc, o.stopTemporalMetrics, err = temporalClient(cfg, log, o.registry); err != nil {
		return nil, err
	}
	undo = append(undo, o.stopTemporalMetrics)
	if o.adminToken, o.nodeEndpoints, err = credentials(ctx, cfg, o.st, o.ca, log); err != nil {
		return nil, err
	}
	cp := assemble(cfg, log, imgMap, o)
	cp.run(ctx, o.ln, o.serverTLS, cfg.StateDir)
	return cp, nil
}

// opened is what Start opened and made on its way to a ControlPlane.
type opened struct {
	serviceCIDR         *clusterip.Range
	podRange            podcidr.Range
	serviceNet          *servicenet.Holder
	serverTLS           *tls.Config // nil: plain HTTP
	ca                  *pki.CA
	scheme              string
	ln                  net.Listener
	dns                 *clusterdns.Server
	st                  *store.Store
	registry            *prometheus.Registry
	metrics             *metrics.Serve
	tc                  client.Client
	stopTemporalMetrics func()
	adminToken          string
	nodeEndpoints       *nodeclient.Dialer
}

// assemble builds the API over what Start opened, and the control plane
// that serves it.
func assemble(cfg Config, log *slog.Logger, imgMap *imagemap.Map, o opened) *ControlPlane {
	st, tc, ln, serveMetrics := o.st, o.tc, o.ln, o.metrics
	advertise := cfg.AdvertiseURL
	if advertise == "" {
		advertise = advertiseURL(o.scheme, ln.Addr())
	}
	artefacts := &imagestore.Store{Dir: cfg.ImageStore, MaxBytes: cfg.ImageMaxBytes,
		Sources: imagestore.Sources{FileDir: cfg.ImageSourceDir, AllowPrivate: cfg.ImageAllowPrivateSources}}
	transferDir := cfg.TransferDir
	if transferDir == "" {
		transferDir = filepath.Join(filepath.Dir(filepath.Clean(cfg.ImageStore)), "volume-transfers")
	}
	relay := &transfer.Relay{Dir: transferDir}
	images := &workflows.ImageClient{Temporal: tc}
	nodes := workflows.NodeClient{Temporal: tc, GracePeriod: cmp.Or(cfg.NodeGracePeriod, workflows.DefaultNodeGracePeriod),
		EvictionTimeout: cmp.Or(cfg.NodeEvictionTimeout, workflows.DefaultNodeEvictionTimeout)}
	pods := &workflows.PodClient{Temporal: tc, Tuning: cfg.PodTuning}
	srv := api.New(api.Config{BodyTimeout: cfg.BodyTimeout, MinRequestTimeout: cfg.MinRequestTimeout, StreamIdleTimeout: cfg.StreamIdleTimeout, ClientCAAdmins: cfg.APITLS.ClientCAAdmins, EncryptionKey: cfg.EncryptionKey, AdvertiseURL: advertise, AllowedHosts: api.LoopbackHosts(ln.Addr().String(), advertise),
		Store: st, Logger: log, CA: o.ca, NodeEndpoints: o.nodeEndpoints, AuditLog: cfg.AuditLog, MaxWatches: cfg.MaxWatches, Metrics: serveMetrics, MetricsHandler: metrics.Handler(o.registry), ServiceCIDR: o.serviceCIDR, PodCIDRs: podcidr.New(st.Pool(), o.podRange), ServiceNet: o.serviceNet, Lifecycles: pods, Control: apiControl(st, pods, tc), Nodes: &nodes, Volumes: &workflows.VolumeClient{Temporal: tc},
		Images: images, ImageMap: imgMap, MaxPodRegistryImages: cfg.MaxPodRegistryImages, ImageSources: &artefacts.Sources, Artefacts: artefacts, Transfers: relay, Ready: readyChecks(st, tc)})
	bgCtx, cancel := context.WithCancel(context.Background())
	cp := &ControlPlane{metrics: serveMetrics, stopTemporalMetrics: o.stopTemporalMetrics, adminToken: o.adminToken, moves: controlworker.Moves{Relay: relay, AdvertiseURL: advertise}, Store: st, Temporal: tc, nodes: nodes, pods: pods, podTuning: cfg.PodTuning, podReconcile: cfg.PodReconcileInterval, podSettle: cfg.PodSettle, addr: ln.Addr().String(), url: o.scheme + "://" + ln.Addr().String(), ca: o.ca, log: log, bgCtx: bgCtx, cancel: cancel, served: make(chan error, 1),
		// The API bounds a request's handler itself (api.Config.RequestTimeout);
		// the write deadline leaves it that, its body's time and room to
		// answer. A streaming route is freed of the deadlines once its
		// caller is authenticated (api/timeouts.go).
		http: connbounds.Bounds{Header: cfg.HeaderTimeout, Body: srv.BodyTimeout(), Write: srv.BodyTimeout() + srv.RequestTimeout() + 30*time.Second,
			MaxConnections: cfg.MaxConnections, MaxUnauthenticated: cfg.MaxUnauthenticated}.Server(srv.Handler(), o.serverTLS,
			slog.NewLogLogger(log.With("component", "api").Handler(), slog.LevelWarn)),
		imgMap:  imgMap,
		catalog: srv.ImageCatalog(),
		imageOps: &controlops.Images{Store: st, Artefacts: artefacts, AdvertiseURL: advertise,
			StallTimeout: cfg.ImageStallTimeout, Pulls: images, Metrics: serveMetrics, InsecureRegistries: cfg.InsecureRegistries,
			SecretKey: cfg.EncryptionKey, UnusedPodImageTTL: cfg.PodRegistryImageTTL, GC: cfg.ImageGC},
		serviceCIDR: o.serviceCIDR, serviceNet: o.serviceNet, dns: o.dns, capacity: cfg.Capacity}
	cp.http.RegisterOnShutdown(srv.CloseWatches)
	return cp
}

// checkAndDefault fills in cfg's defaults and refuses what is out of
// range, before anything is opened; it returns the parsed ranges.
func (cfg *Config) checkAndDefault() (*clusterip.Range, podcidr.Range, error) {
	if cfg.ServiceCIDR == "" {
		cfg.ServiceCIDR = clusterip.DefaultCIDR
	}
	serviceCIDR, err := clusterip.Parse(cfg.ServiceCIDR)
	if err != nil {
		return nil, podcidr.Range{}, fmt.Errorf("--service-cidr: %w", err)
	}
	if cfg.ClusterCIDR == "" {
		cfg.ClusterCIDR = podcidr.DefaultClusterCIDR
	}
	if cfg.NodeCIDRMaskSize == 0 {
		cfg.NodeCIDRMaskSize = podcidr.DefaultNodeMaskSize
	}
	podRange, err := podcidr.ParseRange(cfg.ClusterCIDR, cfg.NodeCIDRMaskSize)
	if err != nil {
		return nil, podcidr.Range{}, fmt.Errorf("--cluster-cidr, --node-cidr-mask-size: %w", err)
	}
	if cfg.ImageGC == (imagegc.Thresholds{}) {
		cfg.ImageGC = imagegc.Thresholds{High: imagegc.DefaultHighThreshold, Low: imagegc.DefaultLowThreshold}
	}
	if err := cfg.ImageGC.Check(); err != nil {
		return nil, podcidr.Range{}, fmt.Errorf("--image-gc-high-threshold, --image-gc-low-threshold: %w", err)
	}
	if cfg.MinRequestTimeout < 0 {
		return nil, podcidr.Range{}, fmt.Errorf("--min-request-timeout %s: must not be negative (0: the default, %s)", cfg.MinRequestTimeout, api.DefaultMinRequestTimeout)
	}
	if cfg.StreamIdleTimeout < 0 {
		return nil, podcidr.Range{}, fmt.Errorf("--streaming-connection-idle-timeout %s: must not be negative (0: the default, %s)", cfg.StreamIdleTimeout, api.DefaultStreamIdleTimeout)
	}
	if cfg.StateDir == "" {
		return nil, podcidr.Range{}, fmt.Errorf("a state directory (--state-dir) is required: it keeps the cluster CA and the admin token")
	}
	return serviceCIDR, podRange, nil
}

// checkConnections fills in the connection bounds' defaults and refuses
// those out of range.
func (cfg *Config) checkConnections() error {
	if cfg.MaxConnections < 0 {
		return fmt.Errorf("--max-connections %d: must be positive", cfg.MaxConnections)
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.MaxUnauthenticated < 0 || cfg.MaxUnauthenticated > cfg.MaxConnections {
		return fmt.Errorf("--max-unauthenticated-connections %d: must be between 1 and --max-connections (%d)", cfg.MaxUnauthenticated, cfg.MaxConnections)
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	return nil
}

// listen opens the API's listener and the cluster DNS server's (nil when
// cfg.DNS.Addr is empty), which answers from serviceNet.
func listen(cfg *Config, log *slog.Logger, serviceNet *servicenet.Holder) (net.Listener, *clusterdns.Server, error) {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("API address %s: %w (is another zonewright running? pass --listen)", cfg.Listen, err)
	}
	// Clients that connect and send nothing are closed after the header
	// timeout; the limit keeps them from using up the process's file
	// descriptors (and the embedded Temporal's with them) meanwhile, and
	// those without credentials from keeping out those with.
	ln = connbounds.Bounds{MaxConnections: cfg.MaxConnections, MaxUnauthenticated: cfg.MaxUnauthenticated}.Listener(ln)
	if cfg.DNS.Addr == "" {
		return ln, nil, nil
	}
	if cfg.DNS.Log == nil {
		cfg.DNS.Log = log.With("component", "dns")
	}
	if cfg.DNS.ForwardFor == nil {
		// The pods ask their node's DNS; this one forwards other
		// names only for its own host.
		cfg.DNS.ForwardFor = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	dnsServer, err := clusterdns.Listen(cfg.DNS, serviceNet)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("cluster DNS on %s: %w (pass --dns-listen)", cfg.DNS.Addr, err)
	}
	return ln, dnsServer, nil
}

// openStore migrates the database, once it is up, and opens the store:
// with the default namespace, and refused when it holds secrets there is
// no key for.
func openStore(ctx context.Context, cfg Config, log *slog.Logger) (*store.Store, error) {
	if err := migrateWhenUp(ctx, cfg.DatabaseURL, log); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := st.EnsureNamespace(ctx, model.DefaultNamespace); err != nil {
		st.Close()
		return nil, fmt.Errorf("create the default namespace: %w", err)
	}
	if cfg.EncryptionKey == nil {
		// Without the key the secrets stored cannot be read, and pods
		// that use them would fail to start one by one.
		if n, err := st.CountSecrets(ctx); err != nil || n > 0 {
			st.Close()
			if err != nil {
				return nil, fmt.Errorf("count the secrets stored: %w", err)
			}
			return nil, fmt.Errorf("the database holds %d secret(s), encrypted: start with the --encryption-key-file they were written with", n)
		}
	}
	return st, nil
}

// temporalClient is the control plane's lazy Temporal client, its SDK
// metrics in registry; stop ends those metrics.
func temporalClient(cfg Config, log *slog.Logger, registry prometheus.Registerer) (_ client.Client, stop func(), err error) {
	temporalMetrics, temporalMetricsCloser := metrics.TemporalHandler(registry, log.With("component", "metrics"))
	stop = func() { _ = temporalMetricsCloser.Close() }
	opts := client.Options{HostPort: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace, Logger: sdklog.NewStructuredLogger(log.With("component", "temporal-client")),
		MetricsHandler: temporalMetrics}
	if cfg.TemporalTLS.enabled() {
		if opts.ConnectionOptions.TLS, err = cfg.TemporalTLS.build(); err != nil {
			stop()
			return nil, nil, err
		}
	}
	tc, err := client.NewLazyClient(opts)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("Temporal client: %w", err)
	}
	return tc, stop, nil
}

// credentials are the cluster-admin token (empty when revoked) and the
// client pods' logs and exec reach their nodes' endpoints with (nil
// without a cluster CA): a certificate issued here, in memory.
func credentials(ctx context.Context, cfg Config, st *store.Store, ca *pki.CA, log *slog.Logger) (string, *nodeclient.Dialer, error) {
	adminToken, err := auth.EnsureAdminToken(ctx, &auth.Tokens{Pool: st.Pool()}, AdminTokenFile(cfg.StateDir))
	if errors.Is(err, auth.ErrAdminTokenRevoked) {
		log.Warn("serving without a cluster-admin token of its own", "err", err)
		err = nil
	}
	if err != nil {
		return "", nil, err
	}
	if ca == nil {
		return adminToken, nil, nil
	}
	nodeEndpoints, err := nodeclient.New(ca)
	if err != nil {
		return "", nil, err
	}
	nodeEndpoints.NetDial = cfg.NodeDial
	return adminToken, nodeEndpoints, nil
}

// readyChecks are what /readyz asks: the database and Temporal.
func readyChecks(st *store.Store, tc client.Client) []api.ReadyCheck {
	return []api.ReadyCheck{
		{Name: "postgres", Check: st.Ping},
		{Name: "temporal", Check: func(ctx context.Context) error {
			_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}},
	}
}

// run seeds the image map's images, serves the API on ln and starts the
// background work: the worker, the endpoints controller, the service
// network snapshot and the workload feed, until Stop.
func (cp *ControlPlane) run(ctx context.Context, ln net.Listener, serverTLSConfig *tls.Config, stateDir string) {
	// The map's images exist before the first pod names them, unless
	// Temporal is not up yet: then the worker's start finishes the job.
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	cp.imagesSeeded = cp.imgMap.Seed(sctx, cp.catalog, cp.log) == nil
	scancel()
	if serverTLSConfig != nil {
		cp.log.Info("API serving HTTPS", "url", cp.url, "caFingerprint", cp.ca.Fingerprint(), "ca", CAFile(stateDir))
		go func() { cp.served <- cp.http.ServeTLS(ln, "", "") }()
	} else {
		go func() { cp.served <- cp.http.Serve(ln) }()
	}
	bgCtx := cp.bgCtx
	cp.bg.Add(1)
	go cp.runWorker(bgCtx)
	st, log, tc := cp.Store, cp.log, cp.Temporal
	// Services need no Temporal: endpoints and the snapshot follow the
	// store from the start.
	cp.bg.Add(2)
	go func() {
		defer cp.bg.Done()
		(&endpoints.Controller{Store: st, Log: log.With("component", "endpoints")}).Run(bgCtx)
	}()
	go func() {
		defer cp.bg.Done()
		(&servicefeed.Follower{Store: st, Holder: cp.serviceNet, Log: log.With("component", "servicenet")}).Run(bgCtx)
	}()
	// Deployments' and jobs' workflows wait for signals; the feed sends them.
	cp.bg.Add(1)
	go func() {
		defer cp.bg.Done()
		(&workloadfeed.Follower{Store: st, Deployments: workflows.DeploymentClient{Temporal: tc}, Jobs: workflows.JobClient{Temporal: tc},
			Log: log.With("component", "workloads")}).Run(bgCtx)
	}()
	// Pods no node fitted look again when the feed shows room made.
	cp.bg.Add(1)
	go func() {
		defer cp.bg.Done()
		(&roomfeed.Follower{Store: st, Wake: func(ctx context.Context) int { return controlops.WakeUnschedulable(ctx, st, cp.pods) },
			Log: log.With("component", "room")}).Run(bgCtx)
	}()
}

// apiControl is the control plane's work the API asks for (pods created
// and deleted with their lifecycles, evictions, host reconciliation), over
// the store and the same pod lifecycles as the API's.
func apiControl(st *store.Store, pods *workflows.PodClient, tc client.Client) *controlops.Control {
	ctl := controlops.NewControl(st, pods)
	ctl.Volumes = workflows.VolumeClient{Temporal: tc}
	return ctl
}

// Addr is the address the API listens on.
func (cp *ControlPlane) Addr() string { return cp.addr }

// URL is the API's base URL on its listen address: https, or http with
// APITLS.InsecureHTTP.
func (cp *ControlPlane) URL() string { return cp.url }

// AdminToken is the cluster-admin token kept in the state directory.
func (cp *ControlPlane) AdminToken() string { return cp.adminToken }

// CA is the cluster CA; nil when the API serves plain HTTP.
func (cp *ControlPlane) CA() *pki.CA { return cp.ca }

// Served reports the API server's exit.
func (cp *ControlPlane) Served() <-chan error { return cp.served }

// reconcileAfterStart runs the pod reconciler once, a settle time after
// this replica's start: a replica killed between a pod's row and its
// lifecycle left a pod without one, and the schedule may be minutes away.
func (cp *ControlPlane) reconcileAfterStart(ctx context.Context) {
	defer cp.bg.Done()
	settle := cp.podSettle
	if settle <= 0 {
		settle = controlworker.PodSettle
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(settle + time.Second):
	}
	if err := controlworker.ReconcilePodsOnce(ctx, cp.Temporal); err != nil && ctx.Err() == nil {
		cp.log.Warn("the pod reconciler could not be run after start; the schedule will run it", "err", err)
	}
}

// runWorker starts the control-plane worker and schedules once Temporal
// answers, retrying until it does.
func (cp *ControlPlane) runWorker(ctx context.Context) {
	defer cp.bg.Done()
	for attempt := 0; ; attempt++ {
		err := controlworker.EnsureSchedules(ctx, cp.Temporal, cp.podReconcile, cp.podSettle)
		if err == nil {
			w, ctl := controlworker.New(controlworker.Deps{Temporal: cp.Temporal, Store: cp.Store, Nodes: cp.nodes, PodTuning: cp.podTuning,
				ServiceNet: cp.serviceNet, Capacity: cp.capacity, Moves: cp.moves, Metrics: cp.metrics})
			controlworker.RegisterImages(w, cp.imageOps)
			if err = w.Start(); err == nil {
				cp.workerMu.Lock()
				cp.worker = w
				cp.workerMu.Unlock()
				cp.log.Info("control-plane worker polling", "taskQueue", "zonewright-control")
				// Not behind the seeding, which retries for as long as
				// the image map's images cannot be written.
				cp.bg.Add(3)
				go cp.watchNodes(ctx)
				go cp.sweepNodes(ctx, ctl)
				go cp.reconcileAfterStart(ctx)
				if !cp.imagesSeeded {
					cp.seedImages(ctx)
				}
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

// seedImages creates the image map's images the catalog lacks, retrying
// while the database or Temporal is not there.
func (cp *ControlPlane) seedImages(ctx context.Context) {
	for attempt := 0; ; attempt++ {
		err := cp.imgMap.Seed(ctx, cp.catalog, cp.log)
		if err == nil {
			return
		}
		if attempt%10 == 0 {
			cp.log.Warn("could not create the image map's images yet; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// advertiseURL is the API's URL from its listen address; an unspecified
// host (0.0.0.0) becomes the loopback address.
func advertiseURL(scheme string, addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// Stop shuts the API down gracefully, then the worker, client and store.
func (cp *ControlPlane) Stop(ctx context.Context) error {
	err := cp.http.Shutdown(ctx)
	if cp.dns != nil {
		_ = cp.dns.Shutdown(ctx)
	}
	cp.cancel()
	cp.bg.Wait()
	cp.workerMu.Lock()
	if cp.worker != nil {
		cp.worker.Stop()
	}
	cp.workerMu.Unlock()
	cp.Temporal.Close()
	cp.stopTemporalMetrics()
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
