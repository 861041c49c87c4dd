// Package api is zonewright's REST API: Kubernetes-shaped objects over gin,
// with JSON and YAML bodies, Status-shaped errors and server-sent-event
// watches fed by the store's change feed.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/imagemap"
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
	// empty values (redactSecret). Nil: every caller may.
	MaySeeSecretValues func(c *gin.Context) bool
	// RequestingNode names the node a request comes from, for the routes
	// only a pod's node may use (podSecretEnv); ok false: not a node.
	// Nil: the node named by the X-Zonewright-Node header.
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
}

// Server serves the REST API.
type Server struct {
	// closing ends watch streams when the server shuts down: they never
	// finish by themselves, and a graceful shutdown would wait for them.
	closing   chan struct{}
	closeOnce sync.Once
	store     *store.Store
	pods      *workflows.PodClient
	images    *workflows.ImageClient
	imageMap  *imagemap.Map
	sources   SourcePolicy
	artefacts ArtefactServer
	transfers TransferServer
	nodes     *workflows.NodeClient
	volumes   *workflows.VolumeClient
	ready     []ReadyCheck
	log       *slog.Logger
	keepalive time.Duration

	podCIDRs                    *podcidr.Allocator
	requestTimeout, bodyTimeout time.Duration
	serviceCIDR                 *clusterip.Range
	serviceNetH                 *servicenet.Holder
	serviceNetWait              time.Duration

	secrets            store.Secrets
	maySeeSecretValues func(c *gin.Context) bool
	requestingNode     func(c *gin.Context) (string, bool)
	origins            []string
	allowedHosts       []string
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
	if cfg.ServiceNetWait <= 0 || cfg.ServiceNetWait > MaxServiceNetWait {
		cfg.ServiceNetWait = MaxServiceNetWait
	}
	if cfg.MaySeeSecretValues == nil {
		cfg.MaySeeSecretValues = func(*gin.Context) bool { return true }
	}
	if cfg.RequestingNode == nil {
		cfg.RequestingNode = nodeFromHeader
	}
	var origins []string
	if u, err := url.Parse(cfg.AdvertiseURL); err == nil && u.Scheme != "" && u.Host != "" {
		origins = append(origins, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	var secrets store.Secrets
	if cfg.Store != nil {
		secrets = cfg.Store.Secrets(cfg.EncryptionKey)
	}
	return &Server{secrets: secrets, maySeeSecretValues: cfg.MaySeeSecretValues, requestingNode: cfg.RequestingNode,
		origins: origins, allowedHosts: cfg.AllowedHosts, sources: cfg.ImageSources,
		requestTimeout: cfg.RequestTimeout, bodyTimeout: cfg.BodyTimeout,
		closing: make(chan struct{}), store: cfg.Store, pods: cfg.Lifecycles, nodes: cfg.Nodes, volumes: cfg.Volumes, images: cfg.Images, imageMap: cfg.ImageMap,
		artefacts: cfg.Artefacts, transfers: cfg.Transfers, ready: cfg.Ready, log: cfg.Logger, keepalive: cfg.WatchKeepalive,
		podCIDRs: cfg.PodCIDRs, serviceCIDR: cfg.ServiceCIDR, serviceNetH: cfg.ServiceNet, serviceNetWait: cfg.ServiceNetWait}
}

// CloseWatches ends every open watch stream; call it when shutting down
// (http.Server.RegisterOnShutdown).
func (s *Server) CloseWatches() { s.closeOnce.Do(func() { close(s.closing) }) }

// Handler returns the HTTP handler with every route.
func (s *Server) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(s.recover, s.logRequests, s.checkHost, s.checkOrigin, s.checkContentType, limitBody)
	r.NoRoute(func(c *gin.Context) {
		s.fail(c, notFoundf("the server could not find the requested resource %s", c.Request.URL.Path))
	})
	r.NoMethod(func(c *gin.Context) {
		s.fail(c, &apiError{code: http.StatusMethodNotAllowed, reason: "MethodNotAllowed", msg: c.Request.Method + " is not supported on " + c.Request.URL.Path})
	})

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", s.readyz)

	v1 := r.Group("/api/v1")
	v1.GET("/namespaces", s.listNamespaces)
	v1.POST("/namespaces", s.createNamespace)
	v1.GET("/namespaces/:ns", s.getNamespace)
	v1.DELETE("/namespaces/:ns", s.deleteNamespace)

	v1.GET("/pods", s.listPods)
	v1.GET("/namespaces/:ns/pods", s.listPods)
	v1.POST("/namespaces/:ns/pods", s.createPod)
	v1.GET("/namespaces/:ns/pods/:name", s.getPod)
	v1.PUT("/namespaces/:ns/pods/:name", s.updatePod)
	v1.PATCH("/namespaces/:ns/pods/:name", s.patchPod)
	v1.GET("/namespaces/:ns/pods/:name/secretenv", s.podSecretEnv)
	v1.DELETE("/namespaces/:ns/pods/:name", s.deletePod)
	v1.POST("/namespaces/:ns/pods/:name/finalize", s.finalizePod)
	v1.POST("/namespaces/:ns/pods/:name/cancel", s.cancelPod)
	v1.POST("/namespaces/:ns/pods/:name/report", s.reportPod) // pods/report create (by the pod's node)

	v1.GET("/nodes", s.listNodes)
	v1.POST("/nodes", s.createNode)
	v1.GET("/nodes/:name", s.getNode)
	v1.PUT("/nodes/:name", s.updateNode)
	v1.PATCH("/nodes/:name", s.patchNode)
	v1.DELETE("/nodes/:name", s.deleteNode)
	v1.POST("/nodes/:name/cordon", s.cordonNode)
	v1.POST("/nodes/:name/uncordon", s.uncordonNode)
	v1.POST("/nodes/:name/drain", s.drainNode)
	// What a node's agent uses (nodeagent.go), each under the node's name.
	v1.PUT("/nodes/:name/status", s.putNodeStatus)                // nodes/status update
	v1.GET("/nodes/:name/lease", s.getNodeLease)                  // nodes/lease get
	v1.PUT("/nodes/:name/lease", s.putNodeLease)                  // nodes/lease update
	v1.POST("/nodes/:name/events", s.createNodeEvent)             // nodes/events create
	v1.POST("/nodes/:name/reconcile", s.reconcileNode)            // nodes/reconcile create
	v1.POST("/nodes/:name/orphanremovals", s.createOrphanRemoval) // nodes/orphanremovals create

	v1.GET("/images", s.listImages)
	v1.POST("/images", s.createImage)
	v1.GET("/images/:name", s.getImage)
	v1.DELETE("/images/:name", s.deleteImage)
	v1.GET("/images/:name/artefact", s.imageArtefact)

	v1.PUT("/volumetransfers/:id", s.uploadTransfer)
	v1.GET("/volumetransfers/:id", s.downloadTransfer)

	v1.GET("/services", s.listServices)
	v1.GET("/namespaces/:ns/services", s.listServices)
	v1.POST("/namespaces/:ns/services", s.createService)
	v1.GET("/namespaces/:ns/services/:name", s.getService)
	v1.PUT("/namespaces/:ns/services/:name", s.updateService)
	v1.PATCH("/namespaces/:ns/services/:name", s.patchService)
	v1.DELETE("/namespaces/:ns/services/:name", s.deleteService)

	v1.GET("/secrets", s.listSecrets)
	v1.GET("/namespaces/:ns/secrets", s.listSecrets)
	v1.POST("/namespaces/:ns/secrets", s.createSecret)
	v1.GET("/namespaces/:ns/secrets/:name", s.getSecret)
	v1.PUT("/namespaces/:ns/secrets/:name", s.updateSecret)
	v1.DELETE("/namespaces/:ns/secrets/:name", s.deleteSecret)

	v1.GET("/persistentvolumeclaims", s.listClaims)
	v1.GET("/namespaces/:ns/persistentvolumeclaims", s.listClaims)
	v1.POST("/namespaces/:ns/persistentvolumeclaims", s.createClaim)
	v1.GET("/namespaces/:ns/persistentvolumeclaims/:name", s.getClaim)
	v1.PUT("/namespaces/:ns/persistentvolumeclaims/:name", s.updateClaim)
	v1.DELETE("/namespaces/:ns/persistentvolumeclaims/:name", s.deleteClaim)
	v1.POST("/namespaces/:ns/persistentvolumeclaims/:name/move", s.moveClaim)

	v1.GET("/endpoints", s.listEndpoints)
	v1.GET("/namespaces/:ns/endpoints", s.listEndpoints)
	v1.GET("/namespaces/:ns/endpoints/:name", s.getEndpoints)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		v1.Handle(m, "/namespaces/:ns/endpoints", s.refuseEndpointsWrite)
		v1.Handle(m, "/namespaces/:ns/endpoints/:name", s.refuseEndpointsWrite)
	}

	v1.GET("/servicenet", s.serviceNet) // servicenet get (nodes follow it)

	apps := r.Group("/apis/apps/v1")
	apps.GET("/deployments", s.listDeployments)
	apps.GET("/namespaces/:ns/deployments", s.listDeployments)
	apps.POST("/namespaces/:ns/deployments", s.createDeployment)
	apps.GET("/namespaces/:ns/deployments/:name", s.getDeployment)
	apps.PUT("/namespaces/:ns/deployments/:name", s.updateDeployment)
	apps.DELETE("/namespaces/:ns/deployments/:name", s.deleteDeployment)
	apps.GET("/namespaces/:ns/deployments/:name/scale", s.getDeploymentScale)
	apps.PUT("/namespaces/:ns/deployments/:name/scale", s.putDeploymentScale)
	apps.POST("/namespaces/:ns/deployments/:name/rollback", s.rollbackDeployment)
	apps.POST("/namespaces/:ns/deployments/:name/pause", s.pauseDeployment)
	apps.POST("/namespaces/:ns/deployments/:name/resume", s.resumeDeployment)
	apps.POST("/namespaces/:ns/deployments/:name/restart", s.restartDeployment)
	apps.GET("/controllerrevisions", s.listControllerRevisions)
	apps.GET("/namespaces/:ns/controllerrevisions", s.listControllerRevisions)
	apps.GET("/namespaces/:ns/controllerrevisions/:name", s.getControllerRevision)

	batch := r.Group("/apis/batch/v1")
	batch.GET("/jobs", s.listJobs)
	batch.GET("/namespaces/:ns/jobs", s.listJobs)
	batch.POST("/namespaces/:ns/jobs", s.createJob)
	batch.GET("/namespaces/:ns/jobs/:name", s.getJob)
	batch.DELETE("/namespaces/:ns/jobs/:name", s.deleteJob)

	v1.GET("/events", s.listEvents)
	v1.GET("/namespaces/:ns/events", s.listEvents)

	s.routeSnapshots(r)
	return withTimeouts(r, s.requestTimeout, s.bodyTimeout)
}

func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	checks := gin.H{}
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
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "checks": checks})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok", "checks": checks})
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
