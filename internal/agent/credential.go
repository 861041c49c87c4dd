package agent

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonewright/zonewright/internal/pki"
)

// credential is the node's certificates as the agent presents them: the
// Temporal client and the endpoint take them at each handshake, and the
// API client's transport is replaced at each renewal, so a renewed
// certificate reaches new connections without a restart.
type credential struct {
	mu      sync.RWMutex
	client  tls.Certificate
	serving *tls.Certificate // nil: none
	api     *renewableTransport
}

func (c *credential) set(client tls.Certificate, serving *tls.Certificate) {
	c.mu.Lock()
	c.client, c.serving = client, serving
	c.mu.Unlock()
	if c.api != nil {
		c.api.present(client)
	}
}

func (c *credential) current() tls.Certificate {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.client
}

// clientCertificate is tls.Config.GetClientCertificate.
func (c *credential) clientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	cert := c.current()
	return &cert, nil
}

// servingCertificate is tls.Config.GetCertificate.
func (c *credential) servingCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.serving == nil {
		return nil, errors.New("the node has no serving certificate")
	}
	return c.serving, nil
}

// renewableTransport sends each request over the transport of the
// node's current certificate: a renewal starts a new one, so new
// requests present the new certificate (an HTTP/2 connection carries
// many requests, and would carry on with the old one) while streams
// already open finish on the old.
type renewableTransport struct {
	cur atomic.Pointer[http.Transport]
}

func (t *renewableTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.cur.Load().RoundTrip(r)
}

func (t *renewableTransport) CloseIdleConnections() { t.cur.Load().CloseIdleConnections() }

// present makes new requests present cert.
func (t *renewableTransport) present(cert tls.Certificate) {
	old := t.cur.Load()
	next := old.Clone()
	next.TLSClientConfig.Certificates = []tls.Certificate{cert}
	t.cur.Store(next)
	old.CloseIdleConnections()
}

// renewCredential renews the node's certificates over the current ones
// once they are due (pki.RenewAt, or Config.CertRenewBefore before they
// expire), checking every Config.CertCheckInterval, until ctx ends. A
// failed renewal is tried again at the next check; the current
// certificates serve meanwhile.
func (a *Agent) renewCredential(ctx context.Context, cred *credential) {
	t := time.NewTicker(a.cfg.CertCheckInterval)
	defer t.Stop()
	for {
		if due, until := a.renewalDue(cred.current()); due {
			if err := a.renew(ctx, cred); err != nil && ctx.Err() == nil {
				a.log.Warn("renew the node's certificate", "err", err, "expires-in", until.Round(time.Minute))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Agent) renewalDue(cert tls.Certificate) (bool, time.Duration) {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return false, 0
	}
	until := time.Until(leaf.NotAfter)
	if a.cfg.CertRenewBefore > 0 {
		return until < a.cfg.CertRenewBefore, until
	}
	return !time.Now().Before(pki.RenewAt(leaf)), until
}

// renew asks the control plane to sign the node's key again and keeps
// what it answers: the key stays, so each file written alone pairs with
// it whatever happens between the writes.
func (a *Agent) renew(ctx context.Context, cred *credential) error {
	cur := cred.current()
	key, ok := cur.PrivateKey.(crypto.Signer)
	if !ok {
		return errors.New("the node's key cannot sign")
	}
	csr, err := pki.CSRFor(key, pki.NodeCNPrefix+a.cfg.Node)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ans, err := requestCertificate(ctx, a.api.HTTP(), a.cfg.APIURL, a.cfg.Node, "certificate", "", csr)
	if err != nil {
		return err
	}
	client, err := pairWithKey([]byte(ans.Certificate), cur)
	if err != nil {
		return fmt.Errorf("the renewed certificate: %w", err)
	}
	var serving *tls.Certificate
	if ans.ServingCertificate != "" {
		s, err := servingFrom([]byte(ans.ServingCertificate), client)
		if err != nil {
			return fmt.Errorf("the renewed serving certificate: %w", err)
		}
		serving = &s
		if err := pki.WriteFile(filepath.Join(a.cfg.StateDir, NodeServingCertFile), []byte(ans.ServingCertificate), 0o644); err != nil {
			return err
		}
	}
	if err := pki.WriteFile(filepath.Join(a.cfg.StateDir, NodeCertFile), []byte(ans.Certificate), 0o644); err != nil {
		return err
	}
	cred.set(client, serving)
	a.log.Info("renewed the node's certificate", "expires", client.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// pairWithKey is the certificate of certPEM with nodeCert's key, which
// it must be for.
func pairWithKey(certPEM []byte, nodeCert tls.Certificate) (tls.Certificate, error) {
	leaf, err := pki.ParseCert(certPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	if !sameKey(leaf, nodeCert) {
		return tls.Certificate{}, errors.New("it is not for the node's key")
	}
	return tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: nodeCert.PrivateKey, Leaf: leaf}, nil
}
