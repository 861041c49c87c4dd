package encryption

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealedValuesOpenOnlyWithTheirKeyAndObject(t *testing.T) {
	k, err := NewKey(bytes.Repeat([]byte{7}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewKey(bytes.Repeat([]byte{8}, KeySize))
	sealed := k.Seal([]byte("hunter2"), []byte("default/db"))
	if bytes.Contains(sealed, []byte("hunter2")) {
		t.Fatal("the sealed value holds the plaintext")
	}
	if got, err := k.Open(sealed, []byte("default/db")); err != nil || string(got) != "hunter2" {
		t.Fatalf("open: %q, %v", got, err)
	}
	if _, err := k.Open(sealed, []byte("default/other")); err == nil {
		t.Error("a value opened under another object's name")
	}
	if _, err := other.Open(sealed, []byte("default/db")); err == nil {
		t.Error("a value opened with another key")
	}
	if bytes.Equal(sealed, k.Seal([]byte("hunter2"), []byte("default/db"))) {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
}

func TestKeyFilesAreGeneratedOnceAndMalformedOnesRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys", "encryption.key")
	k1, err := EnsureKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v, %v", fi, err)
	}
	k2, err := EnsureKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k2.Open(k1.Seal([]byte("x"), nil), nil); err != nil {
		t.Error("the key changed across two starts")
	}
	raw := bytes.Repeat([]byte{1}, KeySize)
	for name, content := range map[string][]byte{
		"raw":    raw,
		"base64": []byte(base64.StdEncoding.EncodeToString(raw) + "\n"),
	} {
		if _, err := ParseKey(content); err != nil {
			t.Errorf("%s key refused: %v", name, err)
		}
	}
	for name, content := range map[string][]byte{
		"short":           []byte("abc"),
		"16 bytes base64": []byte(base64.StdEncoding.EncodeToString(raw[:16])),
		"empty":           nil,
	} {
		_, err := ParseKey(content)
		if err == nil || !strings.Contains(err.Error(), "32 random bytes") {
			t.Errorf("%s key: %v, want a refusal that says what a key is", name, err)
		}
	}
}
