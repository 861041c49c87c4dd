package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Starters sharing a directory at once (the Temporal server and serve of
// docker-compose.yml on one volume) end up with one CA, the one on disk:
// none keeps a CA another has overwritten. (Drop the lock and the second
// loadCA in LoadOrCreateCA to see this fail.)
func TestStartersTogetherMakeOneCA(t *testing.T) {
	for range 5 {
		dir := t.TempDir()
		prints := make([]string, 8)
		var wg sync.WaitGroup
		for i := range prints {
			wg.Go(func() {
				ca, err := LoadOrCreateCA(dir, "test CA")
				if err != nil {
					t.Error(err)
					return
				}
				prints[i] = ca.Fingerprint()
			})
		}
		wg.Wait()
		onDisk, err := LoadOrCreateCA(dir, "test CA")
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range prints {
			if p != onDisk.Fingerprint() {
				t.Fatalf("starter %d holds CA %s, the directory has %s", i, p, onDisk.Fingerprint())
			}
		}
	}
}

func TestCAIsReusedAcrossLoads(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreateCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreateCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatalf("fingerprint changed across loads: %s != %s", a.Fingerprint(), b.Fingerprint())
	}
	fi, err := os.Stat(filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestServerCertIsReusedUntilItNoLongerFits(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	crt, key := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := ca.EnsureServerCert(crt, key, []string{"127.0.0.1", "localhost"}); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(crt)
	if err := ca.EnsureServerCert(crt, key, []string{"localhost"}); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(crt); string(again) != string(first) {
		t.Fatal("a certificate covering the hosts was issued again")
	}
	if err := ca.EnsureServerCert(crt, key, []string{"127.0.0.1", "api.example"}); err != nil {
		t.Fatal(err)
	}
	third, _ := os.ReadFile(crt)
	if string(third) == string(first) {
		t.Fatal("a certificate missing a host was kept")
	}
	c, err := ParseCert(third)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.VerifyHostname("api.example"); err != nil {
		t.Fatal(err)
	}
}

// A client certificate made from a CSR carries the subject the CA chose,
// and a TLS server requiring this CA's clients accepts it and no other.
func TestSignedCSRAuthenticatesOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, csr, err := NewCSR("node:asked-for")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignCSR(csr, "node:n1", []string{"zonewright:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	crt, err := ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if crt.Subject.CommonName != "node:n1" {
		t.Fatalf("subject %q, want the CA's choice node:n1", crt.Subject.CommonName)
	}
	// A node dials the control plane with it; no client takes it for a
	// server's.
	if _, err := crt.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("a node certificate authenticates a server")
	}
	if len(crt.DNSNames)+len(crt.IPAddresses) != 0 {
		t.Fatalf("a node certificate names hosts: %v %v", crt.DNSNames, crt.IPAddresses)
	}
	if _, err := crt.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("a node certificate cannot dial: %v", err)
	}

	// The endpoint's certificate for the same key serves only under the
	// node's serving name.
	servingPEM, err := ca.SignServingCSR(csr, "node:n1", NodeServingName("n1"))
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ParseCert(servingPEM)
	if err != nil {
		t.Fatal(err)
	}
	if len(serving.ExtKeyUsage) != 1 || serving.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth || len(serving.DNSNames) != 1 ||
		serving.DNSNames[0] != "n1.node.zonewright.invalid" || len(serving.IPAddresses) != 0 {
		t.Fatalf("serving certificate: usages %v names %v %v", serving.ExtKeyUsage, serving.DNSNames, serving.IPAddresses)
	}
	if _, err := ca.SignServingCSR(csr, "node:localhost", "localhost"); err == nil {
		t.Fatal("a serving certificate for localhost was issued")
	}

	srvCert, srvKey, err := ca.ServerCert([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.TLS.PeerCertificates[0].Subject.CommonName
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()

	clientPair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	get := func(certs []tls.Certificate, roots *x509.CertPool) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get([]tls.Certificate{clientPair}, ca.Pool()); err != nil {
		t.Fatal(err)
	}
	if seen != "node:n1" {
		t.Fatalf("server saw %q", seen)
	}
	other, err := LoadOrCreateCA(t.TempDir(), "other CA")
	if err != nil {
		t.Fatal(err)
	}
	foreignCert, foreignKey, _ := other.ClientCert("node:n1", nil)
	foreign, _ := tls.X509KeyPair(foreignCert, foreignKey)
	if err := get([]tls.Certificate{foreign}, ca.Pool()); err == nil {
		t.Fatal("a certificate from another CA was accepted")
	}
	if err := get(nil, other.Pool()); err == nil {
		t.Fatal("a client trusting another CA accepted the server")
	}
}

func TestPeerCertServesAndDials(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir(), "test CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.PeerCert([]string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	dial := func(cert tls.Certificate) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cert}}}}
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	// The same certificate on both ends.
	if err := dial(pair); err != nil {
		t.Fatalf("a peer certificate dials a server using it: %v", err)
	}
	// A server certificate is not a client certificate.
	srvCert, srvKey, _ := ca.ServerCert([]string{"127.0.0.1"})
	serverOnly, _ := tls.X509KeyPair(srvCert, srvKey)
	if err := dial(serverOnly); err == nil {
		t.Fatal("a server-only certificate was accepted as a client's")
	}
}
