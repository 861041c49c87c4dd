package controlplane

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/zonewright/zonewright/internal/pki"
)

// CACommonName names the cluster CA: the one authority the API's server
// certificate, node and operator client certificates chain to.
const CACommonName = "zonewright CA"

// APITLS is how the API serves HTTPS.
type APITLS struct {
	// CertFile and KeyFile are an operator-issued server certificate;
	// empty: one issued by the cluster CA, kept in StateDir/tls.
	CertFile, KeyFile string
	// ClientCAFiles are CAs, besides the cluster CA, whose client
	// certificates the API accepts; ClientCAAdmins the common names of
	// theirs that are cluster-admins. Their certificates are nothing else:
	// their subject alone grants no node's or admin's identity.
	ClientCAFiles, ClientCAAdmins []string
	// SANs are names and addresses the issued server certificate names
	// besides the listen and advertise hosts.
	SANs []string
	// InsecureHTTP serves plain HTTP: anyone on the path reads and alters
	// every request.
	InsecureHTTP bool
}

// TLS paths inside the state directory.
const (
	tlsDir         = "tls"
	serverCertFile = "server.crt"
	serverKeyFile  = "server.key"
	caCertFile     = "ca.crt"
)

// CAFile is where the cluster CA's certificate is kept in stateDir: the
// file clients trust.
func CAFile(stateDir string) string { return filepath.Join(stateDir, tlsDir, caCertFile) }

// serverTLS loads or creates the cluster CA in stateDir and the API's
// server configuration: TLS 1.2 or newer, client certificates requested
// and verified when given (against the cluster CA and ClientCAFiles), but
// not required.
func serverTLS(stateDir string, t APITLS, hosts []string) (*tls.Config, *pki.CA, error) {
	if stateDir == "" {
		return nil, nil, errors.New("no state directory for the cluster CA (--state-dir)")
	}
	dir := filepath.Join(stateDir, tlsDir)
	ca, err := pki.LoadOrCreateCA(dir, CACommonName)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster CA in %s: %w", dir, err)
	}
	certFile, keyFile := t.CertFile, t.KeyFile
	if (certFile == "") != (keyFile == "") {
		return nil, nil, errors.New("--tls-cert and --tls-key go together")
	}
	if certFile == "" {
		certFile, keyFile = filepath.Join(dir, serverCertFile), filepath.Join(dir, serverKeyFile)
		if err := ca.EnsureServerCert(certFile, keyFile, hosts); err != nil {
			return nil, nil, fmt.Errorf("API server certificate: %w", err)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("API server certificate %s: %w", certFile, err)
	}
	clients := ca.Pool()
	for _, f := range t.ClientCAFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("--client-ca: %w", err)
		}
		if !clients.AppendCertsFromPEM(b) {
			return nil, nil, fmt.Errorf("--client-ca: no certificates in %s", f)
		}
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    clients,
	}, ca, nil
}

// serverHosts are the names the API's issued certificate must carry: the
// listen host, the advertise URL's host and the extra SANs; listening on
// loopback or on every address adds localhost and the loopback addresses
// (and, on every address, this host's name).
func serverHosts(listen, advertise string, sans []string) []string {
	var hosts []string
	add := func(h string) {
		if h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	ip := net.ParseIP(host)
	all := host == "" || (ip != nil && ip.IsUnspecified())
	if !all {
		add(host)
	}
	if advertise != "" {
		if u, err := url.Parse(advertise); err == nil {
			add(u.Hostname())
		}
	}
	for _, s := range sans {
		add(s)
	}
	if all || host == "localhost" || (ip != nil && ip.IsLoopback()) {
		add("localhost")
		add("127.0.0.1")
		add("::1")
	}
	if all {
		if name, err := os.Hostname(); err == nil {
			add(name)
		}
	}
	return hosts
}
