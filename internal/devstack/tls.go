package devstack

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"go.temporal.io/server/common/config"

	"github.com/zonewright/zonewright/internal/pki"
)

// systemName is the common name of the certificate the server's own system
// worker presents to the frontend (an admin).
const systemName = "zonewright:temporal-system"

// serverTLSFiles are the files of a server running mutual TLS.
type serverTLSFiles struct {
	ca                          string
	serverCert, serverKey       string
	systemCert, systemKey       string
	internodeCA                 string
	internodeCert, internodeKey string
}

// ensureServerTLS writes into dir the CA, a server certificate for
// names (and the loopback names), the system worker's client certificate, and
// the internal services' certificate from the server's own internode CA
// (dir/internode). Each is reused while it fits. The processes of a split
// server share dir: one at a time issues, so none reads a key beside
// another's certificate.
//
// The internal services (history, matching, worker) trust only the
// internode CA, never the cluster CA: they have no authorizer, so a
// node's certificate must not open them.
func ensureServerTLS(ca *pki.CA, dir string, names []string) (serverTLSFiles, error) {
	f := serverTLSFiles{
		ca:         filepath.Join(dir, "ca.crt"),
		serverCert: filepath.Join(dir, "server.crt"), serverKey: filepath.Join(dir, "server.key"),
		systemCert: filepath.Join(dir, "system.crt"), systemKey: filepath.Join(dir, "system.key"),
		internodeCA:   filepath.Join(dir, "internode", "ca.crt"),
		internodeCert: filepath.Join(dir, "internode", "internode.crt"), internodeKey: filepath.Join(dir, "internode", "internode.key"),
	}
	internodeCA, err := pki.LoadOrCreateCA(filepath.Dir(f.internodeCA), "zonewright Temporal internode CA")
	if err != nil {
		return f, fmt.Errorf("internode CA: %w", err)
	}
	unlock, err := pki.LockDir(dir)
	if err != nil {
		return f, err
	}
	defer unlock()
	if !keptPair(f.internodeCert, f.internodeKey, internodeCA, func(c *x509.Certificate) bool { return c.VerifyHostname(loopback) == nil }) {
		certPEM, keyPEM, err := internodeCA.PeerCert([]string{loopback, "localhost"})
		if err != nil {
			return f, fmt.Errorf("internode certificate: %w", err)
		}
		if err := errors.Join(pki.WriteFile(f.internodeKey, keyPEM, 0o600), pki.WriteFile(f.internodeCert, certPEM, 0o644)); err != nil {
			return f, err
		}
	}
	if err := pki.WriteFile(f.ca, ca.CertPEM, 0o644); err != nil {
		return f, fmt.Errorf("write the CA: %w", err)
	}
	hosts := []string{loopback, "localhost"}
	for _, n := range slices.Backward(names) {
		if !slices.Contains(hosts, n) {
			hosts = append([]string{n}, hosts...)
		}
	}
	if err := ca.EnsureServerCert(f.serverCert, f.serverKey, hosts); err != nil {
		return f, fmt.Errorf("server certificate: %w", err)
	}
	if !keptPair(f.systemCert, f.systemKey, ca, func(c *x509.Certificate) bool {
		return c.Subject.CommonName == systemName && slices.Equal(c.Subject.Organization, []string{AdminOrg})
	}) {
		certPEM, keyPEM, err := ca.ClientCert(systemName, []string{AdminOrg})
		if err != nil {
			return f, fmt.Errorf("system worker certificate: %w", err)
		}
		if err := errors.Join(pki.WriteFile(f.systemKey, keyPEM, 0o600), pki.WriteFile(f.systemCert, certPEM, 0o644)); err != nil {
			return f, err
		}
	}
	return f, nil
}

// keptPair reports whether the certificate and key at certFile and
// keyFile are a pair from ca that fits and is not due for reissue.
func keptPair(certFile, keyFile string, ca *pki.CA, fits func(*x509.Certificate) bool) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return false
	}
	c := pair.Leaf
	return c.CheckSignatureFrom(ca.Cert) == nil && time.Until(c.NotAfter) > pki.ReissueBefore && fits(c)
}

// rootTLS is the server's TLS configuration: the frontend serves TLS and
// requires a client certificate from the CA; the system worker presents
// its own; the services call each other with the internode certificate.
func (f serverTLSFiles) rootTLS() config.RootTLS {
	client := config.ClientTLS{ServerName: loopback, RootCAFiles: []string{f.ca}}
	return config.RootTLS{
		Internode: config.GroupTLS{
			Server: config.ServerTLS{CertFile: f.internodeCert, KeyFile: f.internodeKey,
				ClientCAFiles: []string{f.internodeCA}, RequireClientAuth: true},
			Client: config.ClientTLS{ServerName: loopback, RootCAFiles: []string{f.internodeCA}},
		},
		Frontend: config.GroupTLS{
			Server: config.ServerTLS{CertFile: f.serverCert, KeyFile: f.serverKey,
				ClientCAFiles: []string{f.ca}, RequireClientAuth: true},
			Client: client,
		},
		SystemWorker: config.WorkerTLS{CertFile: f.systemCert, KeyFile: f.systemKey, Client: client},
	}
}

// ClientTLS is a client configuration for this server: it trusts the
// server's CA and presents a new certificate from it for commonName and
// orgs (see NodeSubject, ControlPlaneName, AdminOrg). Nil for a plaintext
// server.
func (t *Temporal) ClientTLS(commonName string, orgs ...string) (*tls.Config, error) {
	if t.ca == nil {
		return nil, nil
	}
	certPEM, keyPEM, err := t.ca.ClientCert(commonName, orgs)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: t.ca.Pool(), Certificates: []tls.Certificate{cert}}, nil
}

// TemporalServerName is the name clients verify the embedded server's
// certificate for.
const TemporalServerName = "localhost"

// EnsureClientTLS keeps a client certificate from ca for commonName and
// orgs in dir/<name>.crt and dir/<name>.key, with the CA beside them as
// dir/ca.crt, and returns the files, for a client of a server started
// with TemporalConfig.CA = ca. A pair already there is kept while it is
// ca's, for that subject and not about to expire, so a process reading
// the files while another starts never finds a key of another pair.
func EnsureClientTLS(ca *pki.CA, dir, name, commonName string, orgs ...string) (ClientTLSFiles, error) {
	f := ClientTLSFiles{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key"),
		CAFile: filepath.Join(dir, "ca.crt"), ServerName: TemporalServerName}
	unlock, err := pki.LockDir(dir)
	if err != nil {
		return f, err
	}
	defer unlock()
	if err := pki.WriteFile(f.CAFile, ca.CertPEM, 0o644); err != nil {
		return f, err
	}
	if keptPair(f.CertFile, f.KeyFile, ca, func(c *x509.Certificate) bool {
		return c.Subject.CommonName == commonName && slices.Equal(c.Subject.Organization, orgs)
	}) {
		return f, nil
	}
	certPEM, keyPEM, err := ca.ClientCert(commonName, orgs)
	if err != nil {
		return f, fmt.Errorf("Temporal client certificate %s: %w", commonName, err)
	}
	if err := errors.Join(pki.WriteFile(f.KeyFile, keyPEM, 0o600), pki.WriteFile(f.CertFile, certPEM, 0o644)); err != nil {
		return f, err
	}
	return f, nil
}
