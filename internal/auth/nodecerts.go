package auth

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NodeCertificates keeps the node certificates the control plane signs
// (table node_certificates); deleting a Node revokes its certificates.
// One signed before the table existed is not recorded and stays good
// until it expires.
type NodeCertificates struct {
	Pool *pgxpool.Pool
}

// CertSerial names a certificate in the table.
func CertSerial(cert *x509.Certificate) string { return cert.SerialNumber.Text(16) }

// Record keeps a certificate just signed for node.
func (n *NodeCertificates) Record(ctx context.Context, node string, cert *x509.Certificate) error {
	if _, err := n.Pool.Exec(ctx, `INSERT INTO node_certificates (serial, node, not_after) VALUES ($1, $2, $3)`,
		CertSerial(cert), node, cert.NotAfter); err != nil {
		return fmt.Errorf("record node certificate: %w", err)
	}
	return nil
}

// Revoked reports whether the certificate with serial was revoked.
func (n *NodeCertificates) Revoked(ctx context.Context, serial string) (bool, error) {
	var revoked bool
	err := n.Pool.QueryRow(ctx, `SELECT revoked_at IS NOT NULL FROM node_certificates WHERE serial = $1`, serial).Scan(&revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up node certificate: %w", err)
	}
	return revoked, nil
}
