package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/pki"
)

// Every agent joined with the join token and keeps a certificate naming
// its own node, from the cluster CA; with it, the API lets a node read its
// own Node and the pods bound to it, and refuses another node's Node and
// pods bound elsewhere: requests over mutual TLS to the control plane with
// the agents' own key and certificate files.
func TestAgentsNodeIdentityReachesOnlyItsOwn(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	ca := c.cp.CA()
	clients := map[string]*http.Client{}
	for _, n := range c.nodes.Nodes {
		certPEM, err := os.ReadFile(filepath.Join(n.StateDir, agent.NodeCertFile))
		if err != nil {
			t.Fatalf("node %s kept no certificate: %v", n.Name, err)
		}
		cert, err := pki.ParseCert(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		if cert.Subject.CommonName != "node:"+n.Name || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != pki.NodesOrg || cert.CheckSignatureFrom(ca.Cert) != nil {
			t.Fatalf("node %s certificate: %v, signed by the cluster CA: %v", n.Name, cert.Subject, cert.CheckSignatureFrom(ca.Cert))
		}
		if fi, err := os.Stat(filepath.Join(n.StateDir, agent.NodeKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("node %s key: %v %v", n.Name, fi, err)
		}
		pair, err := tls.LoadX509KeyPair(filepath.Join(n.StateDir, agent.NodeCertFile), filepath.Join(n.StateDir, agent.NodeKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		clients[n.Name] = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{pair}, RootCAs: ca.Pool()}}}
	}

	pod := `{"metadata":{"name":"on-node-2"},"spec":{"nodeName":"node-2","containers":[{"name":"c","image":"base","command":["sleep","600"]}]}}`
	if code, b := c.do("POST", "/api/v1/namespaces/default/pods", pod); code != 201 {
		t.Fatalf("create a pod bound to node-2: %d %s", code, b)
	}
	for _, tc := range []struct {
		node, path string
		want       int
	}{
		{"node-1", "/api/v1/nodes/node-1", 200},
		{"node-1", "/api/v1/nodes/node-2", 403},
		{"node-1", "/api/v1/nodes", 200}, // the pod CIDRs and addresses it routes to
		{"node-1", "/api/v1/nodes?watch=true", 403},
		{"node-1", "/api/v1/namespaces/default/pods/on-node-2", 403},
		{"node-1", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-2", 403},
		{"node-1", "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", 200},
		{"node-2", "/api/v1/namespaces/default/pods/on-node-2", 200},
		{"node-2", "/api/v1/servicenet", 200},
	} {
		resp, err := clients[tc.node].Get(c.api + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s GET %s: %d %s, want %d", tc.node, tc.path, resp.StatusCode, b, tc.want)
		}
	}
	// A certificate from another CA is no identity.
	other, err := pki.LoadOrCreateCA(t.TempDir(), "another CA")
	if err != nil {
		t.Fatal(err)
	}
	strayPEM, strayKey, err := other.ClientCert("node:node-1", []string{pki.NodesOrg})
	if err != nil {
		t.Fatal(err)
	}
	stray, err := tls.X509KeyPair(strayPEM, strayKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	strayClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{stray}, RootCAs: pool}}}
	if resp, err := strayClient.Get(c.api + "/api/v1/nodes/node-1"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 401 && resp.StatusCode != 403 {
			t.Errorf("a certificate from another CA: %d", resp.StatusCode)
		}
	}
}

// Deleting a Node revokes its certificate with the API and with Temporal
// alike, through the whole path: the delete records the revocation in
// PostgreSQL, and the Temporal authorizer, asking the same database at
// most once a second a certificate, denies the node's calls within a
// second. (Start the cluster's Temporal without NodeCertRevoked to see the
// deleted node keep calling Temporal.)
func TestADeletedNodesCertificateIsRefusedByTemporal(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2)
	n := c.nodes.Nodes[0]
	pair, err := tls.LoadX509KeyPair(filepath.Join(n.StateDir, agent.NodeCertFile), filepath.Join(n.StateDir, agent.NodeKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	asNode, err := tclient.NewLazyClient(tclient.Options{HostPort: c.cpConfig.TemporalAddress, Namespace: "default",
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: tclient.ConnectionOptions{TLS: &tls.Config{Certificates: []tls.Certificate{pair},
			RootCAs: c.cp.CA().Pool(), ServerName: devstack.TemporalServerName}}})
	if err != nil {
		t.Fatal(err)
	}
	defer asNode.Close()
	describe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := asNode.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
		return err
	}
	if err := describe(); err != nil {
		t.Fatalf("node %s describes its namespace before its Node is deleted: %v", n.Name, err)
	}
	// An operator retiring a host stops its agent, then deletes the Node.
	c.nodes.Kill(0)
	if code, body := c.do("DELETE", "/api/v1/nodes/"+n.Name+"?force=true", nil); code != http.StatusOK {
		t.Fatalf("delete node %s: %d %s", n.Name, code, body)
	}
	var denied *serviceerror.PermissionDenied
	deleted := time.Now()
	for err := describe(); !errors.As(err, &denied); err = describe() {
		if time.Since(deleted) > 3*time.Second {
			t.Fatalf("node %s's certificate %s after its Node was deleted: %v; want PermissionDenied within a second", n.Name, time.Since(deleted).Round(time.Millisecond), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	api := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{pair}, RootCAs: c.cp.CA().Pool()}}}
	resp, err := api.Get(c.api + "/api/v1/nodes/" + n.Name)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("node %s's certificate with the API after its Node was deleted: %d; want 401", n.Name, resp.StatusCode)
	}
}
