package devstack

import (
	"context"
	"crypto/tls"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/zonewright/zonewright/internal/pki"
)

// The internal services, which have no authorizer, admit only the
// server's own internode certificate: not a plaintext client, not a
// node's certificate from the cluster CA.
func TestInternalServicesAdmitOnlyTheInternodeCertificate(t *testing.T) {
	ca, err := pki.LoadOrCreateCA(t.TempDir(), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	srv := StartTestTemporal(t, func(cfg *TemporalConfig) {
		cfg.CA = ca
		cfg.Logger = slog.New(slog.DiscardHandler)
	})
	if len(srv.internal) != 3 {
		t.Fatalf("internal services at %v, want 3", srv.internal)
	}
	dir := filepath.Join(filepath.Dir(srv.DatabasePath()), "tls", "internode")
	internode, err := pki.ClientTLS(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "internode.crt"), filepath.Join(dir, "internode.key"))
	if err != nil {
		t.Fatal(err)
	}
	cn, orgs := NodeSubject("n1")
	node, err := srv.ClientTLS(cn, orgs...)
	if err != nil {
		t.Fatal(err)
	}
	// The node trusts the internode CA here, so only its own certificate
	// can be what is refused.
	node.RootCAs = internode.RootCAs

	check := func(addr string, creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	for _, addr := range srv.internal {
		if err := check(addr, credentials.NewTLS(internode)); err != nil {
			t.Errorf("%s with the internode certificate: %v", addr, err)
		}
		if err := check(addr, insecure.NewCredentials()); err == nil {
			t.Errorf("%s admits a plaintext client", addr)
		}
		if err := check(addr, credentials.NewTLS(node)); err == nil {
			t.Errorf("%s admits a node's certificate", addr)
		}
		if err := check(addr, credentials.NewTLS(&tls.Config{RootCAs: internode.RootCAs})); err == nil {
			t.Errorf("%s admits a client without a certificate", addr)
		}
	}
}
