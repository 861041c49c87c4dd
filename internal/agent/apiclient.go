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
	rt := &renewableTransport{}
	rt.cur.Store(t)
	return &http.Client{Transport: rt}, nil
}

// presentNodeCredential makes the API client present the node's
// certificates, joining the cluster first (through that client, with the
// join token) when the state directory holds none.
func presentNodeCredential(ctx context.Context, hc *http.Client, cfg Config) (*credential, error) {
	cert, err := NodeCredential(ctx, JoinConfig{APIURL: cfg.APIURL, Node: cfg.Node, StateDir: cfg.StateDir, JoinTokenFile: cfg.JoinTokenFile, Client: hc})
	if err != nil {
		return nil, err
	}
	cred := &credential{api: hc.Transport.(*renewableTransport)}
	var serving *tls.Certificate
	if s, err := ServingCertificate(cfg.StateDir, cert); err == nil {
		serving = &s
	}
	// The join's connection was made without the certificate: the next
	// calls dial again and present it.
	cred.set(cert, serving)
	return cred, nil
}
