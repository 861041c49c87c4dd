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

// LockJoins makes the joins of node take turns until unlock is called, so
// two hosts joining under one new name at once cannot both get a
// certificate for it.
func (n *NodeCertificates) LockJoins(ctx context.Context, node string) (unlock func(), err error) {
	conn, err := n.Pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	const key = `hashtextextended('zonewright-join:' || $1, 0)`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`, node); err != nil {
		conn.Release()
		return nil, fmt.Errorf("lock the joins of node %s: %w", node, err)
	}
	return func() {
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock(`+key+`)`, node); err != nil {
			conn.Conn().Close(context.Background()) // a lock still held ends with its session
		}
		conn.Release()
	}, nil
}

// Live reports whether node holds a certificate neither revoked nor
// expired: a host joined under its name, whether or not it registered
// the Node yet.
func (n *NodeCertificates) Live(ctx context.Context, node string) (bool, error) {
	var live bool
	err := n.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM node_certificates
		WHERE node = $1 AND revoked_at IS NULL AND not_after > now())`, node).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("look up node %s's certificates: %w", node, err)
	}
	return live, nil
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
