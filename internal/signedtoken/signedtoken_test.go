package signedtoken

import (
	"errors"
	"testing"
	"time"
)

func TestTokensAreBoundToDomainPartsAndTime(t *testing.T) {
	secret := []byte("s3cret")
	tok := Make(secret, "images v1", time.Minute, "base")
	now := time.Now()
	if err := Check(secret, "images v1", tok, now, "base"); err != nil {
		t.Fatalf("a fresh token: %v", err)
	}
	for _, tc := range []struct {
		what, domain, part string
		secret             []byte
	}{
		{"another object", "images v1", "other", secret},
		{"another domain", "transfers v1", "base", secret},
		{"another secret", "images v1", "base", []byte("other")},
		{"no secret", "images v1", "base", nil},
	} {
		if err := Check(tc.secret, tc.domain, tok, now, tc.part); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.what, err)
		}
	}
	if err := Check(secret, "images v1", tok, now.Add(2*time.Minute), "base"); !errors.Is(err, ErrExpired) {
		t.Errorf("later: %v, want ErrExpired", err)
	}
	for _, bad := range []string{"", "nodot", "x.abcd", "123.zz"} {
		if err := Check(secret, "images v1", bad, now, "base"); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if tok, ok := Bearer("bearer  abc "); !ok || tok != "abc" {
		t.Errorf("Bearer = %q %v", tok, ok)
	}
	if _, ok := Bearer("Basic abc"); ok {
		t.Error("a Basic header gave a bearer token")
	}
}
