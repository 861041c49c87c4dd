// Package pki is zonewright's small certificate authority: it creates and
// reuses a CA in a state directory, and issues the server certificates the
// API and Temporal serve with and the client certificates nodes and
// operators present. Keys are ECDSA P-256 and never leave the directory
// they were made in (mode 0600).
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Validity of what this package issues.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
	// NodeCertValidity is a node's certificates': short, so a stolen or
	// forgotten one ends by itself; the agent renews them over the
	// current one (RenewAt).
	NodeCertValidity = 7 * 24 * time.Hour
	ReissueBefore    = 30 * 24 * time.Hour // a certificate this close to expiry is issued again
	backdate         = 5 * time.Minute     // tolerates clocks slightly behind ours
	caFile, caKey    = "ca.crt", "ca.key"
	pemCert, pemEC   = "CERTIFICATE", "EC PRIVATE KEY"
)

// Certificate subjects the cluster CA issues: the control plane's
// authorizer and the nodes both read them.
const (
	NodeCNPrefix     = "node:"
	NodesOrg         = "zonewright:nodes"
	ClusterAdminsOrg = "zonewright:cluster-admins"
	ControlPlaneCN   = "zonewright:control-plane"
)

// CA is a certificate authority this package can issue from.
type CA struct {
	Cert    *x509.Certificate
	CertPEM []byte
	key     crypto.Signer
}

// LoadOrCreateCA loads the CA kept in dir (ca.crt, ca.key), creating it
// with the given common name on first use. The same directory always
// yields the same CA, so clients that trust it keep trusting restarts;
// processes starting together on one directory (a Temporal server and
// serve sharing a volume) make one CA between them.
func LoadOrCreateCA(dir, commonName string) (*CA, error) {
	if ca, err := loadCA(dir); !errors.Is(err, os.ErrNotExist) {
		return ca, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(dir, ".ca.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if ca, err := loadCA(dir); !errors.Is(err, os.ErrNotExist) {
		return ca, err // made while this waited for the lock
	}
	return createCA(dir, commonName)
}

// LockDir holds dir's certificate lock until unlock: processes that
// share a directory of certificates (a split Temporal server's) issue one
// at a time, so none writes a key beside another's certificate.
func LockDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return lockFile(filepath.Join(dir, ".certs.lock"))
}

// lockFile takes an exclusive flock on path, made if missing.
func lockFile(path string) (unlock func(), err error) {
	lock, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { lock.Close() }, nil // closing releases the lock
}

// loadCA reads the CA in dir; os.ErrNotExist when there is none.
func loadCA(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, caFile), filepath.Join(dir, caKey)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("CA certificate %s has no key: %v", certPath, err)
	}
	return ParseCA(certPEM, keyPEM)
}

func createCA(dir, commonName string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, caFile), filepath.Join(dir, caKey)
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"zonewright"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: pemCert, Bytes: der})
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	// The key first: a certificate without its key is refused on the next
	// start, a key without its certificate is simply made again.
	if err := WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := WriteFile(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return ParseCA(certPEM, keyPEM)
}

// ParseCA reads a CA from PEM.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := ParseCert(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, errors.New("the CA certificate is not a CA")
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	if !publicKeysEqual(cert.PublicKey, key.Public()) {
		return nil, errors.New("the CA key does not match its certificate")
	}
	return &CA{Cert: cert, CertPEM: certPEM, key: key}, nil
}

// Fingerprint is the SHA-256 of the CA certificate, hex, as operators
// compare it.
func (ca *CA) Fingerprint() string { return Fingerprint(ca.Cert) }

// Pool is a pool trusting only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// ServerCert issues a server certificate for hosts (DNS names or IP
// addresses) with a new key.
func (ca *CA) ServerCert(hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := ca.template(hosts[0], nil, x509.ExtKeyUsageServerAuth)
	addHosts(tmpl, hosts)
	return ca.sign(tmpl, key)
}

// PeerCert issues a certificate for hosts with a new key that serves and
// also dials with (server and client authentication): for services that
// call each other with one certificate, as Temporal's internal services do.
func (ca *CA) PeerCert(hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := ca.template(hosts[0], nil, x509.ExtKeyUsageServerAuth)
	tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	addHosts(tmpl, hosts)
	return ca.sign(tmpl, key)
}

func addHosts(tmpl *x509.Certificate, hosts []string) {
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
}

// ClientCert issues a client certificate naming commonName (and
// organisations) with a new key.
func (ca *CA) ClientCert(commonName string, orgs []string) (certPEM, keyPEM []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	return ca.sign(ca.template(commonName, orgs, x509.ExtKeyUsageClientAuth), key)
}

// NodeServingDomain holds the names nodes' endpoints serve under,
// <node>.node.zonewright.invalid: whoever holds a join token chooses the
// node's name, so a certificate fit to serve under the bare name would
// let a node called localhost pass for the API on its host; under the
// reserved .invalid top-level domain (RFC 2606), which never resolves, no
// client dials such a name expecting anything but a node's endpoint.
const NodeServingDomain = "node.zonewright.invalid"

// NodeServingName is the name node's endpoint serves under.
func NodeServingName(node string) string { return node + "." + NodeServingDomain }

// SignCSR issues a node's certificate for a key its holder made and
// keeps: the subject is the one given, never the one the request asks
// for. It authenticates a client only and names no host, so that no
// client takes it for a server's.
func (ca *CA) SignCSR(csrDER []byte, commonName string, orgs []string) ([]byte, error) {
	tmpl := ca.template(commonName, orgs, x509.ExtKeyUsageClientAuth)
	tmpl.NotAfter = tmpl.NotBefore.Add(NodeCertValidity)
	return ca.signCSR(csrDER, tmpl)
}

// SignServingCSR issues the certificate a node's endpoint serves with,
// for the same key: server authentication only, under dnsName alone
// (NodeServingName), with the node's subject for the control plane to
// check.
func (ca *CA) SignServingCSR(csrDER []byte, commonName, dnsName string) ([]byte, error) {
	if !strings.HasSuffix(dnsName, "."+NodeServingDomain) {
		return nil, fmt.Errorf("a node serves only under %s, not as %q", NodeServingDomain, dnsName)
	}
	tmpl := ca.template(commonName, nil, x509.ExtKeyUsageServerAuth)
	tmpl.NotAfter = tmpl.NotBefore.Add(NodeCertValidity)
	tmpl.DNSNames = []string{dnsName}
	return ca.signCSR(csrDER, tmpl)
}

func (ca *CA) signCSR(csrDER []byte, tmpl *x509.Certificate) ([]byte, error) {
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request signature: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCert, Bytes: der}), nil
}

func (ca *CA) template(cn string, orgs []string, usage x509.ExtKeyUsage) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(CertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
}

func (ca *CA) sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemCert, Bytes: der}), keyPEM, nil
}

// EnsureServerCert keeps a server certificate for hosts at certPath and
// keyPath: the one there is reused while this CA issued it, it names
// every host and it is not about to expire; otherwise a new one is issued.
func (ca *CA) EnsureServerCert(certPath, keyPath string, hosts []string) error {
	if certPEM, err := os.ReadFile(certPath); err == nil {
		if _, kerr := os.Stat(keyPath); kerr == nil && ca.serves(certPEM, hosts) {
			return nil
		}
	}
	certPEM, keyPEM, err := ca.ServerCert(hosts)
	if err != nil {
		return err
	}
	if err := WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return err
	}
	return WriteFile(certPath, certPEM, 0o644)
}

func (ca *CA) serves(certPEM []byte, hosts []string) bool {
	cert, err := ParseCert(certPEM)
	if err != nil || cert.CheckSignatureFrom(ca.Cert) != nil || time.Until(cert.NotAfter) < ReissueBefore {
		return false
	}
	for _, h := range hosts {
		if cert.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// NewCSR makes a key and a certificate request for commonName: the key
// stays with its maker, the request goes to the CA.
func NewCSR(commonName string) (keyPEM, csrDER []byte, err error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	csrDER, err = x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName}}, key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	return keyPEM, csrDER, err
}

// CSRFor is a certificate request for commonName over an existing key:
// a renewal keeps the key, so a crash between writing the new
// certificates never leaves a key without its certificate.
func CSRFor(key crypto.Signer, commonName string) ([]byte, error) {
	return x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: commonName}}, key)
}

// RenewAt is when a certificate is renewed: once two thirds of its life
// have passed.
func RenewAt(c *x509.Certificate) time.Time {
	return c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 2 / 3)
}

// ParseCert reads the first certificate of a PEM block list.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != pemCert {
		return nil, errors.New("no PEM certificate found")
	}
	return x509.ParseCertificate(b.Bytes)
}

// Fingerprint is the SHA-256 of a certificate's DER, hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// PoolFromFile is a pool trusting the certificates of a PEM file.
func PoolFromFile(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("no certificates in %s", path)
	}
	return p, nil
}

// ClientTLS is a client configuration trusting caFile (empty: the
// system's roots) and presenting certFile/keyFile when given.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		p, err := PoolFromFile(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = p
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// WriteFile writes a file whole or not at all (a temporary file renamed
// over it), with mode perm.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemEC, Bytes: der}), nil
}

func parseKey(keyPEM []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("no PEM key found")
	}
	if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("the key cannot sign")
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}

// serial is a random 128-bit serial number, as RFC 5280 allows.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
