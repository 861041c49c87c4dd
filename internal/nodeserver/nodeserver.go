// Package nodeserver is the node's own HTTPS endpoint (as a kubelet's
// port): a container's output read from its SMF service log (or, once
// its zone halted or went, from the copy the node kept), and exec
// sessions run in a pod's zone through zlogin, which only the control
// plane may call; and the node's metrics, which cluster-admins may scrape
// too. It serves with the node's certificate and takes only client
// certificates of the cluster CA naming the control plane
// (pki.ControlPlaneCN) or a cluster-admin (pki.ClusterAdminsOrg); the
// control plane relays users' requests after authorising them
// (internal/nodeclient).
package nodeserver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/zonewright/zonewright/internal/connbounds"
	"github.com/zonewright/zonewright/internal/containerlog"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pki"
)

// DefaultMaxExecs bounds the exec sessions a node runs at once;
// DefaultMaxLogStreams the logs it streams at once. One namespace holds
// at most half of either (slots).
const (
	DefaultMaxExecs      = 16
	DefaultMaxLogStreams = 64
)

// Config is what the endpoint needs.
type Config struct {
	// Certificate is what the endpoint serves with (the node's serving
	// certificate), unless GetCertificate gives it at each handshake.
	Certificate    tls.Certificate
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// ClientCAs is the cluster CA, which the control plane's certificate
	// chains to.
	ClientCAs *x509.CertPool
	// ZonesDir is where this machine's filesystem holds the zonepaths
	// (<ZonesDir>/<zone>/root is a zone's root).
	ZonesDir string
	// KeptLogs holds the containers' logs kept when their zones halted
	// or went (hostops.Host.KeptLogs), read when the zone holds none;
	// nil: none.
	KeptLogs *containerlog.Kept
	// Runner resolves zlogin (its BinDir); nil: the standard place.
	Runner *illumos.Runner
	// Metrics serves GET /metrics; nil: none.
	Metrics http.Handler
	// PodNetwork is the node's pod CIDR (known once the node has
	// registered): port-forwards connect only to addresses in it. Nil or
	// invalid: none.
	PodNetwork func() netip.Prefix
	// MaxExecs and MaxLogStreams: zero means the defaults. Port-forwards
	// count as exec sessions.
	MaxExecs, MaxLogStreams int
	// Bounds are the endpoint's connections' timeouts and caps; zero
	// fields: connbounds' defaults.
	Bounds connbounds.Bounds
	Log    *slog.Logger
}

// Server is the running endpoint.
type Server struct {
	cfg   Config
	http  *http.Server
	ln    net.Listener
	execs *slots
	logs  *slots
}

// Listen starts serving on addr (host:port; port 0 picks a free one).
func Listen(addr string, cfg Config) (*Server, error) {
	if cfg.MaxExecs <= 0 {
		cfg.MaxExecs = DefaultMaxExecs
	}
	if cfg.MaxLogStreams <= 0 {
		cfg.MaxLogStreams = DefaultMaxLogStreams
	}
	if cfg.Runner == nil {
		cfg.Runner = &illumos.Runner{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{cfg: cfg, execs: newSlots(cfg.MaxExecs), logs: newSlots(cfg.MaxLogStreams)}
	mux := http.NewServeMux()
	// The paths nodeclient.LogsPath, ExecPath and PortForwardPath build.
	mux.Handle("GET /containerLogs/{ns}/{pod}/{uid}/{container}", controlPlaneOnly(stream(s.containerLogs)))
	mux.Handle("GET /exec/{ns}/{pod}/{uid}/{container}", controlPlaneOnly(stream(s.exec)))
	mux.Handle("GET /portforward/{ns}/{pod}/{uid}", controlPlaneOnly(stream(s.portForward)))
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics) // the handshake admitted only the control plane and cluster-admins
	}
	tlsConfig := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: cfg.GetCertificate,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      cfg.ClientCAs,
		// Any certificate of the cluster CA other than the control
		// plane's or a cluster-admin's (a node's, say) fails the
		// handshake.
		VerifyPeerCertificate: func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || len(chains[0]) == 0 || !(isControlPlane(chains[0][0]) || isClusterAdmin(chains[0][0])) {
				return errors.New("only the control plane and cluster-admins may call a node's endpoint")
			}
			return nil
		},
	}
	if cfg.GetCertificate == nil {
		tlsConfig.Certificates = []tls.Certificate{cfg.Certificate}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent endpoint %s: %w", addr, err)
	}
	s.ln = cfg.Bounds.Listener(ln)
	// Whoever completed the handshake holds a certificate the endpoint
	// takes: the connection no longer waits to be authenticated.
	authenticated := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		connbounds.Authenticated(r)
		mux.ServeHTTP(w, r)
	})
	s.http = cfg.Bounds.Server(authenticated, tlsConfig, slog.NewLogLogger(cfg.Log.With("component", "endpoint").Handler(), slog.LevelWarn))
	go func() {
		if err := s.http.ServeTLS(s.ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			cfg.Log.Error("agent endpoint stopped", "err", err)
		}
	}()
	return s, nil
}

// Port is the port the endpoint listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Close stops the endpoint and ends its streams.
func (s *Server) Close() error { return s.http.Close() }

func isControlPlane(c *x509.Certificate) bool { return c.Subject.CommonName == pki.ControlPlaneCN }

func isClusterAdmin(c *x509.Certificate) bool {
	return slices.Contains(c.Subject.Organization, pki.ClusterAdminsOrg)
}

// controlPlaneOnly lets only the control plane through: it authorised the
// user whose request it relays.
func controlPlaneOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || !isControlPlane(r.TLS.VerifiedChains[0][0]) {
			fail(w, http.StatusForbidden, "Forbidden", "only the control plane may call a node's endpoint")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// stream frees a request the control plane relays for as long as it lasts
// (logs followed, an exec session, a port-forward) of the connection's
// read and write deadlines.
func stream(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		connbounds.Stream(w)
		h(w, r)
	})
}

// target is the pod and container a request names.
type target struct {
	ns, pod, uid, zone, service, container string
}

// podTarget reads and checks the pod the request's path names.
func podTarget(w http.ResponseWriter, r *http.Request) (target, bool) {
	ns, pod, uid := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("uid")
	if len(model.ValidateMeta(&model.ObjectMeta{Name: pod, Namespace: ns}, true)) > 0 || !validUID(uid) {
		fail(w, http.StatusBadRequest, "BadRequest", "the path does not name a pod (namespace, name, uid)")
		return target{}, false
	}
	return target{ns: ns, pod: pod, uid: uid, zone: names.ZoneName(ns, pod, uid)}, true
}

// target reads and checks the pod and the container the request's path
// names.
func (s *Server) target(w http.ResponseWriter, r *http.Request) (target, bool) {
	t, ok := podTarget(w, r)
	if !ok {
		return t, false
	}
	t.container = r.PathValue("container")
	if len(model.ValidateMeta(&model.ObjectMeta{Name: t.container}, false)) > 0 {
		fail(w, http.StatusBadRequest, "BadRequest", "the path does not name a container")
		return target{}, false
	}
	t.service = hostops.ContainerService(t.container)
	return t, true
}

// slotsFull is the 429's message when what is full.
func slotsFull(what, why string, s *slots) string {
	if why == "namespace" {
		return fmt.Sprintf("this pod's namespace holds %d %s on this node, its share of the %d the node runs at once; retry shortly", s.share(), what, s.max)
	}
	return fmt.Sprintf("this node runs %d %s, the most it runs at once; retry shortly", s.max, what)
}

func validUID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return false
		}
	}
	return true
}

// zoneRootDir is where this machine holds the zone's root.
func (s *Server) zoneRootDir(zone string) string { return filepath.Join(s.cfg.ZonesDir, zone, "root") }

// zoneRoot opens the zone's root: paths under it resolve inside it, so a
// link the zone made cannot send a read elsewhere on the host.
func (s *Server) zoneRoot(zone string) (*os.Root, error) { return os.OpenRoot(s.zoneRootDir(zone)) }

func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	t, ok := s.target(w, r)
	if !ok {
		return
	}
	q, err := containerlog.ParseQuery(r.URL.Query())
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	free, why, ok := s.logs.take(t.ns)
	if !ok {
		fail(w, http.StatusTooManyRequests, "TooManyRequests", slotsFull("log streams", why, s.logs))
		return
	}
	defer free()
	opts := q.Options(time.Now())
	l, zoned, err := s.openLog(t)
	if errors.Is(err, errNotRegular) {
		fail(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("the log of container %q is not a regular file", t.container))
		return
	}
	if err != nil {
		s.cfg.Log.Warn("open a container log", "zone", t.zone, "container", t.container, "err", err)
		fail(w, http.StatusInternalServerError, "InternalError", "the container's log cannot be read")
		return
	}
	switch {
	case l != nil:
		defer l.Close()
	case zoned:
		fail(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("container %q has not started yet: it has no log", t.container))
		return
	default:
		fail(w, http.StatusNotFound, "NotFound", "the pod has no zone on this node, and no log of its is kept here")
		return
	}
	if l.ended == nil {
		opts.Follow = false // a kept log's runs have ended
	}
	opts.Ended = l.ended
	// Errors before the first byte are the answer; after it, the stream
	// just ends.
	sw := &startedWriter{w: w}
	if err := containerlog.Write(r.Context(), sw, l.f, opts); err != nil {
		if !sw.started {
			if errors.Is(err, containerlog.ErrNoPrevious) {
				fail(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("previous terminated container %q in pod %q not found", t.container, t.pod))
				return
			}
			s.cfg.Log.Warn("read a container log", "zone", t.zone, "container", t.container, "err", err)
			fail(w, http.StatusInternalServerError, "InternalError", "the container's log cannot be read")
			return
		}
		s.cfg.Log.Debug("log stream ended", "zone", t.zone, "container", t.container, "err", err)
	}
	if !sw.started {
		sw.header()
	}
}

// openedLog is a container's log open for reading.
type openedLog struct {
	f *os.File
	// root is the zone's root the log is in; nil for a kept log.
	root *os.Root
	// ended is how a follower of the zone's log learns that it was
	// replaced; nil for a kept log, which is not followed.
	ended func() bool
}

func (l *openedLog) Close() {
	l.f.Close()
	if l.root != nil {
		l.root.Close()
	}
}

// openLog opens the container's log: the one in its zone, else the one
// kept on the node (after the zone halted or went). With no log (nil),
// zoned says whether the zone is there.
func (s *Server) openLog(t target) (l *openedLog, zoned bool, err error) {
	root, err := s.zoneRoot(t.zone)
	if err == nil {
		path := containerlog.Path(t.service)
		f, err := openRegular(root, path)
		if err == nil {
			return &openedLog{f: f, root: root, ended: func() bool { return replaced(root, path, f) }}, true, nil
		}
		root.Close()
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, true, err
		}
		zoned = true
	}
	if s.cfg.KeptLogs == nil {
		return nil, zoned, nil
	}
	f, err := s.cfg.KeptLogs.Open(t.uid, t.container)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, zoned, nil
	}
	if err != nil {
		return nil, zoned, err
	}
	return &openedLog{f: f}, zoned, nil
}

// errNotRegular: the zone made its log something else than a file.
var errNotRegular = errors.New("not a regular file")

// openRegular opens a log the zone controls only if it is a regular file:
// not a link, and not a FIFO or device, which it opens without waiting
// for a writer (O_NONBLOCK) to refuse at once. The file opened must be
// the one looked at: the zone may swap them in between.
func openRegular(root *os.Root, path string) (*os.File, error) {
	seen, err := root.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !seen.Mode().IsRegular() {
		return nil, errNotRegular
	}
	f, err := root.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || !os.SameFile(fi, seen) {
		f.Close()
		return nil, errNotRegular
	}
	return f, nil
}

// replaced says whether the log at path is no longer f (the zone halted
// and went, the log was rotated).
func replaced(root *os.Root, path string, f *os.File) bool {
	now, err := root.Stat(path)
	if err != nil {
		return true
	}
	was, err := f.Stat()
	return err != nil || !os.SameFile(now, was)
}

// startedWriter sends the text/plain header before the first byte.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startedWriter) header() {
	s.started = true
	s.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	s.w.Header().Set("X-Content-Type-Options", "nosniff")
	s.w.WriteHeader(http.StatusOK)
}

func (s *startedWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.header()
	}
	return s.w.Write(p)
}

func (s *startedWriter) Flush() {
	if !s.started {
		s.header()
	}
	http.NewResponseController(s.w).Flush()
}

// fail answers a Kubernetes Status.
func fail(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(model.Status{TypeMeta: model.TypeMeta{APIVersion: model.APIVersion, Kind: "Status"},
		Status: "Failure", Message: msg, Reason: reason, Code: code})
}
