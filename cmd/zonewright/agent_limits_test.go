package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/pki"
)

// The node's zone limits come from the agent's flags: a quota as a
// quantity, process limits at zonecfg's floor or none, and defaults that
// bound every zone.
func TestAgentZoneLimitFlags(t *testing.T) {
	parse := func(args ...string) (int64, int64, int64, error) {
		fs, o := agentFlags()
		if err := fs.Parse(append([]string{"--api-url", "https://cp:8443", "--temporal-insecure"}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := o.config()
		return cfg.ZoneQuota, cfg.ZoneMaxProcesses, cfg.ZoneMaxLWPs, err
	}
	q, p, l, err := parse()
	if err != nil || q != 0 || p != 4096 || l != 16384 {
		t.Errorf("defaults: quota %d processes %d lwps %d %v", q, p, l, err)
	}
	q, p, l, err = parse("--zone-quota", "20Gi", "--zone-max-processes", "0", "--zone-max-lwps", "100")
	if err != nil || q != 20<<30 || p != 0 || l != 100 {
		t.Errorf("set: quota %d processes %d lwps %d %v", q, p, l, err)
	}
	for _, bad := range [][]string{{"--zone-quota", "lots"}, {"--zone-quota", "-1Gi"}, {"--zone-max-processes", "99"}, {"--zone-max-lwps", "x"}} {
		if _, _, _, err := parse(bad...); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// Temporal in plaintext is the operator's explicit choice: without a TLS
// option the agent and serve refuse to start unless --temporal-insecure
// says so, and the two together are a contradiction. (Make
// TLSConfig.Check return nil to see this fail.)
func TestPlaintextTemporalMustBeAskedFor(t *testing.T) {
	agentErr := func(args ...string) error {
		fs, o := agentFlags()
		if err := fs.Parse(append([]string{"--api-url", "https://cp:8443"}, args...)); err != nil {
			t.Fatal(err)
		}
		_, err := o.config()
		return err
	}
	if err := agentErr(); err == nil || !strings.Contains(err.Error(), "--temporal-insecure") {
		t.Errorf("agent without Temporal TLS: %v, want a refusal naming --temporal-insecure", err)
	}
	if err := agentErr("--temporal-insecure"); err != nil {
		t.Errorf("agent with --temporal-insecure: %v", err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	ca, err := pki.LoadOrCreateCA(filepath.Dir(caFile), "zonewright CA")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := agentErr("--temporal-tls-ca", caFile); err != nil {
		t.Errorf("agent with a Temporal CA (its own certificate): %v", err)
	}
	if err := agentErr("--temporal-insecure", "--temporal-tls-ca", "ca.pem"); err == nil {
		t.Error("agent with --temporal-insecure and a Temporal CA started")
	}
	err = serve(context.Background(), []string{"--database-url", "postgres://zw@127.0.0.1:1/zw"})
	if err == nil || !strings.Contains(err.Error(), "--temporal-insecure") {
		t.Errorf("serve without Temporal TLS: %v, want a refusal naming --temporal-insecure", err)
	}
}
