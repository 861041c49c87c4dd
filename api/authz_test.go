package api_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/transfer"
)

// authzAPI is an API handler served in-process, so that a request can
// carry a verified client certificate without a TLS listener.
type authzAPI struct {
	t       testing.TB
	h       http.Handler
	st      *store.Store
	ca      *pki.CA
	audit   *bytes.Buffer
	admin   string
	tokens  *auth.Tokens
	clients map[string]caller
}

// caller is one identity: a bearer token, a certificate, or nothing.
type caller struct {
	bearer string
	cert   *x509.Certificate
}

func newAuthzAPI(t testing.TB, maxWatches int) *authzAPI {
	t.Helper()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	if err := store.MigrateUp(ctx, url, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	a := &authzAPI{t: t, st: st, ca: ca, audit: &bytes.Buffer{}, tokens: &auth.Tokens{Pool: st.Pool()}}
	srv := api.New(api.Config{Store: st, CA: ca, AuditLog: a.audit, MaxWatches: maxWatches, Logger: slog.New(slog.DiscardHandler),
		ImageMap: &imagemap.Map{}, WatchKeepalive: 50 * time.Millisecond, Transfers: &transfer.Relay{Dir: t.TempDir()}})
	t.Cleanup(srv.CloseWatches)
	a.h = validated(t, srv.Handler())
	a.admin = issue(t, st, auth.RoleClusterAdmin, "")
	return a
}

// do sends one request as who and returns the code and body; a watch is
// cut after a moment (it would stream forever).
func (a *authzAPI) do(who caller, method, path, body string) (int, string) {
	a.t.Helper()
	timeout := 5 * time.Second
	if strings.Contains(path, "watch=true") {
		timeout = 300 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	} else {
		rd = strings.NewReader("")
	}
	req := httptest.NewRequest(method, path, rd).WithContext(ctx)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if who.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+who.bearer)
	}
	if who.cert != nil {
		req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{who.cert}, VerifiedChains: [][]*x509.Certificate{{who.cert, a.ca.Cert}}}
	}
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

func (a *authzAPI) asAdmin(method, path, body string, want int) string {
	a.t.Helper()
	code, b := a.do(caller{bearer: a.admin}, method, path, body)
	if code != want {
		a.t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	return b
}

// nodeCert is a client certificate as the cluster CA issues to node name.
func (a *authzAPI) nodeCert(name string) *x509.Certificate {
	a.t.Helper()
	certPEM, _, err := a.ca.ClientCert(pki.NodeCNPrefix+name, []string{pki.NodesOrg})
	if err != nil {
		a.t.Fatal(err)
	}
	c, err := pki.ParseCert(certPEM)
	if err != nil {
		a.t.Fatal(err)
	}
	return c
}

// The identities of the matrix, in the order of its columns.
var identities = []string{"none", "malformed", "expired", "revoked", "view@a", "edit@a", "admin@a", "cluster-admin", "node:n1"}

func (a *authzAPI) identities() map[string]caller {
	a.t.Helper()
	ctx := context.Background()
	expired, _, err := a.tokens.Issue(ctx, auth.RoleClusterAdmin, "", time.Millisecond)
	if err != nil {
		a.t.Fatal(err)
	}
	revoked, tok, err := a.tokens.Issue(ctx, auth.RoleClusterAdmin, "", time.Hour)
	if err != nil {
		a.t.Fatal(err)
	}
	if err := a.tokens.Revoke(ctx, tok.ID, ""); err != nil {
		a.t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // past the expired token's end
	return map[string]caller{
		"none":          {},
		"malformed":     {bearer: "not-a-zonewright-token"},
		"expired":       {bearer: expired},
		"revoked":       {bearer: revoked},
		"view@a":        {bearer: issue(a.t, a.st, auth.RoleView, "a")},
		"edit@a":        {bearer: issue(a.t, a.st, auth.RoleEdit, "a")},
		"admin@a":       {bearer: issue(a.t, a.st, auth.RoleAdmin, "a")},
		"cluster-admin": {bearer: a.admin},
		"node:n1":       {cert: a.nodeCert("n1")},
	}
}

// seed makes namespaces a and b, nodes n1 and n2, and in each namespace a
// pod bound to n1 (p1), one bound to n2 (p2), a service, a deployment and
// a claim, plus objects that only deletes use.
func (a *authzAPI) seed() {
	a.t.Helper()
	for _, ns := range []string{"a", "b", "c"} {
		a.asAdmin("POST", "/api/v1/namespaces", fmt.Sprintf(`{"metadata":{"name":%q}}`, ns), 201)
	}
	for i, n := range []string{"n1", "n2", "n3"} {
		a.asAdmin("POST", "/api/v1/nodes", fmt.Sprintf(`{"metadata":{"name":%q,"labels":{"zonewright.io/brand-lx":"true"}},"spec":{"podCIDR":"10.88.%d.0/24"},
		  "status":{"capacity":{"cpu":"8","memory":"32Gi","pods":"110"}}}`, n, i+1), 201)
	}
	for _, img := range []string{"i", "gone"} {
		a.asAdmin("POST", "/api/v1/images", fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"kind":"zone-template"}}`, img), 201)
	}
	for _, ns := range []string{"a", "b"} {
		for pod, node := range map[string]string{"p1": "n1", "p2": "n2", "gone": "n2"} {
			a.asAdmin("POST", "/api/v1/namespaces/"+ns+"/pods",
				fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"nodeName":%q,"containers":[{"name":"c","image":"i","command":["c"]}]}}`, pod, node), 201)
		}
		for _, svc := range []string{"s", "gone"} {
			a.asAdmin("POST", "/api/v1/namespaces/"+ns+"/services", fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"selector":{"app":"x"},"ports":[{"port":80}]}}`, svc), 201)
		}
		for _, d := range []string{"d", "gone"} {
			a.asAdmin("POST", "/apis/apps/v1/namespaces/"+ns+"/deployments", fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"x"}},
			  "template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"i","command":["c"]}]}}}}`, d), 201)
		}
		for _, cl := range []string{"c", "gone"} {
			a.asAdmin("POST", "/api/v1/namespaces/"+ns+"/persistentvolumeclaims", fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"resources":{"requests":{"storage":"1Gi"}}}}`, cl), 201)
		}
	}
}

// tokenID issues a token for a delete row to revoke.
func (a *authzAPI) tokenID(role auth.Role, ns string) string {
	a.t.Helper()
	_, tok, err := a.tokens.Issue(context.Background(), role, ns, time.Hour)
	if err != nil {
		a.t.Fatal(err)
	}
	return tok.ID
}

// TestAuthorizationMatrix asserts every identity × request cell against an
// outcome written by hand: U is 401, F is 403, Y is let through to the
// handler (whatever it then answers). Columns, in order:
// none malformed expired revoked view@a edit@a admin@a cluster-admin node:n1.
func TestAuthorizationMatrix(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	who := a.identities()
	tokA, tokB, tokCluster := a.tokenID(auth.RoleView, "a"), a.tokenID(auth.RoleView, "b"), a.tokenID(auth.RoleClusterAdmin, "")
	const pod = `{"metadata":{"name":"new"},"spec":{"containers":[{"name":"c","image":"i","command":["c"]}]}}`
	rows := []struct {
		name, method, path, body string
		want                     string
	}{
		// pods
		{"get pod in a bound to n2", "GET", "/api/v1/namespaces/a/pods/p2", "", "UUUU YYY Y F"},
		{"get pod in a bound to n1", "GET", "/api/v1/namespaces/a/pods/p1", "", "UUUU YYY Y Y"},
		{"get pod in b bound to n2", "GET", "/api/v1/namespaces/b/pods/p2", "", "UUUU FFF Y F"},
		{"get pod in b bound to n1", "GET", "/api/v1/namespaces/b/pods/p1", "", "UUUU FFF Y Y"},
		{"get a pod that does not exist", "GET", "/api/v1/namespaces/a/pods/nothing", "", "UUUU YYY Y F"},
		{"list pods in a", "GET", "/api/v1/namespaces/a/pods", "", "UUUU YYY Y F"},
		{"list pods in b", "GET", "/api/v1/namespaces/b/pods", "", "UUUU FFF Y F"},
		{"list pods in every namespace", "GET", "/api/v1/pods", "", "UUUU FFF Y F"},
		{"list pods bound to n1", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", "", "UUUU FFF Y Y"},
		{"list pods bound to n2", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn2", "", "UUUU FFF Y F"},
		{"list pods in a bound to n1", "GET", "/api/v1/namespaces/a/pods?fieldSelector=spec.nodeName%3Dn1", "", "UUUU YYY Y Y"},
		{"watch pods in a", "GET", "/api/v1/namespaces/a/pods?watch=true", "", "UUUU YYY Y F"},
		{"watch pods in b", "GET", "/api/v1/namespaces/b/pods?watch=true", "", "UUUU FFF Y F"},
		{"watch pods everywhere", "GET", "/api/v1/pods?watch=true", "", "UUUU FFF Y F"},
		{"watch pods bound to n1", "GET", "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1", "", "UUUU FFF Y Y"},
		{"create pod in a", "POST", "/api/v1/namespaces/a/pods", pod, "UUUU FYY Y F"},
		{"create pod in b", "POST", "/api/v1/namespaces/b/pods", pod, "UUUU FFF Y F"},
		{"update pod in a", "PUT", "/api/v1/namespaces/a/pods/p1", "{}", "UUUU FYY Y F"},
		{"update pod in b", "PUT", "/api/v1/namespaces/b/pods/p1", "{}", "UUUU FFF Y F"},
		{"finalize pod in a", "POST", "/api/v1/namespaces/a/pods/p2/finalize", "", "UUUU FYY Y F"},
		{"finalize pod in b", "POST", "/api/v1/namespaces/b/pods/p2/finalize", "", "UUUU FFF Y F"},
		{"cancel pod in a", "POST", "/api/v1/namespaces/a/pods/p2/cancel", "", "UUUU FYY Y F"},
		{"cancel pod in b bound to n1", "POST", "/api/v1/namespaces/b/pods/p1/cancel", "", "UUUU FFF Y F"},
		{"delete pod in a", "DELETE", "/api/v1/namespaces/a/pods/gone", "", "UUUU FYY Y F"},
		{"delete pod in b", "DELETE", "/api/v1/namespaces/b/pods/gone", "", "UUUU FFF Y F"},
		// Only the pod's node reads its secret environment, not even a cluster-admin.
		{"read the secret env of a pod in a bound to n1", "GET", "/api/v1/namespaces/a/pods/p1/secretenv", "", "UUUU FFF F Y"},
		{"read the secret env of a pod in a bound to n2", "GET", "/api/v1/namespaces/a/pods/p2/secretenv", "", "UUUU FFF F F"},
		{"report on a pod in a bound to n1", "POST", "/api/v1/namespaces/a/pods/p1/report", "{}", "UUUU FFF Y Y"},
		{"report on a pod in a bound to n2", "POST", "/api/v1/namespaces/a/pods/p2/report", "{}", "UUUU FFF Y F"},
		{"report on a pod in b bound to n1", "POST", "/api/v1/namespaces/b/pods/p1/report", "{}", "UUUU FFF Y Y"},
		// Logs are a read; exec is a write whatever the method. Not even
		// the pod's own node goes through the API for either.
		{"read the log of a pod in a bound to n1", "GET", "/api/v1/namespaces/a/pods/p1/log", "", "UUUU YYY Y F"},
		{"read the log of a pod in b", "GET", "/api/v1/namespaces/b/pods/p1/log", "", "UUUU FFF Y F"},
		{"exec (GET) in a pod in a bound to n1", "GET", "/api/v1/namespaces/a/pods/p1/exec?command=true&stdout=true", "", "UUUU FYY Y F"},
		{"exec (POST) in a pod in a bound to n1", "POST", "/api/v1/namespaces/a/pods/p1/exec?command=true&stdout=true", "", "UUUU FYY Y F"},
		{"exec (GET) in a pod in b", "GET", "/api/v1/namespaces/b/pods/p1/exec?command=true&stdout=true", "", "UUUU FFF Y F"},
		{"exec (POST) in a pod in b", "POST", "/api/v1/namespaces/b/pods/p2/exec?command=true&stdout=true", "", "UUUU FFF Y F"},

		// services
		{"get service in a", "GET", "/api/v1/namespaces/a/services/s", "", "UUUU YYY Y F"},
		{"get service in b", "GET", "/api/v1/namespaces/b/services/s", "", "UUUU FFF Y F"},
		{"list services in a", "GET", "/api/v1/namespaces/a/services", "", "UUUU YYY Y F"},
		{"list services in b", "GET", "/api/v1/namespaces/b/services", "", "UUUU FFF Y F"},
		{"list services everywhere", "GET", "/api/v1/services", "", "UUUU FFF Y F"},
		{"watch services in a", "GET", "/api/v1/namespaces/a/services?watch=true", "", "UUUU YYY Y F"},
		{"watch services in b", "GET", "/api/v1/namespaces/b/services?watch=true", "", "UUUU FFF Y F"},
		{"create service in a", "POST", "/api/v1/namespaces/a/services", `{"metadata":{"name":"new"},"spec":{"ports":[{"port":80}]}}`, "UUUU FYY Y F"},
		{"create service in b", "POST", "/api/v1/namespaces/b/services", `{"metadata":{"name":"new"},"spec":{"ports":[{"port":80}]}}`, "UUUU FFF Y F"},
		{"update service in a", "PUT", "/api/v1/namespaces/a/services/s", "{}", "UUUU FYY Y F"},
		{"update service in b", "PUT", "/api/v1/namespaces/b/services/s", "{}", "UUUU FFF Y F"},
		{"delete service in a", "DELETE", "/api/v1/namespaces/a/services/gone", "", "UUUU FYY Y F"},
		{"delete service in b", "DELETE", "/api/v1/namespaces/b/services/gone", "", "UUUU FFF Y F"},

		// deployments
		{"get deployment in a", "GET", "/apis/apps/v1/namespaces/a/deployments/d", "", "UUUU YYY Y F"},
		{"get deployment in b", "GET", "/apis/apps/v1/namespaces/b/deployments/d", "", "UUUU FFF Y F"},
		{"list deployments in a", "GET", "/apis/apps/v1/namespaces/a/deployments", "", "UUUU YYY Y F"},
		{"list deployments everywhere", "GET", "/apis/apps/v1/deployments", "", "UUUU FFF Y F"},
		{"watch deployments in a", "GET", "/apis/apps/v1/namespaces/a/deployments?watch=true", "", "UUUU YYY Y F"},
		{"create deployment in a", "POST", "/apis/apps/v1/namespaces/a/deployments", "{}", "UUUU FYY Y F"},
		{"create deployment in b", "POST", "/apis/apps/v1/namespaces/b/deployments", "{}", "UUUU FFF Y F"},
		{"update deployment in a", "PUT", "/apis/apps/v1/namespaces/a/deployments/d", "{}", "UUUU FYY Y F"},
		{"update deployment in b", "PUT", "/apis/apps/v1/namespaces/b/deployments/d", "{}", "UUUU FFF Y F"},
		{"get deployment scale in a", "GET", "/apis/apps/v1/namespaces/a/deployments/d/scale", "", "UUUU YYY Y F"},
		{"scale deployment in a", "PUT", "/apis/apps/v1/namespaces/a/deployments/d/scale", `{"spec":{"replicas":2}}`, "UUUU FYY Y F"},
		{"scale deployment in b", "PUT", "/apis/apps/v1/namespaces/b/deployments/d/scale", `{"spec":{"replicas":2}}`, "UUUU FFF Y F"},
		{"restart deployment in b", "POST", "/apis/apps/v1/namespaces/b/deployments/d/restart", "", "UUUU FFF Y F"},
		{"delete deployment in a", "DELETE", "/apis/apps/v1/namespaces/a/deployments/gone", "", "UUUU FYY Y F"},
		{"delete deployment in b", "DELETE", "/apis/apps/v1/namespaces/b/deployments/gone", "", "UUUU FFF Y F"},

		// claims
		{"get claim in a", "GET", "/api/v1/namespaces/a/persistentvolumeclaims/c", "", "UUUU YYY Y F"},
		{"get claim in b", "GET", "/api/v1/namespaces/b/persistentvolumeclaims/c", "", "UUUU FFF Y F"},
		{"list claims in a", "GET", "/api/v1/namespaces/a/persistentvolumeclaims", "", "UUUU YYY Y F"},
		{"list claims everywhere", "GET", "/api/v1/persistentvolumeclaims", "", "UUUU FFF Y F"},
		{"create claim in a", "POST", "/api/v1/namespaces/a/persistentvolumeclaims", "{}", "UUUU FYY Y F"},
		{"create claim in b", "POST", "/api/v1/namespaces/b/persistentvolumeclaims", "{}", "UUUU FFF Y F"},
		{"update claim in a", "PUT", "/api/v1/namespaces/a/persistentvolumeclaims/c", "{}", "UUUU FYY Y F"},
		{"move claim in a", "POST", "/api/v1/namespaces/a/persistentvolumeclaims/c/move", "{}", "UUUU FYY Y F"},
		{"move claim in b", "POST", "/api/v1/namespaces/b/persistentvolumeclaims/c/move", "{}", "UUUU FFF Y F"},
		{"delete claim in a", "DELETE", "/api/v1/namespaces/a/persistentvolumeclaims/gone", "", "UUUU FYY Y F"},
		{"delete claim in b", "DELETE", "/api/v1/namespaces/b/persistentvolumeclaims/gone", "", "UUUU FFF Y F"},

		// nodes (cluster-scoped)
		{"get own node", "GET", "/api/v1/nodes/n1", "", "UUUU FFF Y Y"},
		{"get another node", "GET", "/api/v1/nodes/n2", "", "UUUU FFF Y F"},
		{"list nodes", "GET", "/api/v1/nodes", "", "UUUU FFF Y Y"},
		{"watch nodes", "GET", "/api/v1/nodes?watch=true", "", "UUUU FFF Y F"},
		{"create node", "POST", "/api/v1/nodes", "{}", "UUUU FFF Y F"},
		{"cordon own node", "POST", "/api/v1/nodes/n1/cordon", "", "UUUU FFF Y F"},
		{"drain another node", "POST", "/api/v1/nodes/n2/drain", "", "UUUU FFF Y F"},
		{"delete another node", "DELETE", "/api/v1/nodes/n3", "", "UUUU FFF Y F"},
		{"join as a node", "POST", "/api/v1/nodes/n9/join", "{}", "UUUU FFF Y F"},
		{"write own node status", "PUT", "/api/v1/nodes/n1/status", "{}", "UUUU FFF Y Y"},
		{"write another node's status", "PUT", "/api/v1/nodes/n2/status", "{}", "UUUU FFF Y F"},
		{"read own lease", "GET", "/api/v1/nodes/n1/lease", "", "UUUU FFF Y Y"},
		{"renew own lease", "PUT", "/api/v1/nodes/n1/lease", "{}", "UUUU FFF Y Y"},
		{"renew another node's lease", "PUT", "/api/v1/nodes/n2/lease", "{}", "UUUU FFF Y F"},
		{"record an event of own node", "POST", "/api/v1/nodes/n1/events", "{}", "UUUU FFF Y Y"},
		{"record an event of another node", "POST", "/api/v1/nodes/n2/events", "{}", "UUUU FFF Y F"},
		{"reconcile own node", "POST", "/api/v1/nodes/n1/reconcile", "{}", "UUUU FFF Y Y"},
		{"reconcile another node", "POST", "/api/v1/nodes/n2/reconcile", "{}", "UUUU FFF Y F"},
		{"report orphans of own node", "POST", "/api/v1/nodes/n1/orphanremovals", "{}", "UUUU FFF Y Y"},
		{"report orphans of another node", "POST", "/api/v1/nodes/n2/orphanremovals", "{}", "UUUU FFF Y F"},
		{"create a join token", "POST", "/api/v1/nodejointokens", "{}", "UUUU FFF Y F"},
		{"read the service network", "GET", "/api/v1/servicenet", "", "UUUU FFF Y Y"},
		// Metrics count every namespace's pods and name every node: a
		// cluster-admin's, not a namespace's or a node's.
		{"read the control plane's metrics", "GET", "/metrics", "", "UUUU FFF Y F"},

		// images (cluster-scoped)
		{"get image", "GET", "/api/v1/images/i", "", "UUUU FFF Y F"},
		{"list images", "GET", "/api/v1/images", "", "UUUU FFF Y F"},
		{"watch images", "GET", "/api/v1/images?watch=true", "", "UUUU FFF Y F"},
		{"create image", "POST", "/api/v1/images", `{"metadata":{"name":"new"},"spec":{"kind":"zone-template"}}`, "UUUU FFF Y F"},
		{"delete image", "DELETE", "/api/v1/images/gone", "", "UUUU FFF Y F"},
		{"download an image's artefact", "GET", "/api/v1/images/i/artefact", "", "UUUU FFF Y Y"},

		// namespaces
		{"get own namespace", "GET", "/api/v1/namespaces/a", "", "UUUU YYY Y F"},
		{"get another namespace", "GET", "/api/v1/namespaces/b", "", "UUUU FFF Y F"},
		{"list namespaces", "GET", "/api/v1/namespaces", "", "UUUU FFF Y F"},
		{"watch namespaces", "GET", "/api/v1/namespaces?watch=true", "", "UUUU FFF Y F"},
		{"create namespace", "POST", "/api/v1/namespaces", `{"metadata":{"name":"new"}}`, "UUUU FFF Y F"},
		{"delete another namespace", "DELETE", "/api/v1/namespaces/c", "", "UUUU FFF Y F"},

		// resource quotas: read in the namespace, set by a cluster-admin only
		{"list quotas of a", "GET", "/api/v1/namespaces/a/resourcequotas", "", "UUUU YYY Y F"},
		{"list quotas of b", "GET", "/api/v1/namespaces/b/resourcequotas", "", "UUUU FFF Y F"},
		{"create quota in a", "POST", "/api/v1/namespaces/a/resourcequotas", `{"metadata":{"name":"q"},"spec":{"hard":{"pods":"5"}}}`, "UUUU FFF Y F"},
		{"delete quota in a", "DELETE", "/api/v1/namespaces/a/resourcequotas/q", "", "UUUU FFF Y F"},
		{"list limit ranges of a", "GET", "/api/v1/namespaces/a/limitranges", "", "UUUU YYY Y F"},
		{"create limit range in a", "POST", "/api/v1/namespaces/a/limitranges", `{"metadata":{"name":"l"},"spec":{"limits":[]}}`, "UUUU FFF Y F"},

		// tokens
		{"list tokens of a", "GET", "/api/v1/namespaces/a/tokens", "", "UUUU FFY Y F"},
		{"list tokens of b", "GET", "/api/v1/namespaces/b/tokens", "", "UUUU FFF Y F"},
		{"list every token", "GET", "/api/v1/tokens", "", "UUUU FFF Y F"},
		{"create view token in a", "POST", "/api/v1/namespaces/a/tokens", `{"role":"view","ttlSeconds":60}`, "UUUU FFY Y F"},
		{"create admin token in a", "POST", "/api/v1/namespaces/a/tokens", `{"role":"admin"}`, "UUUU FFY Y F"},
		{"create token in b", "POST", "/api/v1/namespaces/b/tokens", `{"role":"view"}`, "UUUU FFF Y F"},
		{"create cluster-admin token", "POST", "/api/v1/tokens", `{"ttlSeconds":60}`, "UUUU FFF Y F"},
		{"revoke token of a", "DELETE", "/api/v1/namespaces/a/tokens/" + tokA, "", "UUUU FFY Y F"},
		{"revoke token of b", "DELETE", "/api/v1/namespaces/b/tokens/" + tokB, "", "UUUU FFF Y F"},
		{"revoke cluster token", "DELETE", "/api/v1/tokens/" + tokCluster, "", "UUUU FFF Y F"},

		// open: the document of the API says nothing of what it holds
		{"read the OpenAPI document", "GET", "/openapi/v3", "", "YYYY YYY Y Y"},
		{"read the health", "GET", "/healthz", "", "YYYY YYY Y Y"},
		{"read the version", "GET", "/version", "", "YYYY YYY Y Y"},

		// events, read like the rest of a namespace
		{"list events in a", "GET", "/api/v1/namespaces/a/events", "", "UUUU YYY Y F"},
		{"list events everywhere", "GET", "/api/v1/events", "", "UUUU FFF Y F"},
	}
	for _, r := range rows {
		want := strings.ReplaceAll(r.want, " ", "")
		if len(want) != len(identities) {
			t.Fatalf("%s: %d expected outcomes for %d identities", r.name, len(want), len(identities))
		}
		for i, id := range identities {
			code, body := a.do(who[id], r.method, r.path, r.body)
			got := outcome(code)
			if got != want[i] {
				t.Errorf("%s (%s %s) as %s: %d %s, want %c", r.name, r.method, r.path, id, code, strings.TrimSpace(body), want[i])
			}
		}
	}
}

func outcome(code int) byte {
	switch code {
	case http.StatusUnauthorized:
		return 'U'
	case http.StatusForbidden:
		return 'F'
	}
	return 'Y'
}

func TestRefusalsSayWhyInStatusShape(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	code, body := a.do(caller{}, "GET", "/api/v1/namespaces/a/pods", "")
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/api/v1/namespaces/a/pods", nil)
	a.h.ServeHTTP(rec, req)
	if code != 401 || rec.Header().Get("WWW-Authenticate") != `Bearer realm="zonewright"` || !strings.Contains(body, `"reason":"Unauthorized"`) {
		t.Fatalf("no credentials: %d %q %s", code, rec.Header().Get("WWW-Authenticate"), body)
	}
	view := caller{bearer: issue(t, a.st, auth.RoleView, "a")}
	viewID := strings.Split(view.bearer, "_")[1]
	code, body = a.do(view, "DELETE", "/api/v1/namespaces/b/pods/p1", "")
	var st model.Status
	_ = json.Unmarshal([]byte(body), &st)
	want := fmt.Sprintf(`pods "p1" is forbidden: User "token:%s" cannot delete resource "pods" in namespace "b"`, viewID)
	if code != 403 || st.Kind != "Status" || st.Reason != "Forbidden" || st.Code != 403 || st.Message != want {
		t.Fatalf("view deleting in b: %d %s, want message %q", code, body, want)
	}
	code, body = a.do(caller{cert: a.nodeCert("n1")}, "GET", "/api/v1/nodes/n2", "")
	if code != 403 || !strings.Contains(body, `nodes \"n2\" is forbidden: User \"node:n1\" cannot get resource \"nodes\" at the cluster scope`) {
		t.Fatalf("node reading another node: %d %s", code, body)
	}
	// The health checks stay open.
	if code, body := a.do(caller{}, "GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz without credentials: %d %s", code, body)
	}
	// A certificate from another CA, or one with no known subject, is no
	// identity (the TLS layer verifies chains; an unverified one is ignored).
	stray := a.nodeCert("n1")
	req = httptest.NewRequest("GET", "/api/v1/nodes/n1", nil)
	req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{stray}}
	rec = httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Fatalf("an unverified certificate authenticated: %d %s", rec.Code, rec.Body)
	}
}

func TestRevokedTokenIsRefusedOnTheNextRequest(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	body := a.asAdmin("POST", "/api/v1/namespaces/a/tokens", `{"role":"edit","ttlSeconds":3600}`, 201)
	var issued api.IssuedToken
	if err := json.Unmarshal([]byte(body), &issued); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(issued.Token, "zw_"+issued.ID+"_") || issued.Role != auth.RoleEdit || issued.Namespace != "a" ||
		issued.ExpiresAt.Before(time.Now().Add(59*time.Minute)) || issued.ExpiresAt.After(time.Now().Add(61*time.Minute)) {
		t.Fatalf("issued token: %s", body)
	}
	edit := caller{bearer: issued.Token}
	if code, b := a.do(edit, "GET", "/api/v1/namespaces/a/pods", ""); code != 200 {
		t.Fatalf("fresh token: %d %s", code, b)
	}
	a.asAdmin("DELETE", "/api/v1/namespaces/a/tokens/"+issued.ID, "", 200)
	if code, b := a.do(edit, "GET", "/api/v1/namespaces/a/pods", ""); code != 401 {
		t.Fatalf("the request after the revocation: %d %s", code, b)
	}
	// A token of a revoked in namespace b's name is not found there.
	a.asAdmin("DELETE", "/api/v1/namespaces/b/tokens/"+issued.ID, "", 404)

	// Listing shows metadata only: no secret, no hash.
	list := a.asAdmin("GET", "/api/v1/tokens", "", 200)
	secret := strings.SplitN(issued.Token, "_", 3)[2]
	if !strings.Contains(list, issued.ID) || strings.Contains(list, secret) || strings.Contains(list, "sha256") || !strings.Contains(list, `"revokedAt"`) {
		t.Fatalf("token list: %s", list)
	}
	// The database holds no secret in plain text: every column of every row.
	rows, err := a.st.Pool().Query(context.Background(), `SELECT t::text, encode(secret_sha256, 'escape') FROM api_tokens t`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var row, raw string
		if err := rows.Scan(&row, &raw); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(row, secret) || strings.Contains(raw, secret) || strings.Contains(row, a.admin) {
			t.Fatalf("a token secret is stored in plain text: %s", row)
		}
		n++
	}
	if n < 2 {
		t.Fatalf("%d token rows, want the admin's and the issued one", n)
	}
}

func TestTokenRequestsAreValidatedAndCannotEscalate(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	admin := caller{bearer: issue(t, a.st, auth.RoleAdmin, "a")}
	for _, tc := range []struct {
		name, path, body string
		code             int
		field            string
	}{
		{"a namespace admin asks for a cluster-admin role", "/api/v1/namespaces/a/tokens", `{"role":"cluster-admin"}`, 422, "role"},
		{"a namespace admin asks for a node-join role", "/api/v1/namespaces/a/tokens", `{"role":"node-join"}`, 422, "role"},
		{"no role", "/api/v1/namespaces/a/tokens", `{"ttlSeconds":60}`, 422, "role"},
		{"negative lifetime", "/api/v1/namespaces/a/tokens", `{"role":"view","ttlSeconds":-1}`, 422, "ttlSeconds"},
		{"lifetime beyond a year", "/api/v1/namespaces/a/tokens", `{"role":"view","ttlSeconds":40000000}`, 422, "ttlSeconds"},
		{"lifetime that overflows a duration", "/api/v1/namespaces/a/tokens", `{"role":"view","ttlSeconds":9223372037}`, 422, "ttlSeconds"},
		{"a cluster token", "/api/v1/tokens", `{"ttlSeconds":60}`, 403, ""},
	} {
		code, body := a.do(admin, "POST", tc.path, tc.body)
		if code != tc.code || (tc.field != "" && !strings.Contains(body, `"field":"`+tc.field+`"`)) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, code, body, tc.code, tc.field)
		}
	}
	if code, body := a.do(caller{bearer: a.admin}, "POST", "/api/v1/tokens", `{"role":"view"}`); code != 422 || !strings.Contains(body, `"field":"role"`) {
		t.Errorf("a cluster token with a namespace role: %d %s", code, body)
	}
}

func TestNodeJoinsWithAJoinToken(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	var join api.IssuedToken
	if err := json.Unmarshal([]byte(a.asAdmin("POST", "/api/v1/nodejointokens", `{"ttlSeconds":600}`, 201)), &join); err != nil {
		t.Fatal(err)
	}
	_, csr, err := pki.NewCSR("node:n1") // asks for another node's name: the server decides
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.JoinRequest{CSR: csr})
	expired, _, err := a.tokens.Issue(context.Background(), auth.RoleNodeJoin, "", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	// The secret's last two characters changed (they were "AA" once in
	// about 4,000 tokens, which made this the token itself).
	wrong := join.Token[:len(join.Token)-2] + "AA"
	if wrong == join.Token {
		wrong = join.Token[:len(join.Token)-2] + "BB"
	}
	for name, bad := range map[string]string{"bad": "zw_nothing_wrong", "expired": expired, "wrong secret": wrong} {
		if code, b := a.do(caller{bearer: bad}, "POST", "/api/v1/nodes/n7/join", string(body)); code != 401 {
			t.Errorf("join with a %s join token: %d %s", name, code, b)
		}
	}
	joiner := caller{bearer: join.Token}
	// Refused before it is spent: a join token joins, and does nothing else.
	if code, b := a.do(joiner, "GET", "/api/v1/nodes/n7", ""); code != 403 {
		t.Fatalf("a join token reading a Node: %d %s", code, b)
	}
	if code, b := a.do(joiner, "POST", "/api/v1/nodes/n7/join", `{}`); code != 422 || !strings.Contains(b, `"field":"csr"`) {
		t.Fatalf("join without a CSR: %d %s", code, b)
	}
	if code, b := a.do(joiner, "POST", "/api/v1/nodes/n7/join", `{"csr":"bm90IGEgQ1NS"}`); code != 422 || !strings.Contains(b, `"field":"csr"`) {
		t.Fatalf("join with a CSR that is not one: %d %s", code, b)
	}
	if code, b := a.do(joiner, "POST", "/api/v1/nodes/N_7/join", string(body)); code != 422 {
		t.Fatalf("join as a bad node name: %d %s", code, b)
	}
	code, b := a.do(joiner, "POST", "/api/v1/nodes/n7/join", string(body))
	if code != 200 {
		t.Fatalf("join: %d %s", code, b)
	}
	var resp api.JoinResponse
	if err := json.Unmarshal([]byte(b), &resp); err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCert([]byte(resp.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "node:n7" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != pki.NodesOrg ||
		resp.CACertificate != string(a.ca.CertPEM) || cert.CheckSignatureFrom(a.ca.Cert) != nil {
		t.Fatalf("node certificate: %v %v", cert.Subject, cert.CheckSignatureFrom(a.ca.Cert))
	}
	n7 := caller{cert: cert}
	if code, b := a.do(n7, "GET", "/api/v1/nodes/n7", ""); code == 401 || code == 403 {
		t.Fatalf("the joined node reading its own Node: %d %s", code, b)
	}
	if code, b := a.do(n7, "GET", "/api/v1/nodes/n1", ""); code != 403 {
		t.Fatalf("the joined node reading another Node: %d %s", code, b)
	}
}

func TestWatchesPerIdentityAreBounded(t *testing.T) {
	a := newAuthzAPI(t, 1)
	a.seed()
	// The first watch holds its slot once its headers arrive.
	srv := httptest.NewServer(a.h)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/namespaces/a/pods?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+a.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first watch: %v %v", resp, err)
	}
	defer resp.Body.Close()
	code, body := a.do(caller{bearer: a.admin}, "GET", "/api/v1/namespaces/b/pods?watch=true", "")
	rec := httptest.NewRecorder()
	rq := httptest.NewRequest("GET", "/api/v1/namespaces/b/pods?watch=true", nil)
	rq.Header.Set("Authorization", "Bearer "+a.admin)
	a.h.ServeHTTP(rec, rq)
	if code != 429 || rec.Code != 429 || rec.Header().Get("Retry-After") == "" || !strings.Contains(body, `"reason":"TooManyRequests"`) {
		t.Fatalf("a second watch of the same identity: %d %q %s, want 429 with Retry-After", code, rec.Header().Get("Retry-After"), body)
	}
	// Another identity has watches of its own.
	if code, b := a.do(caller{bearer: issue(t, a.st, auth.RoleView, "a")}, "GET", "/api/v1/namespaces/a/pods?watch=true", ""); code != 200 {
		t.Fatalf("another identity's watch: %d %s", code, b)
	}
	// The slot comes back when the watch ends.
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, _ := a.do(caller{bearer: a.admin}, "GET", "/api/v1/namespaces/a/pods?watch=true", "")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended watch's slot was not given back: %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAuditLogRecordsWritesAndRefusals(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	a.audit.Reset()
	view := caller{bearer: issue(t, a.st, auth.RoleView, "a")}
	a.do(view, "GET", "/api/v1/namespaces/a/pods", "")
	a.do(view, "DELETE", "/api/v1/namespaces/a/pods/p1", "")
	a.do(caller{bearer: "zw_bad_token"}, "GET", "/api/v1/namespaces/a/pods", "")
	body := a.asAdmin("POST", "/api/v1/namespaces/a/tokens", `{"role":"view"}`, 201)
	var issued api.IssuedToken
	_ = json.Unmarshal([]byte(body), &issued)
	lines := strings.Split(strings.TrimSpace(a.audit.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 audit lines (the refused delete, the 401, the token create), not the allowed read:\n%s", a.audit)
	}
	type entry struct {
		Time                                      time.Time
		Identity, Verb, Resource, Namespace, Name string
		Code                                      int
	}
	var got []entry
	for _, l := range lines {
		var e entry
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Time.IsZero() {
			t.Fatalf("audit line %q: %v", l, err)
		}
		got = append(got, e)
	}
	viewID := strings.Split(view.bearer, "_")[1]
	if g := got[0]; g.Identity != "token:"+viewID || g.Verb != "delete" || g.Resource != "pods" || g.Namespace != "a" || g.Name != "p1" || g.Code != 403 {
		t.Errorf("refused delete: %+v", g)
	}
	if g := got[1]; g.Identity != "system:anonymous" || g.Verb != "list" || g.Code != 401 {
		t.Errorf("401: %+v", g)
	}
	if g := got[2]; g.Verb != "create" || g.Resource != "tokens" || g.Code != 201 {
		t.Errorf("token create: %+v", g)
	}
	for _, secret := range []string{view.bearer, a.admin, issued.Token, "zw_bad_token"} {
		if strings.Contains(a.audit.String(), secret) {
			t.Fatalf("the audit log holds a token: %s", a.audit)
		}
	}
}

// A claim's streams go from the node it moves from to the node it moves
// to, by their certificates: no other node, no token, no other transfer.
func TestVolumeTransfersAreTheirNodesOnly(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	ctx := context.Background()
	c, err := a.st.Claims().Modify(ctx, "a", "c", func(c *model.PersistentVolumeClaim) bool {
		c.Status.Move = &model.ClaimMove{Phase: model.MoveCopying, From: "n1", To: "n2", ID: "m1"}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	xfer := "/api/v1/volumetransfers/" + controlops.TransferID(c.Metadata.UID, "m1", 2)
	n1, n2, n3 := caller{cert: a.nodeCert("n1")}, caller{cert: a.nodeCert("n2")}, caller{cert: a.nodeCert("n3")}
	for _, tc := range []struct {
		what         string
		who          caller
		method, path string
		allowed      bool
	}{
		{"the old node uploads", n1, "PUT", xfer, true},
		{"the new node downloads", n2, "GET", xfer, true},
		{"the new node uploads", n2, "PUT", xfer, false},
		{"the old node downloads", n1, "GET", xfer, false},
		{"another node downloads", n3, "GET", xfer, false},
		{"another step of the move", n2, "GET", "/api/v1/volumetransfers/" + controlops.TransferID(c.Metadata.UID, "m1", 3), false},
		{"another move of the claim", n2, "GET", "/api/v1/volumetransfers/" + controlops.TransferID(c.Metadata.UID, "m0", 2), false},
		{"no claim's transfer", n2, "GET", "/api/v1/volumetransfers/x", false},
		{"a namespace admin", caller{bearer: issue(t, a.st, auth.RoleAdmin, "a")}, "GET", xfer, false},
	} {
		code, body := a.do(tc.who, tc.method, tc.path, "stream")
		if denied := code == 401 || code == 403; denied == tc.allowed {
			t.Errorf("%s: %d %s, allowed %t", tc.what, code, body, tc.allowed)
		}
	}
	if code, _ := a.do(caller{}, "GET", xfer, ""); code != 401 {
		t.Errorf("a download without credentials: %d, want 401", code)
	}
	// Uploads are for the steps of a move under way, whoever sends them:
	// the move's end removes its streams, and nothing else is kept. (Drop
	// the transferNodes check in uploadTransfer to see the invented one
	// kept.)
	admin := caller{bearer: a.admin}
	if code, b := a.do(admin, "PUT", xfer, "stream"); code != 201 {
		t.Errorf("a cluster-admin uploads the move's stream: %d %s", code, b)
	}
	for _, invented := range []string{"x", controlops.TransferID(c.Metadata.UID, "m0", 2), c.Metadata.UID + "-junk"} {
		if code, b := a.do(admin, "PUT", "/api/v1/volumetransfers/"+invented, "junk"); code != 404 {
			t.Errorf("a cluster-admin uploads under an invented ID %s: %d %s, want 404", invented, code, b)
		}
	}
	// A stream is bounded by what its claim (1Gi) can hold: 2 GiB and
	// 64 MiB. (Pass no bound from uploadTransfer to see it taken.)
	req := httptest.NewRequest("PUT", xfer, strings.NewReader("stream"))
	req.ContentLength = 2<<30 + 64<<20 + 1
	req.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{n1.cert}, VerifiedChains: [][]*x509.Certificate{{n1.cert, a.ca.Cert}}}
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "more than its claim can hold") {
		t.Errorf("the old node uploads a stream longer than its claim's bound: %d %s, want 413", w.Code, w.Body)
	}
}
