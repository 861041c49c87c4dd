// Package nodeclient is how the control plane reaches a node's own
// endpoint (nodeserver) for logs and exec: with a client certificate
// naming the control plane that it issues itself from the cluster CA, and
// trusting only the named node's serving certificate (chained to the
// cluster CA, for server authentication, with CN node:<name>; it serves
// under pki.NodeServingName, which is not checked here: the subject is).
package nodeclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pki"
)

// Dialer reaches nodes' endpoints.
type Dialer struct {
	cert  tls.Certificate
	roots *x509.CertPool
	// NetDial connects to a node's endpoint; nil dials as any program
	// does. A dev stack whose nodes are in a user namespace of its own
	// reaches them through its fabric (fabric.Dialer).
	NetDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// New issues the control plane's client certificate from ca, kept in
// memory for the life of the Dialer.
func New(ca *pki.CA) (*Dialer, error) {
	certPEM, keyPEM, err := ca.ClientCert(pki.ControlPlaneCN, nil)
	if err != nil {
		return nil, fmt.Errorf("issue the control plane's certificate for nodes' endpoints: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return &Dialer{cert: cert, roots: ca.Pool()}, nil
}

// TLSConfig dials node's endpoint and nothing else.
func (d *Dialer) TLSConfig(node string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{d.cert},
		// The verification is VerifyConnection's: by chain and subject,
		// not by host name.
		InsecureSkipVerify: true,
		VerifyConnection:   func(cs tls.ConnectionState) error { return VerifyNode(cs.PeerCertificates, d.roots, node) },
	}
}

// VerifyNode accepts only node's serving certificate: chained to roots,
// for server authentication, with CN node:<node>.
func VerifyNode(certs []*x509.Certificate, roots *x509.CertPool, node string) error {
	if len(certs) == 0 {
		return errors.New("the node presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("node %s's certificate: %w", node, err)
	}
	if cn := certs[0].Subject.CommonName; cn != pki.NodeCNPrefix+node {
		return fmt.Errorf("the endpoint of node %s presented the certificate of %q", node, cn)
	}
	return nil
}

// Transport is a transport to node's endpoint; connections are not kept
// (a session's connection is its own).
func (d *Dialer) Transport(node string) *http.Transport {
	return &http.Transport{
		TLSClientConfig:       d.TLSConfig(node),
		DialContext:           d.netDial(),
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		DisableKeepAlives:     true,
		ForceAttemptHTTP2:     false,
	}
}

func (d *Dialer) netDial() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.NetDial != nil {
		return d.NetDial
	}
	return (&net.Dialer{Timeout: 10 * time.Second}).DialContext
}

// ErrNoEndpoint is a node that reports no endpoint.
var ErrNoEndpoint = errors.New("the node reports no agent endpoint")

// BaseURL is node n's endpoint: its InternalIP address and the agent
// endpoint's port from its status.
func BaseURL(n *model.Node) (*url.URL, error) {
	ip, port := n.InternalIP(), n.Status.DaemonEndpoints.AgentEndpoint.Port
	if ip == "" || port <= 0 {
		return nil, ErrNoEndpoint
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(ip, strconv.Itoa(int(port)))}, nil
}

// LogsPath is the endpoint's path of a container's log.
func LogsPath(ns, pod, uid, container string) string {
	return "/containerLogs/" + url.PathEscape(ns) + "/" + url.PathEscape(pod) + "/" + url.PathEscape(uid) + "/" + url.PathEscape(container)
}

// PortForwardPath is the endpoint's path of a connection to a pod's port.
func PortForwardPath(ns, pod, uid string) string {
	return "/portforward/" + url.PathEscape(ns) + "/" + url.PathEscape(pod) + "/" + url.PathEscape(uid)
}

// ExecPath is the endpoint's path of an exec session in a container.
func ExecPath(ns, pod, uid, container string) string {
	return "/exec/" + url.PathEscape(ns) + "/" + url.PathEscape(pod) + "/" + url.PathEscape(uid) + "/" + url.PathEscape(container)
}
