// Package signedtoken makes and checks the bearer tokens the control plane
// gives nodes (image downloads, volume transfers): "<unix expiry>.<hex
// HMAC-SHA256>" over a domain, the parts that name what the token allows,
// and the expiry, with a secret every replica shares. The domain keeps
// one use's tokens from passing for another's.
package signedtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Errors of Check.
var (
	ErrInvalid = errors.New("token is not valid for this object")
	ErrExpired = errors.New("token expired")
)

// Make returns a token for parts under domain that expires ttl from now.
func Make(secret []byte, domain string, ttl time.Duration, parts ...string) string {
	exp := time.Now().Add(ttl).Unix()
	return strconv.FormatInt(exp, 10) + "." + hex.EncodeToString(mac(secret, domain, exp, parts))
}

// Check accepts a token Make made for the same domain and parts that has
// not expired at now. With no secret nothing passes.
func Check(secret []byte, domain, token string, now time.Time, parts ...string) error {
	if len(secret) == 0 {
		return ErrInvalid
	}
	expText, macText, ok := strings.Cut(token, ".")
	if !ok {
		return ErrInvalid
	}
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil {
		return ErrInvalid
	}
	got, err := hex.DecodeString(macText)
	if err != nil || !hmac.Equal(got, mac(secret, domain, exp, parts)) {
		return ErrInvalid
	}
	if now.Unix() > exp {
		return ErrExpired
	}
	return nil
}

func mac(secret []byte, domain string, exp int64, parts []string) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range append(append([]string{domain}, parts...), strconv.FormatInt(exp, 10)) {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// Bearer is the token of an "Authorization: Bearer <token>" header.
func Bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
