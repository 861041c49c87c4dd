package api

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/store"
)

// Media types a request body may have. A browser can send a cross-origin
// request without asking first only with text/plain, a form encoding or
// multipart/form-data; refusing everything but these types means a web
// page cannot make a visitor's browser create pods.
const (
	mediaJSON                = "application/json"
	mediaYAML                = "application/yaml"
	mediaMergePatch          = "application/merge-patch+json"
	mediaStrategicMergePatch = "application/strategic-merge-patch+json"
	mediaJSONPatch           = "application/json-patch+json"
	// mediaApplyPatch is server-side apply's, which zonewright refuses
	// with a reason (patchWith) rather than as an unknown type.
	mediaApplyPatch = "application/apply-patch+yaml"
)

// bodyTypes are the media types accepted on bodies other than PATCH's.
var bodyTypes = []string{mediaJSON, mediaYAML, "application/x-yaml", "text/yaml"}

// patchTypes are the media types accepted on PATCH.
var patchTypes = []string{mediaMergePatch, mediaStrategicMergePatch, mediaJSONPatch}

func unsupportedMedia(msg string) *apiError {
	return &apiError{code: http.StatusUnsupportedMediaType, reason: "UnsupportedMediaType", msg: msg}
}

func forbiddenf(msg string) *apiError {
	return &apiError{code: http.StatusForbidden, reason: "Forbidden", msg: msg}
}

// hasBody reports whether a request carries a body (a length, or one
// sent in chunks).
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && (r.ContentLength > 0 || r.ContentLength < 0)
}

// checkContentType refuses a body that is not JSON or YAML (the patch
// types on PATCH) with 415, before any handler parses it. A volume
// transfer's body is a dataset stream, not an object.
func (s *Server) checkContentType(c *gin.Context) {
	r := c.Request
	if !hasBody(r) || strings.HasPrefix(r.URL.Path, transfersPath) {
		c.Next()
		return
	}
	allowed := bodyTypes
	switch {
	case r.Method == http.MethodPatch:
		allowed = append(slices.Clip(patchTypes), mediaApplyPatch)
	case s.protobufRoutes[r.Method+" "+c.FullPath()]:
		allowed = append(slices.Clip(bodyTypes), mediaProtobuf)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !contains(allowed, mt) {
		s.fail(c, unsupportedMedia("Content-Type "+quoteOrMissing(r.Header.Get("Content-Type"))+" is not supported on "+r.Method+"; send one of "+strings.Join(allowed, ", ")))
		c.Abort()
		return
	}
	c.Next()
}

// dryRunResources are those whose writes are store writes, so a dry run
// (?dryRun=All: kubectl diff, --dry-run=server) is the write checked and
// rolled back (store.WithDryRun); what a write would start besides (a
// new pod's lifecycle, a grown claim's resize) is skipped in a dry run.
// A node's writes assign pod networks and start its health workflow
// outside the store, so a dry run there is refused, and nothing is done.
var dryRunResources = []string{"deployments", "deployments/scale", "services", "secrets", "pods", "jobs", "namespaces", "persistentvolumeclaims", "resourcequotas", "limitranges"}

// dryRun serves the dryRun parameter of rt's requests.
func (s *Server) dryRun(rt route) gin.HandlerFunc {
	a, _ := rt.attributes()
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	supported := slices.Contains([]string{"create", "update", "patch"}, a.Verb) && slices.Contains(dryRunResources, res)
	return func(c *gin.Context) {
		q := c.Request.URL.Query()
		if !q.Has("dryRun") || rt.method == http.MethodGet {
			return
		}
		switch {
		case len(q["dryRun"]) != 1 || q.Get("dryRun") != "All":
			s.fail(c, badRequestf("dryRun %q is not supported: the only value is All", q["dryRun"]))
		case !supported:
			s.fail(c, badRequestf("dryRun is not supported on %s: it would start or signal workflows, so nothing was done (dry runs are served on %s)", rt.does, strings.Join(dryRunResources, ", ")))
		default:
			c.Request = c.Request.WithContext(store.WithDryRun(c.Request.Context()))
			return
		}
		c.Abort()
	}
}

func quoteOrMissing(v string) string {
	if v == "" {
		return "(missing)"
	}
	return `"` + v + `"`
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// checkOrigin refuses a request that changes something and carries an
// Origin other than the API's own: a browser adds Origin to every
// cross-origin request, and a page elsewhere has no business changing
// the cluster. Clients that are not browsers send no Origin.
func (s *Server) checkOrigin(c *gin.Context) {
	r := c.Request
	origin := r.Header.Get("Origin")
	if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
		c.Next()
		return
	}
	if !s.sameOrigin(r) {
		s.fail(c, forbiddenf("requests from origin "+origin+" may not change anything here: the API accepts writes only from its own origin and from clients that are not browsers"))
		c.Abort()
		return
	}
	c.Next()
}

// sameOrigin: the request carries no Origin (not a browser's), or the
// API's own.
func (s *Server) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return strings.EqualFold(origin, scheme+"://"+r.Host) || contains(s.origins, strings.ToLower(origin))
}

// checkHost guards against DNS rebinding when the API listens on a
// loopback address: a page whose name was made to resolve to 127.0.0.1
// reaches the API with its own name in Host, which is refused. Addresses
// (an IP in Host cannot be rebound) and the allowed names pass.
func (s *Server) checkHost(c *gin.Context) {
	if len(s.allowedHosts) == 0 {
		c.Next()
		return
	}
	host := c.Request.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if net.ParseIP(host) != nil || contains(s.allowedHosts, host) {
		c.Next()
		return
	}
	s.fail(c, forbiddenf("host "+quoteOrMissing(c.Request.Host)+" is not one this API serves (it listens on loopback and answers only to its addresses and "+strings.Join(s.allowedHosts, ", ")+")"))
	c.Abort()
}

// LoopbackHosts are the host names a loopback API answers to: localhost
// and the names in its listen address and advertised URL. It returns nil
// (any Host) when the API does not listen on loopback.
func LoopbackHosts(listen, advertiseURL string) []string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	ip := net.ParseIP(host)
	if !(host == "localhost" || ip != nil && ip.IsLoopback()) {
		return nil
	}
	hosts := []string{"localhost"}
	if ip == nil && host != "localhost" {
		hosts = append(hosts, strings.ToLower(host))
	}
	if u, err := url.Parse(advertiseURL); err == nil && u.Hostname() != "" && net.ParseIP(u.Hostname()) == nil && !contains(hosts, strings.ToLower(u.Hostname())) {
		hosts = append(hosts, strings.ToLower(u.Hostname()))
	}
	return hosts
}
