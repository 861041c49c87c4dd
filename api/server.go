// Package api is zonewright's REST API: Kubernetes-shaped objects over gin,
// with JSON and YAML bodies, Status-shaped errors and server-sent-event
// watches fed by the store's change feed.
package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/nodeclient"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/podcidr"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows"
)

// MaxBodyBytes bounds every request body but a secret's.
const MaxBodyBytes = 1 << 20

// MaxSecretBodyBytes bounds a secret's body: 1 MiB of values in base64
// with room for their keys (Kubernetes allows 3 MiB).
const MaxSecretBodyBytes = 3 << 20

// ReadyCheck is one dependency /readyz asks about.
type ReadyCheck struct {
	Name  string
	Check func(ctx context.Context) error
}

// Config wires the API to its dependencies.
type Config struct {
	Store *store.Store
	// Lifecycles starts and signals pod workflows; nil records pods without
	// running them (a cluster without a control plane worker).
	Lifecycles *workflows.PodClient
	// Control is the control plane's work the API asks for: pods created
	// and deleted with their lifecycles, evictions, host reconciliation.
	// Nil: one over Store and Lifecycles.
	Control *controlops.Control
	// Images starts image imports and deletions; nil records images
	// without importing them.
	Images *workflows.ImageClient
	// ImageMap resolves aliases, the default image and size presets.
	ImageMap *imagemap.Map
	// ImageSources refuses image sources the control plane may not read
	// (422 on spec.source); nil: only the URL's shape is validated.
	ImageSources SourcePolicy
	// Artefacts serves image artefacts to nodes; nil: no download endpoint.
	Artefacts ArtefactServer
	// Transfers relays claims' streams between nodes when a claim moves
	// with its pods; nil: no transfer endpoint (and drains move no claims).
	Transfers TransferServer
	// Nodes starts and wakes nodes' health workflows; nil leaves them to
	// the control plane's node watch and reconciler.
	Nodes *workflows.NodeClient
	// Volumes starts the workflows that do nodes' work for claims and
	// snapshots; nil leaves that work undone.
	Volumes *workflows.VolumeClient
	// PodCIDRs assigns nodes their pod CIDRs; nil: one over Store's pool
	// with podcidr's default range.
	PodCIDRs *podcidr.Allocator
	// ServiceCIDR is the range services' cluster IPs come from; nil:
	// clusterip.DefaultCIDR.
	ServiceCIDR *clusterip.Range
	// ServiceNet holds the service network snapshot served to nodes at
	// /api/v1/servicenet; nil: that endpoint answers 503.
	ServiceNet *servicenet.Holder
	// ServiceNetWait bounds a servicenet long poll; zero: MaxServiceNetWait.
	ServiceNetWait time.Duration
	Ready          []ReadyCheck
	Logger         *slog.Logger
	// WatchKeepalive is how often an idle watch sends a comment line.
	WatchKeepalive time.Duration
	// EncryptionKey seals secrets at rest; nil: the secrets endpoints
	// answer 503.
	EncryptionKey *encryption.Key
	// MaySeeSecretValues says whether the caller may read secrets'
	// values; a caller who may not gets secrets with their keys and
	// empty values (redactSecret). Nil: admins and cluster-admins may.
	MaySeeSecretValues func(c *gin.Context) bool
	// RequestingNode names the node a request comes from, for the routes
	// only a pod's node may use (podSecretEnv); ok false: not a node.
	// Nil: the node of the request's verified certificate.
	RequestingNode func(c *gin.Context) (node string, ok bool)
	// AdvertiseURL is the API's own URL: its origin may write as the
	// request's own does (checkOrigin).
	AdvertiseURL string
	// AllowedHosts, when set, are the only host names the API answers to
	// besides IP addresses (checkHost; see LoopbackHosts).
	AllowedHosts []string
	// RequestTimeout ends a request that does not stream (everything but
	// watches, the servicenet long poll, transfers and artefacts) with a
	// 503; BodyTimeout bounds reading its body. Zero: the defaults.
	RequestTimeout, BodyTimeout time.Duration
	// MinRequestTimeout bounds watches (watchTimeout); zero:
	// DefaultMinRequestTimeout.
	MinRequestTimeout time.Duration
	// StreamIdleTimeout ends pods' exec sessions, port-forwards and logs
	// that carry nothing either way for this long; zero:
	// DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// CA signs the client certificates of joining nodes; nil: joins
	// answer 503. Only its certificates name nodes and, by their subject,
	// cluster-admins.
	CA *pki.CA
	// ClientCAAdmins are the common names of certificates of other client
	// CAs (--client-ca) that are cluster-admins; such a certificate is
	// nothing else.
	ClientCAAdmins []string
	// AuditLog receives a JSON line per mutating or refused request; nil:
	// none.
	AuditLog io.Writer
	// MaxWatches bounds the watches one identity holds open; zero:
	// DefaultMaxWatches.
	MaxWatches int
	// MaxPodRegistryImages bounds the registry images pods may add to the
	// catalog (model.LabelMadeForPods); zero: DefaultMaxPodRegistryImages.
	MaxPodRegistryImages int
	// NodeEndpoints reaches nodes' endpoints for pods' logs and exec;
	// nil: those answer 503.
	NodeEndpoints *nodeclient.Dialer
	// PullProgressEvery is how often a node's download of an image is
	// recorded in the image's status; zero: DefaultPullProgressEvery.
	PullProgressEvery time.Duration
	// Metrics counts requests and open watches; nil: none.
	Metrics *metrics.Serve
	// MetricsHandler serves GET /metrics (to whoever may "get metrics");
	// nil: that endpoint answers 404.
	MetricsHandler http.Handler
}

// Server serves the REST API.
type Server struct {
	// closing ends watch streams when the server shuts down: they never
	// finish by themselves, and a graceful shutdown would wait for them.
	closing   chan struct{}
	closeOnce sync.Once
	store     *store.Store
	pods      *workflows.PodClient
	control   *controlops.Control
	images    *workflows.ImageClient
	imageMap  *imagemap.Map
	sources   SourcePolicy
	artefacts ArtefactServer
	transfers TransferServer
	discovery *discovery
	// protobufRoutes are "METHOD path" of the routes that read protobuf
	// bodies (protobufType).
	protobufRoutes map[string]bool
	nodes          nodeHealth
	volumes        volumeSyncer
	// movesClaims: claims move between nodes (Config.Transfers and
	// Config.Volumes are set).
	movesClaims bool
	ready       []ReadyCheck
	log         *slog.Logger
	keepalive   time.Duration

	// lists are the list routes' paths: a GET of one with watch=true is
	// a watch, which streams.
	lists routeShapes

	// maxPodImages: Config.MaxPodRegistryImages.
	maxPodImages int

	podCIDRs                    *podcidr.Allocator
	requestTimeout, bodyTimeout time.Duration
	minRequestTimeout           time.Duration
	streamIdleTimeout           time.Duration
	serviceCIDR                 *clusterip.Range
	serviceNetH                 *servicenet.Holder
	serviceNetWait              time.Duration

	secrets            store.Secrets
	maySeeSecretValues func(c *gin.Context) bool
	requestingNode     func(c *gin.Context) (string, bool)
	origins            []string
	allowedHosts       []string

	// Every request but the health checks' and the signed URLs' is
	// authenticated (tokens, client certificates) and authorised.
	tokens *auth.Tokens
	// nodeCerts are the node certificates signed at joins, revoked with
	// their Node.
	nodeCerts *auth.NodeCertificates
	authz     *auth.Authorizer
	ca        *pki.CA
	// clientCAAdmins: Config.ClientCAAdmins.
	clientCAAdmins []string
	audit          *auditLog
	watches        *watchSlots

	nodeEndpoints *nodeclient.Dialer

	metrics        *metrics.Serve
	metricsHandler http.Handler

	fieldManagers fieldManagers

	pullProgressEvery time.Duration
	pullWrites        pullWrites
}

// New builds the API server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WatchKeepalive == 0 {
		cfg.WatchKeepalive = 15 * time.Second
	}
	if cfg.ServiceCIDR == nil {
		cfg.ServiceCIDR = clusterip.MustParse(clusterip.DefaultCIDR)
	}
	if cfg.PodCIDRs == nil && cfg.Store != nil {
		r, _ := podcidr.ParseRange(podcidr.DefaultClusterCIDR, podcidr.DefaultNodeMaskSize)
		cfg.PodCIDRs = podcidr.New(cfg.Store.Pool(), r)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.MinRequestTimeout <= 0 {
		cfg.MinRequestTimeout = DefaultMinRequestTimeout
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if cfg.ServiceNetWait <= 0 || cfg.ServiceNetWait > MaxServiceNetWait {
		cfg.ServiceNetWait = MaxServiceNetWait
	}
	if cfg.MaySeeSecretValues == nil {
		cfg.MaySeeSecretValues = maySeeSecretValues
	}
	if cfg.RequestingNode == nil {
		cfg.RequestingNode = requestingNode
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = DefaultMaxWatches
	}
	if cfg.PullProgressEvery <= 0 {
		cfg.PullProgressEvery = DefaultPullProgressEvery
	}
	if cfg.MaxPodRegistryImages <= 0 {
		cfg.MaxPodRegistryImages = DefaultMaxPodRegistryImages
	}
	var nodes nodeHealth = noNodeHealth{}
	if cfg.Nodes != nil {
		nodes = cfg.Nodes
	}
	var volumes volumeSyncer = noVolumes{}
	if cfg.Volumes != nil {
		volumes = cfg.Volumes
	}
	if cfg.ImageSources == nil {
		cfg.ImageSources = anySource{}
	}
	if cfg.Control == nil && cfg.Store != nil {
		cfg.Control = controlops.NewControl(cfg.Store, nil)
		if cfg.Lifecycles != nil {
			cfg.Control.Lifecycles = cfg.Lifecycles
		}
	}
	var origins []string
	if u, err := url.Parse(cfg.AdvertiseURL); err == nil && u.Scheme != "" && u.Host != "" {
		origins = append(origins, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	var secrets store.Secrets
	if cfg.Store != nil {
		secrets = cfg.Store.Secrets(cfg.EncryptionKey)
	}
	srv := &Server{secrets: secrets, maySeeSecretValues: cfg.MaySeeSecretValues, requestingNode: cfg.RequestingNode,
		origins: origins, allowedHosts: cfg.AllowedHosts, sources: cfg.ImageSources,
		requestTimeout: cfg.RequestTimeout, bodyTimeout: cfg.BodyTimeout,
		minRequestTimeout: cfg.MinRequestTimeout, streamIdleTimeout: cfg.StreamIdleTimeout,
		closing: make(chan struct{}), store: cfg.Store, pods: cfg.Lifecycles, control: cfg.Control, nodes: nodes, volumes: volumes, movesClaims: cfg.Transfers != nil && cfg.Volumes != nil, images: cfg.Images, imageMap: cfg.ImageMap, maxPodImages: cfg.MaxPodRegistryImages,
		artefacts: cfg.Artefacts, transfers: cfg.Transfers, ready: cfg.Ready, log: cfg.Logger, keepalive: cfg.WatchKeepalive,
		podCIDRs: cfg.PodCIDRs, serviceCIDR: cfg.ServiceCIDR, serviceNetH: cfg.ServiceNet, serviceNetWait: cfg.ServiceNetWait,
		tokens: &auth.Tokens{Pool: cfg.Store.Pool()}, nodeCerts: &auth.NodeCertificates{Pool: cfg.Store.Pool()}, ca: cfg.CA, clientCAAdmins: cfg.ClientCAAdmins, audit: &auditLog{w: cfg.AuditLog}, nodeEndpoints: cfg.NodeEndpoints,
		watches: &watchSlots{max: cfg.MaxWatches, open: map[string]int{}}, metrics: cfg.Metrics, metricsHandler: cfg.MetricsHandler,
		pullProgressEvery: cfg.PullProgressEvery}
	srv.authz = &auth.Authorizer{PodNode: srv.podNode, TransferNodes: srv.transferNodes}
	return srv
}

// nodeHealth starts and wakes nodes' health workflows
// (workflows.NodeClient).
type nodeHealth interface {
	Ensure(ctx context.Context, node string) error
	Check(ctx context.Context, node string) error
}

// noNodeHealth leaves nodes' health to the control plane's node watch and
// reconciler (Config.Nodes nil).
type noNodeHealth struct{}

func (noNodeHealth) Ensure(context.Context, string) error { return nil }
func (noNodeHealth) Check(context.Context, string) error  { return nil }

// volumeSyncer wakes (starting if need be) the workflows that do nodes'
// work for claims and snapshots (workflows.VolumeClient).
type volumeSyncer interface {
	SyncClaim(ctx context.Context, namespace, name string) error
	SyncSnapshot(ctx context.Context, namespace, name string) error
}

// noVolumes leaves claims' and snapshots' work on nodes undone
// (Config.Volumes nil).
type noVolumes struct{}

func (noVolumes) SyncClaim(context.Context, string, string) error    { return nil }
func (noVolumes) SyncSnapshot(context.Context, string, string) error { return nil }

// podNode is the node a pod is bound to, for the node authorizer.
func (s *Server) podNode(ctx context.Context, ns, name string) (string, error) {
	p, err := s.store.Pods().Get(ctx, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return "", auth.ErrPodNotFound
	}
	if err != nil {
		return "", err
	}
	return p.Spec.NodeName, nil
}

// CloseWatches ends every open watch stream; call it when shutting down
// (http.Server.RegisterOnShutdown).
func (s *Server) CloseWatches() { s.closeOnce.Do(func() { close(s.closing) }) }

// BodyTimeout is how long a request body may take to arrive.
func (s *Server) BodyTimeout() time.Duration { return s.bodyTimeout }

// RequestTimeout is how long a request that does not stream may run.
func (s *Server) RequestTimeout() time.Duration { return s.requestTimeout }

// Handler returns the HTTP handler with every route.
func (s *Server) Handler() http.Handler {
	return withTimeouts(s.engine(), s.streams, s.requestTimeout, s.bodyTimeout)
}

// streams tells the requests that stream (streams); the same answer
// bounds a request in withTimeouts and frees it in the guard.
func (s *Server) streams(r *http.Request) bool { return streams(r, &s.lists) }

// engine routes every entry of the route table through the guard.
func (s *Server) engine() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(s.recover, s.logRequests, s.checkRequestText, s.checkHost, s.checkOrigin, s.checkContentType, limitBody)
	r.NoRoute(func(c *gin.Context) {
		s.fail(c, notFoundf("the server could not find the requested resource %s", c.Request.URL.Path))
	})
	r.NoMethod(func(c *gin.Context) {
		s.fail(c, &apiError{code: http.StatusMethodNotAllowed, reason: "MethodNotAllowed", msg: c.Request.Method + " is not supported on " + c.Request.URL.Path})
	})

	routes := s.routes()
	s.discovery = newDiscovery(routes)
	s.protobufRoutes = map[string]bool{}
	s.lists = routeShapes{}
	for _, rt := range routes {
		if a, _ := rt.attributes(); rt.method == http.MethodGet && a.Verb == auth.VerbList {
			s.lists.add(rt.path)
		}
		chain := []gin.HandlerFunc{s.measure(rt), s.guard(rt), s.dryRun(rt)}
		if newObject := rt.protobufType(); newObject != nil {
			s.protobufRoutes[rt.method+" "+rt.path] = true
			chain = append(chain, s.fromProtobuf(newObject))
		}
		r.Handle(rt.method, rt.path, append(chain, rt.handler)...)
	}
	return r
}

// HealthStatus answers /healthz and /readyz: "ok" or "unavailable",
// overall and (readyz) per dependency.
type HealthStatus struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
}

// measure counts a request to rt under its route template (a path's
// names and namespaces would make a series per object) and its verb as
// the authorizer knows it (list and watch apart; the method on the open
// routes).
func (s *Server) measure(rt route) gin.HandlerFunc {
	verb := strings.ToLower(rt.method)
	if a, ok := rt.attributes(); ok {
		verb = a.Verb
	}
	return func(c *gin.Context) {
		if s.metrics == nil {
			return
		}
		start := time.Now()
		v := verb
		if w := c.Query("watch"); v == auth.VerbList && (w == "true" || w == "1") {
			v = auth.VerbWatch
		}
		c.Next()
		s.metrics.APIRequest(rt.path, v, c.Writer.Status(), time.Since(start))
	}
}

// serveMetrics serves the control plane's metrics in the Prometheus text
// format.
func (s *Server) serveMetrics(c *gin.Context) {
	if s.metricsHandler == nil {
		s.fail(c, notFoundf("this server collects no metrics"))
		return
	}
	s.metricsHandler.ServeHTTP(c.Writer, c.Request)
}

func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{}
	ok := true
	for _, rc := range s.ready {
		if err := rc.Check(ctx); err != nil {
			// What failed is for the log: the answer names no address or error.
			s.log.Warn("not ready", "check", rc.Name, "err", err)
			checks[rc.Name] = "unavailable"
			ok = false
		} else {
			checks[rc.Name] = "ok"
		}
	}
	if !ok {
		c.JSON(http.StatusServiceUnavailable, HealthStatus{Status: "unavailable", Checks: checks})
		return
	}
	c.JSON(http.StatusOK, HealthStatus{Status: "ok", Checks: checks})
}

// recover turns a panic into a 500 Status without leaking internals.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		if r := recover(); r != nil {
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.log.Error("panic serving request", "method", c.Request.Method, "path", c.Request.URL.Path, "panic", r)
			s.fail(c, &apiError{code: http.StatusInternalServerError, reason: "InternalError", msg: "an internal error occurred; it has been logged"})
			c.Abort()
		}
	}()
	c.Next()
}

func (s *Server) logRequests(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.log.Debug("request", "method", c.Request.Method, "path", c.Request.URL.Path, "status", c.Writer.Status(), "duration", time.Since(start))
}

func limitBody(c *gin.Context) {
	// A volume transfer's body is a whole dataset's stream, written to
	// disk as it arrives.
	if c.Request.Body != nil && !strings.HasPrefix(c.Request.URL.Path, transfersPath) {
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, bodyLimit(c.Request.URL.Path))
	}
	c.Next()
}

// bodyLimit is the largest body a request to path may carry.
func bodyLimit(path string) int64 {
	if strings.Contains(path, "/secrets") {
		// A secret may hold 1 MiB of values, which base64 makes larger.
		return MaxSecretBodyBytes
	}
	return MaxBodyBytes
}
