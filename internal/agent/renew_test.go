package agent_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/simtest"
)

// A running agent renews its certificate over the current one, keeps it
// in its state directory, and presents the new one to the API at once:
// with the certificate it joined with revoked, its lease is still
// renewed. (Drop the go a.renewCredential in run to see the certificate
// never change. TestARenewedCertificateIsPresentedBesideAnOpenStream
// shows why the API client's transport is replaced.)
func TestTheAgentRenewsItsCertificateAndPresentsTheNewOne(t *testing.T) {
	ctx := t.Context()
	st, log := newStore(t)
	tmp := devstack.StartTestTemporal(t)
	node := simtest.NewNode(t, "node1")
	api := startAPI(t, st, log)
	cfg := api.connect(t, agent.Config{
		Node: "node1", TemporalAddress: tmp.Address(), TemporalNamespace: tmp.Namespace(), PodCIDR: "127.10.19.0/24",
		BinDir: node.Bin, ImageDir: filepath.Join(node.Root, "fs/var/zonewright/images"), ZvolDir: filepath.Join(node.Root, "fs/dev/zvol/rdsk"),
		HeartbeatInterval: 200 * time.Millisecond, WorkerStopTimeout: 5 * time.Second, Logger: log,
		// Every certificate is due: the agent renews at each check.
		CertRenewBefore: 2 * pki.NodeCertValidity, CertCheckInterval: 300 * time.Millisecond,
	})
	runAgent(t, cfg)
	waitNode(t, st, "registered", func(n *model.Node) bool { return n.Condition(model.NodeReady) != nil })
	serial := func() string {
		b, err := os.ReadFile(filepath.Join(cfg.StateDir, agent.NodeCertFile))
		if err != nil {
			t.Fatal(err)
		}
		c, err := pki.ParseCert(b)
		if err != nil {
			t.Fatal(err)
		}
		return c.SerialNumber.Text(16)
	}
	joined := serial()
	deadline := time.Now().Add(30 * time.Second)
	for serial() == joined {
		if time.Now().After(deadline) {
			t.Fatal("the agent did not renew its certificate")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var recorded int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM node_certificates WHERE node = 'node1'`).Scan(&recorded); err != nil || recorded < 2 {
		t.Errorf("%d certificates recorded for node1 (%v), want the join's and the renewals", recorded, err)
	}

	// Refuse the certificate it joined with: the agent's requests carry a
	// renewed one.
	if _, err := st.Pool().Exec(ctx, `UPDATE node_certificates SET revoked_at = now() WHERE serial = $1`, joined); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	for range 3 {
		revokedAt = *waitLease(t, st, revokedAt).Spec.RenewTime
	}
}
