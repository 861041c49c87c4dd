package devstack_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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
	return startAdminUIOn(t, srv, ca, bounds), ca
}

// startAdminUIOn starts the production UI over srv, whose CA is ca.
func startAdminUIOn(t *testing.T, srv *devstack.Temporal, ca *pki.CA, bounds connbounds.Bounds) *devstack.AdminUI {
	t.Helper()
	dir := t.TempDir()
	opCert, err := devstack.EnsureClientTLS(ca, dir, "operator", "alice", devstack.AdminOrg)
	if err != nil {
		t.Fatal(err)
	}
	ui, err := devstack.StartAdminUI(devstack.AdminUIConfig{Address: freeAddr(t), CA: ca, ServerNames: []string{"temporal.example"},
		CertDir: filepath.Join(dir, "ui"), TemporalAddress: srv.Address(), Namespace: srv.Namespace(), TLS: opCert, Bounds: bounds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ui.Stop() })
	return ui
}

// adminGet is GET url with a cluster admin's certificate of ca.
func adminGet(t *testing.T, ca *pki.CA, url string) (int, string) {
	t.Helper()
	certPEM, keyPEM, _ := ca.ClientCert("bob", []string{devstack.AdminOrg})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{RootCAs: ca.Pool(), ServerName: "temporal.example", Certificates: []tls.Certificate{cert}}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("an admin: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The production UI listens on nothing but its HTTPS front: a local user
// who connects to any other port the process opened with StartAdminUI
// gets nothing of Temporal, while an admin's certificate through the front
// lists the namespaces. (Serve the UI with StartUI on a free loopback port
// and proxy the front to it, as StartAdminUI did, to see that port listed
// and answer the namespaces in plain HTTP.)
func TestTheProductionUIListensOnlyOnItsFront(t *testing.T) {
	srv, ca, _ := startMutualTLS(t)
	before := listeningPorts(t)
	ui := startAdminUIOn(t, srv, ca, connbounds.Bounds{})
	front, err := strconv.Atoi(ui.URL()[strings.LastIndex(ui.URL(), ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	for port := range listeningPorts(t) {
		if before[port] || port == front {
			continue
		}
		t.Errorf("listens on port %d besides its front %d", port, front)
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/namespaces", port))
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Errorf("port %d, with no certificate: %s %.300s", port, resp.Status, b)
	}
	if code, body := adminGet(t, ca, ui.URL()+"/api/v1/namespaces"); code != http.StatusOK || !strings.Contains(body, `"default"`) {
		t.Errorf("an admin through the front: %d %.300s", code, body)
	}
}

// listeningPorts are the TCP ports this process listens on: its sockets
// (/proc/self/fd) in the LISTEN state of /proc/net/tcp and tcp6.
func listeningPorts(t *testing.T) map[int]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	ours := map[string]bool{}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(link, "socket:[") {
			ours[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	ports := map[int]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !ours[f[9]] {
				continue
			}
			port, err := strconv.ParseInt(f[1][strings.LastIndex(f[1], ":")+1:], 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			ports[int(port)] = true
		}
	}
	return ports
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
