package imagestore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// tokenDomain keeps these MACs apart from anything else the secret signs.
const tokenDomain = "zonewright image download v1"

// Token returns a bearer token that lets its holder download the artefact
// of image name until ttl from now: "<unix expiry>.<hex HMAC-SHA256>" over
// the image name and the expiry.
func (s *Store) Token(name string, ttl time.Duration) string {
	exp := time.Now().Add(ttl).Unix()
	return strconv.FormatInt(exp, 10) + "." + hex.EncodeToString(s.mac(name, exp))
}

func (s *Store) mac(name string, exp int64) []byte {
	m := hmac.New(sha256.New, s.Secret)
	m.Write([]byte(tokenDomain))
	m.Write([]byte{0})
	m.Write([]byte(name))
	m.Write([]byte{0})
	m.Write([]byte(strconv.FormatInt(exp, 10)))
	return m.Sum(nil)
}

var (
	errTokenInvalid = errors.New("download token is not valid for this image")
	errTokenExpired = errors.New("download token expired")
)

// checkToken accepts a token Token made for name that has not expired.
func (s *Store) checkToken(name, token string, now time.Time) error {
	if len(s.Secret) == 0 {
		return errTokenInvalid
	}
	expText, macText, ok := strings.Cut(token, ".")
	if !ok {
		return errTokenInvalid
	}
	exp, err := strconv.ParseInt(expText, 10, 64)
	if err != nil {
		return errTokenInvalid
	}
	got, err := hex.DecodeString(macText)
	if err != nil || !hmac.Equal(got, s.mac(name, exp)) {
		return errTokenInvalid
	}
	if now.Unix() > exp {
		return errTokenExpired
	}
	return nil
}
