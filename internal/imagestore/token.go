package imagestore

import (
	"time"

	"github.com/zonewright/zonewright/internal/signedtoken"
)

// tokenDomain keeps these MACs apart from anything else the secret signs.
const tokenDomain = "zonewright image download v1"

// Token returns a bearer token that lets its holder download the artefact
// of image name until ttl from now (signedtoken).
func (s *Store) Token(name string, ttl time.Duration) string {
	return signedtoken.Make(s.Secret, tokenDomain, ttl, name)
}

// checkToken accepts a token Token made for name that has not expired.
func (s *Store) checkToken(name, token string, now time.Time) error {
	return signedtoken.Check(s.Secret, tokenDomain, token, now, name)
}
