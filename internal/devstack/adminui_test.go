package devstack_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/pki"
)

// The production UI answers over HTTPS only to cluster admins'
// certificates of the cluster CA: a node's is refused (403), no
// certificate or another CA's cannot connect, and an admin reaches the
// server's namespaces through the UI's own mutual TLS. (Make adminsOnly
// call next for everyone to see the node's request served.)
func TestTheProductionUIIsForClusterAdminsOnly(t *testing.T) {
	srv, ca, _ := startMutualTLS(t)
	dir := t.TempDir()
	opCert, err := devstack.EnsureClientTLS(ca, dir, "operator", "alice", devstack.AdminOrg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ui, err := devstack.StartAdminUI(ctx, devstack.AdminUIConfig{Address: freeAddr(t), CA: ca, ServerNames: []string{"temporal.example"},
		CertDir: filepath.Join(dir, "ui"), TemporalAddress: srv.Address(), Namespace: srv.Namespace(), TLS: opCert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ui.Stop() })
	if !strings.HasPrefix(ui.URL(), "https://127.0.0.1:") {
		t.Errorf("URL() = %s", ui.URL())
	}

	as := func(certPEM, keyPEM []byte) (int, string, error) {
		conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "temporal.example"}
		if certPEM != nil {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			conf.Certificates = []tls.Certificate{cert}
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
		resp, err := hc.Get(ui.URL() + "/api/v1/namespaces")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	adminPEM, adminKey, _ := ca.ClientCert("bob", []string{devstack.AdminOrg})
	if code, body, err := as(adminPEM, adminKey); err != nil || code != 200 || !strings.Contains(body, `"default"`) {
		t.Errorf("an admin: %d %v %.300s", code, err, body)
	}
	nodeCN, nodeOrgs := devstack.NodeSubject("n1")
	nodePEM, nodeKey, _ := ca.ClientCert(nodeCN, nodeOrgs)
	if code, body, err := as(nodePEM, nodeKey); err != nil || code != http.StatusForbidden {
		t.Errorf("a node: %d %v %.300s, want 403", code, err, body)
	}
	if code, _, err := as(nil, nil); err == nil {
		t.Errorf("no certificate: %d, want no connection", code)
	}
	other, err := pki.LoadOrCreateCA(t.TempDir(), "another CA")
	if err != nil {
		t.Fatal(err)
	}
	otherPEM, otherKey, _ := other.ClientCert("mallory", []string{devstack.AdminOrg})
	if code, _, err := as(otherPEM, otherKey); err == nil {
		t.Errorf("another CA's admin: %d, want no connection", code)
	}
}
