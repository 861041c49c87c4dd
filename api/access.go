package api

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/connbounds"
	"github.com/zonewright/zonewright/internal/model"
)

// DefaultMaxWatches bounds the watches one identity holds open at once.
const DefaultMaxWatches = 100

// identityKey is where the guard leaves the request's identity for handlers.
const identityKey = "zonewright.identity"

// anonymous is how the audit log names a request with no valid credentials.
const anonymous = "system:anonymous"

// guard authenticates, authorises, bounds watches and audits one route's
// requests; open routes pass, audited when they write.
func (s *Server) guard(rt route) gin.HandlerFunc {
	attrs, checked := rt.attributes()
	if !checked {
		return func(c *gin.Context) {
			c.Next()
			if c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead {
				s.audit.record(rt.does, auth.Attributes{Verb: c.Request.Method, Resource: rt.path}, c.Writer.Status(), c.Request)
			}
		}
	}
	return func(c *gin.Context) {
		a := attrs
		a.Namespace, a.Name = c.Param("ns"), c.Param("name")
		if a.Resource == "namespaces" {
			a.Name = a.Namespace
		}
		q := c.Request.URL.Query()
		if w := q.Get("watch"); a.Verb == auth.VerbList && (w == "true" || w == "1") {
			a.Verb = auth.VerbWatch
		}
		a.FieldSelector = q.Get("fieldSelector")

		id, err := s.authenticate(c)
		if err != nil {
			if errors.Is(err, auth.ErrUnauthenticated) {
				c.Header("WWW-Authenticate", `Bearer realm="zonewright"`)
				// Whoever has no credentials keeps no connection.
				c.Header("Connection", "close")
				s.fail(c, &apiError{code: http.StatusUnauthorized, reason: "Unauthorized", msg: "Unauthorized: " + err.Error()})
			} else {
				s.log.Warn("authentication failed", "path", c.Request.URL.Path, "err", err)
				s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", msg: "credentials cannot be checked now; retry shortly"})
			}
			c.Abort()
			s.audit.record(anonymous, a, c.Writer.Status(), c.Request)
			return
		}
		connbounds.Authenticated(c.Request)
		ok, err := s.authz.Allowed(c.Request.Context(), id, a)
		if err != nil {
			s.fail(c, err)
			c.Abort()
			s.audit.record(id.Name, a, c.Writer.Status(), c.Request)
			return
		}
		if !ok {
			s.fail(c, forbidden(id, a))
			c.Abort()
			s.audit.record(id.Name, a, c.Writer.Status(), c.Request)
			return
		}
		c.Set(identityKey, id)
		if (a.Verb == auth.VerbGet || a.Verb == auth.VerbList || a.Verb == auth.VerbWatch) && a.Subresource == "" {
			c.Set(tableResourceKey, a.Resource)
		}
		if s.streams(c.Request) {
			connbounds.Stream(c.Writer)
		}
		if a.Verb == auth.VerbWatch {
			if !s.watches.acquire(id.Name) {
				c.Header("Retry-After", "5")
				s.fail(c, &apiError{code: http.StatusTooManyRequests, reason: "TooManyRequests",
					msg: fmt.Sprintf("%s already holds %d watches, the most one identity may hold at once", id.Name, s.watches.max)})
				c.Abort()
				return
			}
			defer s.watches.release(id.Name)
			s.metrics.WatchOpened()
			defer s.metrics.WatchClosed()
		}
		c.Next()
		if !auth.ReadOnly(a.Verb) || auditedRead(a) {
			s.audit.record(id.Name, a, c.Writer.Status(), c.Request)
		}
	}
}

// authenticate finds the request's identity: a bearer token when the
// Authorization header is given (a bad one is refused, never passed over
// for a certificate), else a client certificate the TLS layer verified.
func (s *Server) authenticate(c *gin.Context) (auth.Identity, error) {
	if h := c.GetHeader("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return auth.Identity{}, auth.ErrUnauthenticated
		}
		return s.tokens.Authenticate(c.Request.Context(), strings.TrimSpace(tok))
	}
	id, ok := auth.FromCertificate(c.Request.TLS)
	if !s.fromClusterCA(c.Request.TLS) {
		// Another client CA's certificate: a cluster-admin when its
		// name is mapped, and nothing else, whatever its subject says.
		id, ok = auth.Identity{}, false
		if cn := c.Request.TLS.VerifiedChains[0][0].Subject.CommonName; cn != "" && slices.Contains(s.clientCAAdmins, cn) {
			id, ok = auth.ClusterAdmin(cn), true
		}
	}
	if !ok {
		return auth.Identity{}, auth.ErrUnauthenticated
	}
	if id.Role == auth.RoleNode {
		// A deleted node's certificate must not register it again.
		revoked, err := s.nodeCerts.Revoked(c.Request.Context(), id.CertSerial)
		if err != nil {
			return auth.Identity{}, err
		}
		if revoked {
			return auth.Identity{}, auth.ErrUnauthenticated
		}
	}
	return id, nil
}

// fromClusterCA: the request's client certificate chains to the cluster
// CA (or it has none, which names nobody anyway).
func (s *Server) fromClusterCA(state *tls.ConnectionState) bool {
	if state == nil || len(state.VerifiedChains) == 0 {
		return true
	}
	for _, chain := range state.VerifiedChains {
		if s.ca != nil && len(chain) > 0 && chain[len(chain)-1].Equal(s.ca.Cert) {
			return true
		}
	}
	return false
}

// maySeeSecretValues: secrets' values are for the namespace's admins and
// cluster-admins; everyone else who may read secrets sees their keys only.
func maySeeSecretValues(c *gin.Context) bool {
	ok, _ := (&auth.Authorizer{}).Allowed(c.Request.Context(), identity(c),
		auth.Attributes{Verb: auth.VerbGet, Resource: "secrets", Subresource: "values", Namespace: c.Param("ns")})
	return ok
}

// requestingNode is the node whose certificate the request carries.
func requestingNode(c *gin.Context) (string, bool) {
	id := identity(c)
	return id.Node, id.Role == auth.RoleNode && id.Node != ""
}

// identity is the identity the guard authenticated.
func identity(c *gin.Context) auth.Identity {
	v, _ := c.Get(identityKey)
	id, _ := v.(auth.Identity)
	return id
}

// forbidden is the 403 naming who was refused what, as Kubernetes words it.
func forbidden(id auth.Identity, a auth.Attributes) *apiError {
	res := a.ResourcePath()
	subject := res
	if a.Name != "" {
		subject = fmt.Sprintf("%s %q", res, a.Name)
	}
	where := "at the cluster scope"
	if a.Namespace != "" && a.Resource != "namespaces" {
		where = fmt.Sprintf("in namespace %q", a.Namespace)
	}
	return &apiError{code: http.StatusForbidden, reason: "Forbidden",
		msg:     fmt.Sprintf("%s is forbidden: User %q cannot %s resource %q %s", subject, id.Name, a.Verb, res, where),
		details: &model.StatusDetails{Kind: res, Name: a.Name}}
}

// watchSlots counts each identity's open watches.
type watchSlots struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (w *watchSlots) acquire(who string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open[who] >= w.max {
		return false
	}
	w.open[who]++
	return true
}

func (w *watchSlots) release(who string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open[who]--; w.open[who] <= 0 {
		delete(w.open, who)
	}
}

// auditLog writes one JSON line per mutating or refused request: who, what
// and the answer's code; never a credential or a body.
type auditLog struct {
	mu sync.Mutex
	w  io.Writer
}

type auditEntry struct {
	Time      time.Time `json:"time"`
	Identity  string    `json:"identity"`
	Verb      string    `json:"verb"`
	Resource  string    `json:"resource"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name,omitempty"`
	Code      int       `json:"code"`
	// SourceIP is the connection's peer (a proxy's, behind one).
	SourceIP string `json:"sourceIP,omitempty"`
	// Command is an exec's command line.
	Command []string `json:"command,omitempty"`
}

// auditedRead: reads that are recorded as writes are, the secrets'
// (values included, for who may see them) and a node's fetch of its
// pod's secret environment.
func auditedRead(a auth.Attributes) bool {
	return a.Resource == "secrets" || a.ResourcePath() == "pods/secretenv"
}

func (l *auditLog) record(who string, a auth.Attributes, code int, r *http.Request) {
	if l == nil || l.w == nil {
		return
	}
	e := auditEntry{Time: time.Now().UTC(), Identity: who, Verb: a.Verb, Resource: a.ResourcePath(),
		Namespace: a.Namespace, Name: a.Name, Code: code}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		e.SourceIP = host
	}
	if a.Subresource == "exec" {
		e.Command = r.URL.Query()["command"]
	}
	line, _ := json.Marshal(e)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(line, '\n'))
}
