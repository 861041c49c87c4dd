package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/zonewright/zonewright/internal/pki"
)

// newAPIClient is the one client of every call the node makes to the
// control plane's API (the service network, image downloads, volume
// transfers): it trusts the CA of Config.APICAFile, or the system's roots.
// It has no overall timeout, since downloads take as long as they take;
// callers bound their requests with their context.
func newAPIClient(cfg Config) (*http.Client, error) {
	tlsConfig, err := pki.ClientTLS(cfg.APICAFile, "", "")
	if err != nil {
		return nil, fmt.Errorf("API CA %s: %w", cfg.APICAFile, err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsConfig
	return &http.Client{Transport: t}, nil
}

// presentNodeCredential makes the API client present the node's
// certificate, joining the cluster first (through that client, with the
// join token) when the state directory holds none.
func presentNodeCredential(ctx context.Context, hc *http.Client, cfg Config) (tls.Certificate, error) {
	cert, err := NodeCredential(ctx, JoinConfig{APIURL: cfg.APIURL, Node: cfg.Node, StateDir: cfg.StateDir, JoinTokenFile: cfg.JoinTokenFile, Client: hc})
	if err != nil {
		return cert, err
	}
	hc.Transport.(*http.Transport).TLSClientConfig.Certificates = []tls.Certificate{cert}
	// The join's connection was made without the certificate: the next
	// calls dial again and present it.
	hc.CloseIdleConnections()
	return cert, nil
}
