package agent

import (
	"bytes"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/pki"
)

// Files of a node's credential in its state directory.
const (
	NodeKeyFile  = "node.key" // mode 0600, made here and never sent
	NodeCertFile = "node.crt" // CN=node:<name>, O=zonewright:nodes, from the cluster CA
	NodeCAFile   = "ca.crt"   // the cluster CA, as the join answered it
	// NodeServingCertFile is what the node's endpoint serves with: the
	// same key, server authentication under pki.NodeServingName.
	NodeServingCertFile = "node-serving.crt"
)

// JoinConfig says where a node keeps its credential and how it gets one.
type JoinConfig struct {
	APIURL string
	Node   string
	// StateDir keeps node.key, node.crt and ca.crt.
	StateDir string
	// JoinTokenFile holds a join token (zonewright node join-token
	// create); read only when the state directory holds no certificate
	// for this node yet.
	JoinTokenFile string
	// Client makes the join request.
	Client *http.Client
}

// NodeCredential returns the node's client certificate, joining the
// cluster first when the state directory holds none (or one for another
// node, or an expired one): a key made here, a CSR sent with the join
// token, the certificate the control plane signs kept beside the key.
// A restarted agent reuses what it kept and needs no join token.
func NodeCredential(ctx context.Context, c JoinConfig) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(c.StateDir, NodeCertFile), filepath.Join(c.StateDir, NodeKeyFile)
	var kept *tls.Certificate
	if cert, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && fits(cert, c.Node) {
		// A node that joined before node certificates stopped serving
		// and has no serving certificate tries to join again when a join
		// token allows it (the control plane refuses the name of a node
		// that exists, so only once its Node is deleted); otherwise it
		// still reaches the control plane, but its endpoint cannot serve.
		if _, err := ServingCertificate(c.StateDir, cert); err == nil || c.JoinTokenFile == "" {
			return cert, nil
		}
		kept = &cert
	}
	if c.JoinTokenFile == "" {
		return tls.Certificate{}, fmt.Errorf("no certificate for node %s in %s: pass --join-token-file (zonewright node join-token create)", c.Node, c.StateDir)
	}
	b, err := os.ReadFile(c.JoinTokenFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("read the join token: %w", err)
	}
	keyPEM, csr, err := pki.NewCSR(pki.NodeCNPrefix + c.Node)
	if err != nil {
		return tls.Certificate{}, err
	}
	ans, err := requestCertificate(ctx, c.Client, c.APIURL, c.Node, "join", strings.TrimSpace(string(b)), csr)
	if err != nil && kept != nil {
		return *kept, nil
	}
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("join the cluster as node %s: %w", c.Node, err)
	}
	if err := pki.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := pki.WriteFile(NodeCAPath(c.StateDir), []byte(ans.CACertificate), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	servingPath := filepath.Join(c.StateDir, NodeServingCertFile)
	if ans.ServingCertificate != "" {
		if err := pki.WriteFile(servingPath, []byte(ans.ServingCertificate), 0o644); err != nil {
			return tls.Certificate{}, err
		}
	} else if err := os.Remove(servingPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return tls.Certificate{}, err // one for the replaced key must not stay
	}
	if err := pki.WriteFile(certPath, []byte(ans.Certificate), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair([]byte(ans.Certificate), keyPEM)
}

// ServingCertificate is what the node's endpoint serves with: the
// serving certificate kept in stateDir for nodeCert's key, else nodeCert
// itself when it authenticates a server (issued before node certificates
// stopped doing so).
func ServingCertificate(stateDir string, nodeCert tls.Certificate) (tls.Certificate, error) {
	if b, err := os.ReadFile(filepath.Join(stateDir, NodeServingCertFile)); err == nil {
		if c, err := servingFrom(b, nodeCert); err == nil {
			return c, nil
		}
	}
	if leaf, err := x509.ParseCertificate(nodeCert.Certificate[0]); err == nil && slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return nodeCert, nil
	}
	return tls.Certificate{}, fmt.Errorf("%s holds no serving certificate for the node's key", stateDir)
}

// servingFrom is the serving certificate of certPEM with nodeCert's key,
// which it must be for.
func servingFrom(certPEM []byte, nodeCert tls.Certificate) (tls.Certificate, error) {
	c, err := pairWithKey(certPEM, nodeCert)
	if err != nil {
		return c, err
	}
	if !slices.Contains(c.Leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return tls.Certificate{}, errors.New("it does not authenticate a server")
	}
	return c, nil
}

// sameKey: the certificate is for nodeCert's key.
func sameKey(leaf *x509.Certificate, nodeCert tls.Certificate) bool {
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	signer, sok := nodeCert.PrivateKey.(crypto.Signer)
	return ok && sok && pub.Equal(signer.Public())
}

// NodeCAPath is the cluster CA a node received when it joined.
func NodeCAPath(stateDir string) string { return filepath.Join(stateDir, NodeCAFile) }

// fits: a certificate for this node that is still valid for a while.
func fits(cert tls.Certificate, node string) bool {
	if len(cert.Certificate) == 0 {
		return false
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	return err == nil && leaf.Subject.CommonName == pki.NodeCNPrefix+node && time.Now().Add(time.Hour).Before(leaf.NotAfter)
}

// joinAnswer is the join's answer (api.JoinResponse).
type joinAnswer struct {
	Certificate        string `json:"certificate"`
	ServingCertificate string `json:"servingCertificate"`
	CACertificate      string `json:"caCertificate"`
}

// requestCertificate is POST /api/v1/nodes/{name}/<sub> with csr: a join
// (sub "join", with the join token as bearer) or a renewal ("certificate",
// over the node's current certificate, which client presents).
func requestCertificate(ctx context.Context, client *http.Client, apiURL, node, sub, bearer string, csr []byte) (joinAnswer, error) {
	body, _ := json.Marshal(map[string][]byte{"csr": csr})
	u := strings.TrimRight(apiURL, "/") + "/api/v1/nodes/" + url.PathEscape(node) + "/" + sub
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return joinAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return joinAnswer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var st struct{ Message string }
		_ = json.Unmarshal(b, &st)
		return joinAnswer{}, fmt.Errorf("%s: %s", resp.Status, st.Message)
	}
	var out joinAnswer
	if err := json.Unmarshal(b, &out); err != nil || out.Certificate == "" {
		return joinAnswer{}, errors.New("the answer holds no certificate")
	}
	return out, nil
}
