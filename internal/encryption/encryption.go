// Package encryption seals values kept at rest (secrets in PostgreSQL)
// with AES-256-GCM under a key read from a file the operator provides.
package encryption

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KeySize is the key length: AES-256.
const KeySize = 32

// version prefixes every sealed value, so that another algorithm or key
// can be told apart later.
var version = []byte("zw1:")

// Key seals and opens values. It is safe for concurrent use.
type Key struct{ aead cipher.AEAD }

// NewKey makes a Key of 32 bytes.
func NewKey(raw []byte) (*Key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("an encryption key is %d bytes, this one has %d", KeySize, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Key{aead: aead}, nil
}

// ParseKey reads a key file's content: 32 raw bytes, or their standard
// base64 (trailing whitespace ignored).
func ParseKey(content []byte) (*Key, error) {
	if len(content) == KeySize {
		return NewKey(content)
	}
	text := bytes.TrimSpace(content)
	raw, err := base64.StdEncoding.DecodeString(string(text))
	if err != nil || len(raw) != KeySize {
		return nil, fmt.Errorf("an encryption key file holds %d random bytes, raw or in base64 (head -c %d /dev/urandom | base64); this one holds %d bytes that are neither", KeySize, KeySize, len(content))
	}
	return NewKey(raw)
}

// LoadKeyFile reads the key at path.
func LoadKeyFile(path string) (*Key, error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read encryption key: %w", err)
	}
	k, err := ParseKey(content)
	if err != nil {
		return nil, fmt.Errorf("encryption key %s: %w", path, err)
	}
	return k, nil
}

// EnsureKeyFile reads the key at path, first writing a new random one
// (base64, mode 0600) if there is none: a dev stack's data directory
// keeps its key across restarts.
func EnsureKeyFile(path string) (*Key, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		raw := make([]byte, KeySize)
		if _, err := rand.Read(raw); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("write encryption key: %w", err)
		}
		_, err = f.WriteString(base64.StdEncoding.EncodeToString(raw) + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("write encryption key: %w", err)
		}
	}
	return LoadKeyFile(path)
}

// Seal encrypts plaintext bound to aad (what the value belongs to, so a
// sealed value copied to another object does not open there).
func (k *Key) Seal(plaintext, aad []byte) []byte {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // the platform has no randomness
	}
	out := append(append([]byte{}, version...), nonce...)
	return k.aead.Seal(out, nonce, plaintext, aad)
}

// ErrOpen is a sealed value that does not open: another key, another
// object's value, or damage.
var ErrOpen = errors.New("the sealed value does not open with this key (another key, or damaged)")

// Open decrypts what Seal made with the same key and aad.
func (k *Key) Open(sealed, aad []byte) ([]byte, error) {
	if !bytes.HasPrefix(sealed, version) {
		return nil, ErrOpen
	}
	rest := sealed[len(version):]
	n := k.aead.NonceSize()
	if len(rest) < n {
		return nil, ErrOpen
	}
	plain, err := k.aead.Open(nil, rest[:n], rest[n:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}
