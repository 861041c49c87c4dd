package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/pki"
)

// A node joins once with its join token, keeps its key and certificate,
// and a restart reuses them without the token.
func TestNodeCredentialJoinsOnceAndIsKept(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	joins := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes/n1/join" || r.Header.Get("Authorization") != "Bearer zw_join_secret" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"kind":"Status","message":"Unauthorized"}`))
			return
		}
		var req struct{ CSR []byte }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(400)
			return
		}
		cert, err := ca.SignCSR(req.CSR, "node:n1", []string{"zonewright:nodes"})
		if err != nil {
			w.WriteHeader(422)
			return
		}
		serving, _ := ca.SignServingCSR(req.CSR, "node:n1", pki.NodeServingName("n1"))
		joins++
		_ = json.NewEncoder(w).Encode(map[string]string{"certificate": string(cert), "servingCertificate": string(serving), "caCertificate": string(ca.CertPEM)})
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "join.token")
	if err := os.WriteFile(tokenFile, []byte("zw_join_secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	cfg := JoinConfig{APIURL: srv.URL, Node: "n1", StateDir: state, JoinTokenFile: tokenFile}
	if _, err := NodeCredential(context.Background(), JoinConfig{APIURL: srv.URL, Node: "n1", StateDir: state}); err == nil || !strings.Contains(err.Error(), "--join-token-file") {
		t.Fatalf("no certificate and no join token: %v", err)
	}
	cert, err := NodeCredential(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.Certificate) == 0 || joins != 1 {
		t.Fatalf("joined %d times, certificate %v", joins, cert.Certificate)
	}
	if fi, err := os.Stat(filepath.Join(state, NodeKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node.key: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(NodeCAPath(state)); string(b) != string(ca.CertPEM) {
		t.Fatalf("the cluster CA was not kept")
	}
	// The node certificate is a client's only; the endpoint serves with
	// the serving certificate, for the same key.
	if leaf, _ := x509.ParseCertificate(cert.Certificate[0]); slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Fatalf("the node certificate serves: %v", leaf.ExtKeyUsage)
	}
	serving, err := ServingCertificate(state, cert)
	if err != nil || serving.Leaf == nil || !slices.Equal(serving.Leaf.DNSNames, []string{"n1.node.zonewright.invalid"}) {
		t.Fatalf("serving certificate: %v %v", serving.Leaf, err)
	}
	// Restarted without the token: the kept certificate is used.
	if _, err := NodeCredential(context.Background(), JoinConfig{APIURL: srv.URL, Node: "n1", StateDir: state}); err != nil || joins != 1 {
		t.Fatalf("restart: %v, joins %d", err, joins)
	}
	// A certificate for another node is not this node's: it joins again,
	// and a refused join token says so.
	if err := os.WriteFile(tokenFile, []byte("zw_wrong_token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NodeCredential(context.Background(), JoinConfig{APIURL: srv.URL, Node: "n2", StateDir: state, JoinTokenFile: tokenFile}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("join with a refused token: %v", err)
	}
}

// A certificate from before node certificates stopped serving is kept,
// and serves the endpoint; a client-only one without a serving
// certificate is replaced when a join token is at hand, and kept
// otherwise.
func TestAKeptCertificateWithoutAServingOneJoinsAgain(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	joins, refuse := 0, false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse { // the control plane refuses the name of a node that exists
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"kind":"Status","reason":"AlreadyExists"}`))
			return
		}
		var req struct{ CSR []byte }
		_ = json.NewDecoder(r.Body).Decode(&req)
		cert, err := ca.SignCSR(req.CSR, "node:n1", []string{"zonewright:nodes"})
		if err != nil {
			w.WriteHeader(422)
			return
		}
		serving, _ := ca.SignServingCSR(req.CSR, "node:n1", pki.NodeServingName("n1"))
		joins++
		_ = json.NewEncoder(w).Encode(map[string]string{"certificate": string(cert), "servingCertificate": string(serving), "caCertificate": string(ca.CertPEM)})
	}))
	t.Cleanup(srv.Close)
	state := t.TempDir()
	oldCert, oldKey, err := ca.ClientCert("node:n1", []string{"zonewright:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, NodeCertFile), oldCert, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, NodeKeyFile), oldKey, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := NodeCredential(context.Background(), JoinConfig{APIURL: srv.URL, Node: "n1", StateDir: state})
	if err != nil || joins != 0 {
		t.Fatalf("without a join token the kept certificate is used: %v, joins %d", err, joins)
	}
	if _, err := ServingCertificate(state, cert); err == nil {
		t.Fatal("a client certificate serves the endpoint")
	}
	tokenFile := filepath.Join(t.TempDir(), "join.token")
	if err := os.WriteFile(tokenFile, []byte("zw_join_secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A join refused (its Node exists) keeps the certificate it had: the
	// agent runs, its endpoint does not serve. Return the join's error in
	// NodeCredential whatever was kept to see it fail.
	refuse = true
	if kept, err := NodeCredential(context.Background(), JoinConfig{APIURL: srv.URL, Node: "n1", StateDir: state, JoinTokenFile: tokenFile}); err != nil ||
		!bytes.Equal(kept.Certificate[0], cert.Certificate[0]) {
		t.Fatalf("a refused join: %v; want the kept certificate", err)
	}
	refuse = false
	cert, err = NodeCredential(context.Background(), JoinConfig{APIURL: srv.URL, Node: "n1", StateDir: state, JoinTokenFile: tokenFile})
	if err != nil || joins != 1 {
		t.Fatalf("with a join token the node joins again for a serving certificate: %v, joins %d", err, joins)
	}
	if _, err := ServingCertificate(state, cert); err != nil {
		t.Fatalf("after joining again: %v", err)
	}
	if _, err := NodeCredential(context.Background(), JoinConfig{APIURL: srv.URL, Node: "n1", StateDir: state, JoinTokenFile: tokenFile}); err != nil || joins != 1 {
		t.Fatalf("once it serves, the kept certificate is used: %v, joins %d", err, joins)
	}

	// A node certificate of before, fit to serve, serves as it is.
	dual, dualKey, err := ca.PeerCert([]string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(dual, dualKey)
	if err != nil {
		t.Fatal(err)
	}
	if serving, err := ServingCertificate(t.TempDir(), pair); err != nil || &serving.Certificate[0][0] != &pair.Certificate[0][0] {
		t.Fatalf("a node certificate that serves: %v", err)
	}
}
