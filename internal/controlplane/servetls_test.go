package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/pki"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// start runs a control plane on cfg (Temporal is not needed to serve) and
// stops it when the test ends or stop is called.
func start(t *testing.T, cfg Config) (cp *ControlPlane, stop func()) {
	t.Helper()
	cp, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cp.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}
	t.Cleanup(stop)
	return cp, stop
}

func testConfig(t *testing.T) Config {
	return Config{DatabaseURL: pgtest.NewDatabase(t), Listen: "127.0.0.1:0", StateDir: t.TempDir(),
		TemporalAddress: "127.0.0.1:1", TemporalNamespace: "default", Logger: slog.New(slog.DiscardHandler),
		ImageStore: t.TempDir()}
}

func TestTheAPIServesOnlyHTTPSWithTheClusterCA(t *testing.T) {
	cfg := testConfig(t)
	cfg.AdvertiseURL = "https://cp.example.test:8443"
	cfg.APITLS.SANs = []string{"api.example.test", "192.0.2.7"}
	cp, stop := start(t, cfg)
	if !strings.HasPrefix(cp.URL(), "https://") {
		t.Fatalf("URL %s, want https", cp.URL())
	}

	// Plain HTTP gets no API answer.
	resp, err := http.Get("http://" + cp.Addr() + "/api/v1/namespaces")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "NamespaceList") {
			t.Fatalf("plain HTTP answered the API: %d %s", resp.StatusCode, b)
		}
	}

	// HTTPS trusting the CA file answers.
	caFile := CAFile(cfg.StateDir)
	tlsConfig, err := pki.ClientTLS(caFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: auth.Bearer{Token: cp.AdminToken(), Next: &http.Transport{TLSClientConfig: tlsConfig}}}
	resp, err = client.Get(cp.URL() + "/api/v1/namespaces")
	if err != nil {
		t.Fatalf("HTTPS with the cluster CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTPS GET namespaces: %d", resp.StatusCode)
	}

	// TLS 1.1 is refused.
	if c, err := tls.Dial("tcp", cp.Addr(), &tls.Config{RootCAs: cp.CA().Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}

	// The server certificate names the listen, advertise and extra hosts.
	conn, err := tls.Dial("tcp", cp.Addr(), &tls.Config{RootCAs: cp.CA().Pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	for _, h := range []string{"127.0.0.1", "localhost", "cp.example.test", "api.example.test", "192.0.2.7"} {
		if err := leaf.VerifyHostname(h); err != nil {
			t.Errorf("server certificate does not name %s: %v", h, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: cp.CA().Pool()}); err != nil {
		t.Errorf("server certificate does not chain to the cluster CA: %v", err)
	}

	// A restart keeps the CA and the certificate that still fits.
	fingerprint := cp.CA().Fingerprint()
	serverCert, _ := os.ReadFile(cfg.StateDir + "/tls/server.crt")
	stop()
	cfg.Listen = cp.Addr()
	again, stopAgain := start(t, cfg)
	if again.CA().Fingerprint() != fingerprint {
		t.Fatalf("CA fingerprint changed across a restart: %s -> %s", fingerprint, again.CA().Fingerprint())
	}
	if b, _ := os.ReadFile(cfg.StateDir + "/tls/server.crt"); string(b) != string(serverCert) {
		t.Error("the server certificate was reissued though it still fits")
	}
	resp, err = client.Get(again.URL() + "/api/v1/namespaces")
	if err != nil {
		t.Fatalf("the restarted API is not trusted by the CA file of the first start: %v", err)
	}
	resp.Body.Close()

	// A name the certificate lacks has it issued again, by the same CA.
	stopAgain()
	cfg.APITLS.SANs = append(cfg.APITLS.SANs, "new.example.test")
	third, _ := start(t, cfg)
	if third.CA().Fingerprint() != fingerprint {
		t.Fatalf("CA fingerprint changed with a new SAN: %s -> %s", fingerprint, third.CA().Fingerprint())
	}
	conn, err = tls.Dial("tcp", third.Addr(), &tls.Config{RootCAs: third.CA().Pool(), ServerName: "new.example.test"})
	if err != nil {
		t.Fatalf("the certificate does not name the new SAN: %v", err)
	}
	conn.Close()
}

func TestAnOperatorIssuedCertificateIsServed(t *testing.T) {
	cfg := testConfig(t)
	operator, err := pki.LoadOrCreateCA(t.TempDir(), "operator CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := operator.ServerCert([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg.APITLS.CertFile, cfg.APITLS.KeyFile = dir+"/api.crt", dir+"/api.key"
	if err := pki.WriteFile(cfg.APITLS.CertFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteFile(cfg.APITLS.KeyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cp, _ := start(t, cfg)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: operator.Pool()}}}
	resp, err := client.Get(cp.URL() + "/healthz")
	if err != nil {
		t.Fatalf("a client trusting the operator's CA: %v", err)
	}
	resp.Body.Close()
	if _, err := os.Stat(cfg.StateDir + "/tls/server.crt"); err == nil {
		t.Error("a server certificate was issued though the operator gave one")
	}

	cfg.APITLS.KeyFile = ""
	if cp, err := Start(context.Background(), cfg); err == nil {
		_ = cp.Stop(context.Background())
		t.Fatal("--tls-cert without --tls-key was accepted")
	}
}

// withClientCA gives cfg another client CA (--client-ca), returned.
func withClientCA(t *testing.T, cfg *Config) *pki.CA {
	t.Helper()
	other, err := pki.LoadOrCreateCA(t.TempDir(), "operator CA")
	if err != nil {
		t.Fatal(err)
	}
	otherFile := t.TempDir() + "/ca.crt"
	if err := pki.WriteFile(otherFile, other.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.APITLS.ClientCAFiles = []string{otherFile}
	return other
}

func TestClientCertificatesAreVerifiedWhenGiven(t *testing.T) {
	cfg := testConfig(t)
	other := withClientCA(t, &cfg)
	cp, _ := start(t, cfg)
	stranger, err := pki.LoadOrCreateCA(t.TempDir(), "stranger CA")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		ca     *pki.CA // issues the client certificate; nil: none
		accept bool
	}{
		{"no client certificate", nil, true},
		{"one of the cluster CA", cp.CA(), true},
		{"one of a --client-ca", other, true},
		{"one of an unknown CA", stranger, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: cp.CA().Pool()}
			if c.ca != nil {
				certPEM, keyPEM, err := c.ca.ClientCert("someone", nil)
				if err != nil {
					t.Fatal(err)
				}
				pair, err := tls.X509KeyPair(certPEM, keyPEM)
				if err != nil {
					t.Fatal(err)
				}
				// Sent whatever CAs the server names, as a client
				// that tries its luck would.
				cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
			}
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			resp, err := client.Get(cp.URL() + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			if (err == nil) != c.accept {
				t.Fatalf("request error %v, want accepted %v", err, c.accept)
			}
		})
	}
}

func TestInsecureHTTPServesPlainHTTP(t *testing.T) {
	cfg := testConfig(t)
	cfg.APITLS.InsecureHTTP = true
	cp, _ := start(t, cfg)
	if !strings.HasPrefix(cp.URL(), "http://") || cp.CA() != nil {
		t.Fatalf("URL %s CA %v, want plain http and no CA", cp.URL(), cp.CA())
	}
	resp, err := (&http.Client{Transport: auth.Bearer{Token: cp.AdminToken(), Next: http.DefaultTransport}}).Get(cp.URL() + "/api/v1/namespaces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET namespaces over --insecure-http: %d", resp.StatusCode)
	}
}

func TestServerHostsFollowTheListenAddress(t *testing.T) {
	hostname, _ := os.Hostname()
	for _, c := range []struct {
		listen, advertise string
		sans              []string
		want, not         []string
	}{
		{"127.0.0.1:8080", "", nil, []string{"127.0.0.1", "localhost", "::1"}, nil},
		{"10.0.0.5:8080", "https://cp.example:8080", []string{"api.example"}, []string{"10.0.0.5", "cp.example", "api.example"}, []string{"localhost", "127.0.0.1"}},
		{"0.0.0.0:8080", "", nil, []string{"localhost", "127.0.0.1", hostname}, []string{"0.0.0.0"}},
		{":8080", "", []string{"a.example"}, []string{"a.example", "localhost"}, []string{""}},
	} {
		got := serverHosts(c.listen, c.advertise, c.sans)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("serverHosts(%q, %q, %q) = %q, lacks %q", c.listen, c.advertise, c.sans, got, w)
			}
		}
		for _, n := range c.not {
			if slices.Contains(got, n) {
				t.Errorf("serverHosts(%q, %q, %q) = %q, has %q", c.listen, c.advertise, c.sans, got, n)
			}
		}
	}
}

// A --client-ca's certificate is accepted at the handshake, but names a
// cluster-admin only when its common name is mapped (--client-ca-admin),
// and never a node: another CA's subject alone grants nothing, or whoever
// runs that CA would mint node and admin identities. Drop the
// fromClusterCA branch of authenticate to see its node and admin
// subjects pass.
func TestAnotherClientCAsCertificatesNameOnlyMappedAdmins(t *testing.T) {
	cfg := testConfig(t)
	other := withClientCA(t, &cfg)
	cfg.APITLS.ClientCAAdmins = []string{"alice"}
	cp, _ := start(t, cfg)
	for _, c := range []struct {
		name string
		ca   *pki.CA
		cn   string
		orgs []string
		want int
	}{
		{"a mapped name of the --client-ca", other, "alice", nil, http.StatusOK},
		{"an admin subject of the --client-ca", other, "mallory", []string{pki.ClusterAdminsOrg}, http.StatusUnauthorized},
		{"a node subject of the --client-ca", other, pki.NodeCNPrefix + "n1", []string{pki.NodesOrg}, http.StatusUnauthorized},
		{"an admin of the cluster CA", cp.CA(), "bob", []string{pki.ClusterAdminsOrg}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			certPEM, keyPEM, err := c.ca.ClientCert(c.cn, c.orgs)
			if err != nil {
				t.Fatal(err)
			}
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cp.CA().Pool(),
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}}}
			path := "/api/v1/namespaces"
			if c.orgs != nil && c.orgs[0] == pki.NodesOrg {
				path = "/api/v1/nodes/n1"
			}
			resp, err := client.Get(cp.URL() + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, c.want)
			}
		})
	}
}
