package sim

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strings"
)

// Name rules of spec section 1.3.

const (
	zoneNameMax    = 63
	linkNameMax    = 31
	datasetNameMax = 255
)

// validZoneName follows zonecfg_validate_zonename: alphanumeric first, then
// alphanumerics, '-', '_' and '.', at most 63 characters, not "global" and
// not starting with SUNW.
func validZoneName(n string) bool {
	if n == "" || len(n) > zoneNameMax || n == "global" || strings.HasPrefix(n, "SUNW") {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case isAlnum(c):
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// linkNameProblem returns "" for a valid datalink name, "too long" or
// "invalid" (dladm_valid_linkname): at most 31 characters of alphanumerics,
// '_' and '.', not starting with a digit, ending with a digit.
func linkNameProblem(n string) string {
	if len(n) > linkNameMax {
		return "too long"
	}
	if n == "" || isDigit(n[0]) || !isDigit(n[len(n)-1]) {
		return "invalid"
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !isAlnum(c) && c != '_' && c != '.' {
			return "invalid"
		}
	}
	return ""
}

func validLinkName(n string) bool { return linkNameProblem(n) == "" }

// datasetNameProblem returns "" for a valid dataset or snapshot name, else
// the zfs reason text ("invalid character ' ' in name", ...).
func datasetNameProblem(n string) string {
	if n == "" {
		return "empty component in name"
	}
	if len(n) > datasetNameMax {
		return "name is too long"
	}
	if n[0] == '/' {
		return "leading slash in name"
	}
	if n[len(n)-1] == '/' {
		return "trailing slash in name"
	}
	base, snap, hasSnap := strings.Cut(n, "@")
	if hasSnap {
		if snap == "" {
			return "empty component in name"
		}
		if strings.ContainsAny(snap, "@/") {
			return "multiple '@' delimiters in name"
		}
	}
	for _, comp := range strings.Split(base, "/") {
		if comp == "" {
			return "empty component in name"
		}
	}
	for _, part := range []string{base, snap} {
		for i := 0; i < len(part); i++ {
			c := part[i]
			if !isAlnum(c) && c != '_' && c != '-' && c != '.' && c != ':' && c != '/' {
				return fmt.Sprintf("invalid character '%c' in name", c)
			}
		}
	}
	pool := strings.Split(base, "/")[0]
	if !isAlpha(pool[0]) {
		return "pool name must begin with a letter"
	}
	if isReservedPoolName(pool) {
		return "name is reserved"
	}
	if strings.Count(base, "/") >= 50 {
		return "nesting depth exceeded"
	}
	return ""
}

func isReservedPoolName(p string) bool {
	switch {
	case p == "mirror" || p == "spare" || p == "log" || strings.HasPrefix(p, "raidz"):
		return true
	case len(p) >= 2 && p[0] == 'c' && isDigit(p[1]):
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isAlnum(c byte) bool { return isDigit(c) || isAlpha(c) }

// formatMAC prints octets in hex without leading zeros, as dladm does.
func formatMAC(b []byte) string {
	parts := make([]string, len(b))
	for i, o := range b {
		parts[i] = fmt.Sprintf("%x", o)
	}
	return strings.Join(parts, ":")
}

// parseMAC accepts colon-separated hex octets with or without leading zeros.
func parseMAC(s string) ([]byte, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return nil, false
	}
	out := make([]byte, 6)
	for i, p := range parts {
		if p == "" || len(p) > 2 {
			return nil, false
		}
		var v byte
		for j := 0; j < len(p); j++ {
			c := p[j]
			var d byte
			switch {
			case isDigit(c):
				d = c - '0'
			case c >= 'a' && c <= 'f':
				d = c - 'a' + 10
			case c >= 'A' && c <= 'F':
				d = c - 'A' + 10
			default:
				return nil, false
			}
			v = v<<4 | d
		}
		out[i] = v
	}
	return out, true
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return b
}

// newUUID returns a random RFC 4122 version 4 UUID.
func newUUID() string {
	b := randomBytes(16)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func newGUID() uint64 {
	return binary.BigEndian.Uint64(randomBytes(8)) >> 1
}
