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

	"github.com/zonewright/zonewright/internal/connbounds"
	"github.com/zonewright/zonewright/internal/connbounds/connboundstest"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/pki"
)

// startAdminUI starts the production UI, its connections held to bounds,
// over a Temporal server of its own.
func startAdminUI(t *testing.T, bounds connbounds.Bounds) (*devstack.AdminUI, *pki.CA) {
	t.Helper()
	srv, ca, _ := startMutualTLS(t)
	dir := t.TempDir()
	opCert, err := devstack.EnsureClientTLS(ca, dir, "operator", "alice", devstack.AdminOrg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ui, err := devstack.StartAdminUI(ctx, devstack.AdminUIConfig{Address: freeAddr(t), CA: ca, ServerNames: []string{"temporal.example"},
		CertDir: filepath.Join(dir, "ui"), TemporalAddress: srv.Address(), Namespace: srv.Namespace(), TLS: opCert, Bounds: bounds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ui.Stop() })
	return ui, ca
}

// The production UI answers over HTTPS only to cluster admins'
// certificates of the cluster CA: a node's is refused (403), no
// certificate or another CA's cannot connect, and an admin reaches the
// server's namespaces through the UI's own mutual TLS. (Make adminsOnly
// call next for everyone to see the node's request served.)
func TestTheProductionUIIsForClusterAdminsOnly(t *testing.T) {
	ui, ca := startAdminUI(t, connbounds.Bounds{})
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

// An admin's connection to the UI whose request body stalls is closed
// after the body timeout, and clients that connect and never finish their
// handshake neither keep an admin out nor hold more than MaxConnections
// of the UI's descriptors. (Give the UI an http.Server with only
// ReadHeaderTimeout, on its bare listener, as it had, to see the stalled
// body held and every stalled client hold a descriptor.)
func TestTheProductionUIBoundsItsConnections(t *testing.T) {
	const limit, stalled = 8, 64
	ui, ca := startAdminUI(t, connbounds.Bounds{Header: 5 * time.Second, Body: time.Second, MaxConnections: limit})
	addr := strings.TrimPrefix(ui.URL(), "https://")
	adminPEM, adminKey, _ := ca.ClientCert("bob", []string{devstack.AdminOrg})
	cert, err := tls.X509KeyPair(adminPEM, adminKey)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "temporal.example", Certificates: []tls.Certificate{cert}}
	admin := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: conf}}
	get := func() int {
		t.Helper()
		resp, err := admin.Get(ui.URL() + "/api/v1/namespaces")
		if err != nil {
			t.Fatalf("an admin: %v", err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}

	body, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if _, err := io.WriteString(body, "POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nab"); err != nil {
		t.Fatal(err)
	}
	_ = body.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, body); err != nil {
		t.Errorf("an admin's request whose body stalled: still open after 30 s: %v", err)
	}

	if code := get(); code != http.StatusOK {
		t.Fatalf("an admin: %d", code)
	}
	admin.CloseIdleConnections()
	connboundstest.StalledClientsAreCapped(t, addr, limit, stalled, func() {
		if code := get(); code != http.StatusOK {
			t.Fatalf("an admin behind %d stalled connections: %d", stalled, code)
		}
	})
}
