package api_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/pki"
)

// Whoever holds a join token names the node; a node called localhost must
// not get a certificate that clients trusting the cluster CA take for the
// server at localhost (the API's, say). A node certificate authenticates a
// client only, and the node's serving certificate serves only under
// <node>.node.zonewright.invalid. Revert pki.go's SignCSR to add
// ExtKeyUsageServerAuth and the node's name as a DNS name (as it did), or
// make SignServingCSR name dnsName's node alone, to see this fail.
func TestAJoinedNodeCertificateServesNoClient(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	var join api.IssuedToken
	if err := json.Unmarshal([]byte(a.asAdmin("POST", "/api/v1/nodejointokens", `{"ttlSeconds":600}`, 201)), &join); err != nil {
		t.Fatal(err)
	}
	keyPEM, csr, err := pki.NewCSR("node:localhost")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.JoinRequest{CSR: csr})
	code, b := a.do(caller{bearer: join.Token}, "POST", "/api/v1/nodes/localhost/join", string(body))
	if code != 200 {
		t.Fatalf("join as localhost: %d %s", code, b)
	}
	var resp api.JoinResponse
	if err := json.Unmarshal([]byte(b), &resp); err != nil {
		t.Fatal(err)
	}
	get := func(certPEM, serverName string) error {
		pair, err := tls.X509KeyPair([]byte(certPEM), keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		srv.StartTLS()
		defer srv.Close()
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.ca.Pool(), ServerName: serverName, MinVersion: tls.VersionTLS12}}}
		r, err := c.Get(srv.URL)
		if err == nil {
			r.Body.Close()
		}
		return err
	}
	for name, certPEM := range map[string]string{"node": resp.Certificate, "serving": resp.ServingCertificate} {
		for _, server := range []string{"localhost", "127.0.0.1"} {
			if err := get(certPEM, server); err == nil {
				t.Errorf("a client trusting the cluster CA took node localhost's %s certificate for the server at %s", name, server)
			}
		}
	}
	// Where it serves, it is verified as any server.
	if err := get(resp.ServingCertificate, "localhost.node.zonewright.invalid"); err != nil {
		t.Errorf("the node's endpoint under its serving name: %v", err)
	}
}

// A join token is for one new node: spent by the join it allows (of two
// joins racing with one token, one gets the certificate), refused for a
// node that exists (which would hand its pods' secrets and its task queue
// to the token's holder) and, when it names a node, for any other name.
// Revert joinNode's SpendJoinToken call, its existing-node check or its
// JoinNode check to see each part fail.
func TestAJoinTokenJoinsOneNewNodeOnce(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	issueJoin := a.issueJoin
	_, csr, err := pki.NewCSR("node:any")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.JoinRequest{CSR: csr})
	join := func(tok api.IssuedToken, node string) (int, string) {
		return a.do(caller{bearer: tok.Token}, "POST", "/api/v1/nodes/"+node+"/join", string(body))
	}

	tok := issueJoin(`{}`)
	if code, b := join(tok, "n1"); code != 409 || !strings.Contains(b, `"reason":"AlreadyExists"`) {
		t.Errorf("join as existing node n1: %d %s, want 409 AlreadyExists", code, b)
	}
	// The refusal did not spend it; the join does.
	if code, b := join(tok, "n8"); code != 200 {
		t.Fatalf("join as new node n8: %d %s", code, b)
	}
	if code, b := join(tok, "n9"); code != 401 {
		t.Errorf("the same token again, for n9: %d %s, want 401", code, b)
	}

	bound := issueJoin(`{"nodeName":"n10"}`)
	if bound.NodeName != "n10" {
		t.Errorf("issued join token names node %q, want n10", bound.NodeName)
	}
	if code, b := join(bound, "n11"); code != 403 || !strings.Contains(b, `this join token is for node \"n10\"`) {
		t.Errorf("a token for n10 used for n11: %d %s, want 403", code, b)
	}
	if code, b := join(bound, "n10"); code != 200 {
		t.Errorf("a token for n10 used for n10: %d %s", code, b)
	}

	raced := issueJoin(`{}`)
	if ok := atOnce(t, 8, func(i int) int { code, _ := join(raced, fmt.Sprintf("r%d", i)); return code }, 401); ok != 1 {
		t.Errorf("%d of 8 racing joins with one token got a certificate, want 1", ok)
	}

	// Eight hosts, each with a token of its own, joining under one new
	// name at once: one gets it, the others find it taken. (Drop the
	// LockJoins call in joinNode to see several get certificates.)
	tokens := make([]api.IssuedToken, 8)
	for i := range tokens {
		tokens[i] = issueJoin(`{}`)
	}
	if ok := atOnce(t, 8, func(i int) int { code, _ := join(tokens[i], "r-one"); return code }, 409); ok != 1 {
		t.Errorf("%d of 8 hosts joining as r-one at once got a certificate, want 1", ok)
	}

	for _, bad := range []string{`{"nodeName":"N_1"}`, `{"nodeName":""}x`} {
		if code, b := a.do(caller{bearer: a.admin}, "POST", "/api/v1/nodejointokens", bad); code != 422 && code != 400 {
			t.Errorf("join token with %s: %d %s", bad, code, b)
		}
	}
	if code, b := a.do(caller{bearer: a.admin}, "POST", "/api/v1/tokens", `{"nodeName":"n1"}`); code != 422 || !strings.Contains(b, `"field":"nodeName"`) {
		t.Errorf("a cluster-admin token bound to a node: %d %s, want 422 on nodeName", code, b)
	}
	var list api.TokenList
	if err := json.Unmarshal([]byte(a.asAdmin("GET", "/api/v1/tokens", "", 200)), &list); err != nil {
		t.Fatal(err)
	}
	for _, l := range list.Items {
		if l.ID == tok.ID && l.UsedAt == nil {
			t.Errorf("the spent join token is listed unused: %+v", l)
		}
		if l.ID == bound.ID && l.NodeName != "n10" {
			t.Errorf("the bound join token is listed for node %q", l.NodeName)
		}
	}
}

// Deleting a Node revokes the certificates its joins got: the deleted
// node's certificate neither reads nor registers it again (as the agent
// would, still running on the host). A new join of the name, allowed once
// the Node is gone, works. Drop the revoked check of authenticate
// (api/access.go) to see the old certificate register the node again.
func TestADeletedNodesCertificateIsRefused(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	joinAs := func(node string) *x509.Certificate {
		t.Helper()
		_, csr, err := pki.NewCSR("node:" + node)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(api.JoinRequest{CSR: csr})
		code, b := a.do(caller{bearer: a.issueJoin(`{}`).Token}, "POST", "/api/v1/nodes/"+node+"/join", string(body))
		return joinedCert(t, code, b)
	}
	register := `{"metadata":{"name":"n30"}}`
	old := caller{cert: joinAs("n30")}
	if code, b := a.do(old, "PUT", "/api/v1/nodes/n30/status", register); code != 201 {
		t.Fatalf("the joined node registers: %d %s", code, b)
	}
	a.asAdmin("DELETE", "/api/v1/nodes/n30", "", 200)
	if code, b := a.do(old, "GET", "/api/v1/nodes/n30", ""); code != 401 {
		t.Errorf("the deleted node's certificate reads its Node: %d %s, want 401", code, b)
	}
	if code, b := a.do(old, "PUT", "/api/v1/nodes/n30/status", register); code != 401 {
		t.Errorf("the deleted node's certificate registers it again: %d %s, want 401", code, b)
	}
	renewed := caller{cert: joinAs("n30")}
	if code, b := a.do(renewed, "PUT", "/api/v1/nodes/n30/status", register); code != 201 {
		t.Errorf("the node joined again registers: %d %s", code, b)
	}
	if code, b := a.do(old, "GET", "/api/v1/nodes/n30", ""); code != 401 {
		t.Errorf("the old certificate after the node joined again: %d %s, want 401", code, b)
	}
}

// A node renews its certificates over its current one: the new ones are
// short-lived, for its own name only, recorded (deleting the node
// revokes them too), and nothing but the node's own certificate renews
// them. A host whose certificate expired is readmitted only with a join
// token made for its name. (Drop the requestingNode check in
// renewNodeCertificate to see another node's and an admin's renewal
// served; drop "&& id.JoinNode != name" in joinNode to see the
// readmission refused.)
func TestANodeRenewsItsCertificateOverItsCurrentOne(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	issueJoin := a.issueJoin
	_, csr, err := pki.NewCSR("node:any")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(api.JoinRequest{CSR: csr})
	certOf := func(code int, b string) *x509.Certificate { t.Helper(); return joinedCert(t, code, b) }
	joined := certOf(a.do(caller{bearer: issueJoin(`{}`).Token}, "POST", "/api/v1/nodes/n40/join", string(body)))
	if life := joined.NotAfter.Sub(joined.NotBefore); life != pki.NodeCertValidity {
		t.Errorf("a joined node's certificate lives %v, want %v", life, pki.NodeCertValidity)
	}
	register := `{"metadata":{"name":"n40"}}`
	if code, b := a.do(caller{cert: joined}, "PUT", "/api/v1/nodes/n40/status", register); code != 201 {
		t.Fatalf("the joined node registers: %d %s", code, b)
	}
	renewed := certOf(a.do(caller{cert: joined}, "POST", "/api/v1/nodes/n40/certificate", string(body)))
	if renewed.Subject.CommonName != "node:n40" || renewed.SerialNumber.Cmp(joined.SerialNumber) == 0 || renewed.NotAfter.Before(joined.NotAfter) {
		t.Errorf("renewed: %s serial %s until %v; joined: serial %s until %v", renewed.Subject.CommonName, renewed.SerialNumber, renewed.NotAfter, joined.SerialNumber, joined.NotAfter)
	}
	if code, b := a.do(caller{cert: renewed}, "GET", "/api/v1/nodes/n40", ""); code != 200 {
		t.Errorf("the renewed certificate reads its Node: %d %s", code, b)
	}
	if code, b := a.do(caller{cert: joined}, "POST", "/api/v1/nodes/n41/certificate", string(body)); code != 403 {
		t.Errorf("n40 renews n41's certificate: %d %s, want 403", code, b)
	}
	if code, b := a.do(caller{bearer: issueJoin(`{}`).Token}, "POST", "/api/v1/nodes/n40/certificate", string(body)); code != 403 {
		t.Errorf("a join token renews n40's certificate: %d %s, want 403", code, b)
	}
	if code, b := a.do(caller{bearer: a.admin}, "POST", "/api/v1/nodes/n40/certificate", string(body)); code != 403 {
		t.Errorf("a cluster-admin renews n40's certificate: %d %s, want 403", code, b)
	}

	// Readmission: an unbound token may not take the name; one made for
	// it may, and is spent.
	if code, b := a.do(caller{bearer: issueJoin(`{}`).Token}, "POST", "/api/v1/nodes/n40/join", string(body)); code != 409 {
		t.Errorf("an unbound join token for existing n40: %d %s, want 409", code, b)
	}
	readmit := issueJoin(`{"nodeName":"n40"}`)
	certOf(a.do(caller{bearer: readmit.Token}, "POST", "/api/v1/nodes/n40/join", string(body)))
	if code, b := a.do(caller{bearer: readmit.Token}, "POST", "/api/v1/nodes/n40/join", string(body)); code != 401 {
		t.Errorf("the readmitting token again: %d %s, want 401", code, b)
	}

	a.asAdmin("DELETE", "/api/v1/nodes/n40", "", 200)
	if code, b := a.do(caller{cert: renewed}, "POST", "/api/v1/nodes/n40/certificate", string(body)); code != 401 {
		t.Errorf("the deleted node renews: %d %s, want 401", code, b)
	}
}

// issueJoin issues a join token as a cluster-admin, body as POST
// /api/v1/nodejointokens takes it.
func (a *authzAPI) issueJoin(body string) api.IssuedToken {
	a.t.Helper()
	var tok api.IssuedToken
	if err := json.Unmarshal([]byte(a.asAdmin("POST", "/api/v1/nodejointokens", body, 201)), &tok); err != nil {
		a.t.Fatal(err)
	}
	return tok
}

// joinedCert is the client certificate a join or a renewal answered
// (code 200, body b).
func joinedCert(t *testing.T, code int, b string) *x509.Certificate {
	t.Helper()
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	var resp api.JoinResponse
	if err := json.Unmarshal([]byte(b), &resp); err != nil {
		t.Fatal(err)
	}
	cert, err := pki.ParseCert([]byte(resp.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// atOnce runs join n times at once and counts the 200s; any other answer
// than refused is an error.
func atOnce(t *testing.T, n int, join func(i int) int, refused int) (ok int) {
	t.Helper()
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { codes <- join(i) })
	}
	wg.Wait()
	close(codes)
	for code := range codes {
		if code == 200 {
			ok++
		} else if code != refused {
			t.Errorf("a join at once with others: %d, want 200 or %d", code, refused)
		}
	}
	return ok
}

// A join token lives a day at most: until it is spent, whoever holds it
// joins in the operator's host's place. (Give createJoinToken
// MaxTokenTTL again to see a 25-hour one issued.)
func TestAJoinTokenLivesADayAtMost(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	if code, b := a.do(caller{bearer: a.admin}, "POST", "/api/v1/nodejointokens", `{"ttlSeconds":90000}`); code != 422 || !strings.Contains(b, `"field":"ttlSeconds"`) {
		t.Errorf("a join token for 25 hours: %d %s, want 422 naming ttlSeconds", code, b)
	}
	if tok := a.issueJoin(`{"ttlSeconds":86400}`); time.Until(tok.ExpiresAt) > api.MaxJoinTokenTTL {
		t.Errorf("a join token for a day expires %v", tok.ExpiresAt)
	}
}
