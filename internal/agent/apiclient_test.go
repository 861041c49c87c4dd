package agent

import (
	"crypto/tls"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/zonewright/zonewright/internal/pki"
)

func TestAPIClientTrustsOnlyTheGivenCA(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	ours := httptest.NewTLSServer(ok)
	t.Cleanup(ours.Close)
	// Another server, its certificate from a CA of its own (httptest's
	// servers all share one certificate).
	otherCA, err := pki.LoadOrCreateCA(t.TempDir(), "other CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := otherCA.ServerCert([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	other := httptest.NewUnstartedServer(ok)
	other.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	other.StartTLS()
	t.Cleanup(other.Close)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ours.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := newAPIClient(Config{APICAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(ours.URL)
	if err != nil {
		t.Fatalf("the server of the given CA: %v", err)
	}
	resp.Body.Close()
	if resp, err := c.Get(other.URL); err == nil {
		resp.Body.Close()
		t.Fatal("a server of another CA was trusted")
	}
	if _, err := newAPIClient(Config{APICAFile: filepath.Join(t.TempDir(), "missing.crt")}); err == nil {
		t.Fatal("a missing --api-ca file was accepted")
	}
}
