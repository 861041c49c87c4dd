package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/pki"
)

// `zonewright init` leaves the cluster CA serve and `zonewright temporal`
// load and the key serve's --encryption-key-file reads, both private to
// their owner, and a second run keeps both. (Drop the EnsureKeyFile call
// in initState to see this fail: the key file is missing.)
func TestInitMakesTheCAAndTheKeyTheControlPlaneLoads(t *testing.T) {
	state := t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "secrets", "encryption.key")
	args := []string{"--state-dir", state, "--encryption-key-file", keyFile}
	first := stdoutOf(t, func() error { return initState(t.Context(), args) })

	ca, err := pki.LoadOrCreateCA(filepath.Join(state, "tls"), controlplane.CACommonName)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Cert.Subject.CommonName != controlplane.CACommonName || !strings.Contains(first, ca.Fingerprint()) {
		t.Fatalf("init printed %q; the CA in %s is %q, %s", first, state, ca.Cert.Subject.CommonName, ca.Fingerprint())
	}
	if _, err := encryption.LoadKeyFile(keyFile); err != nil {
		t.Fatalf("serve cannot load the key init made: %v", err)
	}
	for _, private := range []string{filepath.Join(state, "tls", "ca.key"), keyFile} {
		fi, err := os.Stat(private)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", private, fi.Mode().Perm())
		}
	}

	key, _ := os.ReadFile(keyFile)
	second := stdoutOf(t, func() error { return initState(t.Context(), args) })
	again, _ := os.ReadFile(keyFile)
	if second != first || string(again) != string(key) {
		t.Fatalf("a second init changed what the first made:\n%s\n%s", first, second)
	}
	if err := initState(t.Context(), []string{"--state-dir", state, "extra"}); err == nil {
		t.Fatal("init took a stray argument")
	}
}
