package devstack

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/server/common/authorization"

	"github.com/zonewright/zonewright/internal/connbounds"
	"github.com/zonewright/zonewright/internal/pki"
)

// AdminUIConfig configures the Web UI of a production server.
type AdminUIConfig struct {
	// Address is host:port browsers reach the UI at, over HTTPS.
	Address string
	// CA issues the UI's server certificate and the client certificates
	// it accepts: only cluster admins' (AdminOrg, the control plane).
	CA *pki.CA
	// ServerNames are names the UI's certificate carries besides its
	// address and the loopback names.
	ServerNames []string
	// CertDir keeps the UI's server certificate.
	CertDir string
	// TemporalAddress, Namespace and TLS are the UI's own connection to
	// the frontend (an admin's certificate: every user acts with it, so
	// only admins are let in).
	TemporalAddress, Namespace string
	TLS                        ClientTLSFiles
	// Bounds are the UI's connections' timeouts and caps; zero fields:
	// connbounds' defaults.
	Bounds connbounds.Bounds
}

// AdminUI is the Temporal Web UI served over HTTPS to cluster admins'
// client certificates of the CA only.
type AdminUI struct {
	server   *http.Server
	url      string
	stopOnce sync.Once
	stopErr  error
}

// StartAdminUI serves the Temporal Web UI on cfg.Address over HTTPS that
// requires a client certificate of cfg.CA and lets in only a cluster
// admin's. The UI is a handler of that server, not a server of its own:
// no other port, which a local user could reach, acts with the admin
// certificate.
func StartAdminUI(cfg AdminUIConfig) (*AdminUI, error) {
	host, port, err := splitHostPort(cfg.Address)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("UI address %q: want host:port with a fixed port", cfg.Address)
	}
	names := append([]string{dialHost(host)}, cfg.ServerNames...)
	certFile, keyFile := filepath.Join(cfg.CertDir, "ui.crt"), filepath.Join(cfg.CertDir, "ui.key")
	hosts := append(names, loopback, "localhost")
	if err := cfg.CA.EnsureServerCert(certFile, keyFile, hosts); err != nil {
		return nil, fmt.Errorf("UI certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	var origins []string
	for _, h := range append(names, "localhost") {
		origins = append(origins, "https://"+net.JoinHostPort(h, strconv.Itoa(port)))
	}
	tlsFiles := cfg.TLS
	ui, err := uiHandler(UIConfig{TemporalAddress: cfg.TemporalAddress, Namespace: cfg.Namespace, TLS: &tlsFiles,
		PublicOrigins: origins})
	if err != nil {
		return nil, fmt.Errorf("UI: %w", err)
	}
	lis, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("UI: %w", err)
	}
	a := &AdminUI{url: origins[0]}
	a.server = cfg.Bounds.Server(adminsOnly(ui), &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: cfg.CA.Pool()}, nil)
	go func() { _ = a.server.ServeTLS(cfg.Bounds.Listener(lis), "", "") }()
	return a, nil
}

// adminsOnly serves the requests of cluster admins' certificates and
// answers anyone else's 403: the UI acts with an admin's identity.
func adminsOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 ||
			claimsOf(r.TLS.PeerCertificates[0].Subject).System != authorization.RoleAdmin {
			http.Error(w, "the Temporal Web UI is for cluster admins' certificates", http.StatusForbidden)
			return
		}
		connbounds.Authenticated(r)
		next.ServeHTTP(w, r)
	})
}

// URL is the address to open in a browser holding an admin's certificate.
func (a *AdminUI) URL() string { return a.url }

// Stop closes the UI's server. Safe to call more than once.
func (a *AdminUI) Stop() error {
	a.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.stopErr = a.server.Shutdown(ctx)
	})
	return a.stopErr
}
