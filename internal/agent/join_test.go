package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
		joins++
		_ = json.NewEncoder(w).Encode(map[string]string{"certificate": string(cert), "caCertificate": string(ca.CertPEM)})
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

// A kept certificate of this node is used as it is, join token or not:
// node certificates are client certificates, and the endpoint serves
// with one (the control plane verifies it by chain and subject).
func TestAKeptCertificateIsUsedWithoutJoiningAgain(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	joins := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ CSR []byte }
		_ = json.NewDecoder(r.Body).Decode(&req)
		cert, err := ca.SignCSR(req.CSR, "node:n1", []string{"zonewright:nodes"})
		if err != nil {
			w.WriteHeader(422)
			return
		}
		joins++
		_ = json.NewEncoder(w).Encode(map[string]string{"certificate": string(cert), "caCertificate": string(ca.CertPEM)})
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
	if _, err := NodeCredential(context.Background(), JoinConfig{APIURL: srv.URL, Node: "n1", StateDir: state}); err != nil || joins != 0 {
		t.Fatalf("without a join token the kept certificate is used: %v, joins %d", err, joins)
	}
	tokenFile := filepath.Join(t.TempDir(), "join.token")
	if err := os.WriteFile(tokenFile, []byte("zw_join_secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NodeCredential(context.Background(), JoinConfig{APIURL: srv.URL, Node: "n1", StateDir: state, JoinTokenFile: tokenFile}); err != nil || joins != 0 {
		t.Fatalf("with a join token the kept certificate is still used: %v, joins %d", err, joins)
	}
}
