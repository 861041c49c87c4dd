package store

import (
	"strings"
	"unicode/utf8"
)

// StorableText reports whether PostgreSQL can hold s in a text or jsonb
// value: it must be valid UTF-8 without NUL, which the database refuses
// with an error rather than a mismatch. Callers check their clients' text
// with it, so that such input is a bad request, not a failed query.
func StorableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
