package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeRefusesAMalformedEncryptionKey(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := serve(t.Context(), []string{"--database-url", "postgres://127.0.0.1:1/none", "--temporal-insecure", "--encryption-key-file", key})
	if err == nil || !strings.Contains(err.Error(), "--encryption-key-file") || !strings.Contains(err.Error(), "32 random bytes") {
		t.Fatalf("serve with a malformed key: %v, want a refusal that says what a key is", err)
	}
}
