// Package names derives and checks the names of illumos objects — zones,
// datalinks, ZFS datasets — by the rules of the illumos libraries that
// enforce them. It is apart from the command wrappers so that contracts
// naming a pod's zone or VNIC need not compile them.
package names

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Limits from illumos headers (see spec 1.3).
const (
	MaxZoneNameLen    = 63  // ZONENAME_MAX - 1
	MaxLinkNameLen    = 31  // MAXLINKNAMELEN - 1
	MaxDatasetNameLen = 255 // ZFS_MAX_DATASET_NAME_LEN - 1
	MaxDatasetDepth   = 50
)

// Derived names are a readable part (truncated to fit) followed by a hash of
// the whole input, so two inputs that differ anywhere, including after the
// truncation point, get different names unless the hash collides.

const (
	zoneHashLen = 12 // hex digits: 48 bits
	linkHashLen = 10 // decimal digits, first one non-zero: ~33 bits
	dsHashLen   = 12 // hex digits
)

// digest hashes the parts unambiguously (each part length-prefixed, so
// ("a-b","c") and ("a","b-c") differ).
func digest(parts ...string) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

func hexHash(n int, parts ...string) string {
	d := digest(parts...)
	return fmt.Sprintf("%x", d[:])[:n]
}

// decimalHash returns n decimal digits whose first is 1-9, so the number a
// link name ends with never has a leading zero (dladm.8 asks for that).
func decimalHash(n int, parts ...string) string {
	d := digest(parts...)
	v := binary.BigEndian.Uint64(d[:8])
	lo := uint64(1)
	for i := 1; i < n; i++ {
		lo *= 10
	}
	// n <= 19, so 9*lo fits in a uint64.
	return strconv.FormatUint(lo+v%(9*lo), 10)
}

// sanitize keeps the bytes allowed by keep (lower-casing ASCII letters when
// lower is set) and replaces every run of other bytes with repl.
func sanitize(s string, keep func(byte) bool, repl byte, lower bool) string {
	var b strings.Builder
	lastRepl := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if lower && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if keep(c) {
			b.WriteByte(c)
			lastRepl = false
		} else if !lastRepl {
			b.WriteByte(repl)
			lastRepl = true
		}
	}
	return b.String()
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// ZoneName derives the zone name of a pod: "<namespace>-<pod>-<hash>",
// lower-cased, characters outside [a-z0-9_.-] replaced by '-', the readable
// part truncated so the whole is at most 63 characters, and a 12-hex-digit
// hash of (namespace, pod, uid) at the end. The uid makes a pod recreated
// under the same name a different zone, so a new pod never collides with
// the zone of an old one that is still being torn down.
//
// The result always passes ValidZoneName: it starts with a letter or digit,
// it is never "global", and (being lower case) never starts with "SUNW".
func ZoneName(namespace, pod, uid string) string {
	keep := func(c byte) bool { return isAlnum(c) || c == '-' || c == '_' || c == '.' }
	readable := sanitize(namespace, keep, '-', true) + "-" + sanitize(pod, keep, '-', true)
	readable = strings.TrimLeft(readable, "-_.")
	suffix := hexHash(zoneHashLen, "zone", namespace, pod, uid)
	if max := MaxZoneNameLen - len(suffix) - 1; len(readable) > max {
		readable = readable[:max]
	}
	readable = strings.TrimRight(readable, "-_.")
	if readable == "" {
		return "z" + suffix
	}
	return readable + "-" + suffix
}

// ValidZoneName reports whether name is a zone name zonecfg accepts for a
// non-global zone (libzonecfg zonecfg_validate_zonename): 1 to 63
// characters, an alphanumeric first character, then alphanumerics, '-',
// '_' and '.'; not "global"; not starting with "SUNW".
func ValidZoneName(name string) bool {
	if name == "" || len(name) > MaxZoneNameLen || name == "global" || strings.HasPrefix(name, "SUNW") {
		return false
	}
	if !isAlnum(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// LinkName derives a datalink (VNIC, etherstub) name from a short prefix
// and a key, e.g. LinkName("zw", "default/web/net0"): lower-cased
// [a-z0-9_] characters of prefix+key (others become '_'), starting with a
// letter, truncated to fit, then '_' and 10 decimal digits of a hash of
// (prefix, key). At most 31 characters, and it ENDS WITH A DIGIT, as
// dladm_valid_linkname demands (a name like "web" is refused; "web0" is
// fine). The '_' keeps the readable part's own trailing digits apart from
// the hash, so the trailing number never starts with 0.
func LinkName(prefix, key string) string {
	keep := func(c byte) bool { return isAlnum(c) || c == '_' }
	readable := sanitize(prefix+key, keep, '_', true)
	i := 0
	for i < len(readable) && !isLetter(readable[i]) {
		i++
	}
	readable = readable[i:]
	suffix := decimalHash(linkHashLen, "link", prefix, key)
	if max := MaxLinkNameLen - len(suffix) - 1; len(readable) > max {
		readable = readable[:max]
	}
	readable = strings.TrimRight(readable, "_")
	if readable == "" {
		readable = "l"
	}
	return readable + "_" + suffix
}

// ValidLinkName reports whether name is a datalink name every illumos
// libdladm accepts (dladm_valid_linkname): 1 to 31 characters of
// alphanumerics and '_', not starting with a digit, ending with a digit.
// The '.' that newer libdladm also allows is refused, to stay valid on
// older hosts.
func ValidLinkName(name string) bool {
	if name == "" || len(name) > MaxLinkNameLen {
		return false
	}
	if isDigit(name[0]) || !isDigit(name[len(name)-1]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

func isDatasetChar(c byte) bool {
	return isAlnum(c) || c == '_' || c == '-' || c == '.' || c == ':'
}

// validComponent reports whether c is a ZFS dataset name component.
func validComponent(c string) bool {
	if c == "" || c == "." || c == ".." {
		return false
	}
	for i := 0; i < len(c); i++ {
		if !isDatasetChar(c[i]) {
			return false
		}
	}
	return true
}

// reservedPoolName reports the vdev words zpool refuses as pool names.
func reservedPoolName(p string) bool {
	switch {
	case p == "mirror" || p == "spare" || p == "log" || p == "cache" || p == "special" || p == "dedup":
		return true
	case strings.HasPrefix(p, "raidz") || strings.HasPrefix(p, "draid"):
		return true
	case len(p) >= 2 && p[0] == 'c' && isDigit(p[1]):
		return true
	}
	return false
}

// ValidDatasetName reports whether name is a ZFS filesystem or volume name
// (no snapshot or bookmark part) by the zfs_namecheck rules: at most 255
// characters and 50 levels; '/'-separated non-empty components of
// alphanumerics, '_', '-', '.', ':' (not "." or ".."); the pool (first)
// component starts with a letter and is not a reserved vdev word.
func ValidDatasetName(name string) bool {
	if name == "" || len(name) > MaxDatasetNameLen {
		return false
	}
	comps := strings.Split(name, "/")
	if len(comps) > MaxDatasetDepth {
		return false
	}
	for _, c := range comps {
		if !validComponent(c) {
			return false
		}
	}
	pool := comps[0]
	return isLetter(pool[0]) && !reservedPoolName(pool)
}

// ValidSnapshotName reports whether name is DATASET@SNAP with a valid
// dataset and a valid snapshot component.
func ValidSnapshotName(name string) bool {
	ds, snap, ok := strings.Cut(name, "@")
	return ok && len(name) <= MaxDatasetNameLen && ValidDatasetName(ds) && validComponent(snap)
}

// DatasetName derives a dataset under parent with one component per part,
// e.g. DatasetName("rpool/zonewright/zones", zoneName). A part that is
// already a valid component is used as it is (so a zone's dataset carries
// the zone's name); any other part is sanitised ([A-Za-z0-9_.:-], others
// become '_') and given a hash suffix of the original, so it cannot collide
// with a part that was valid to begin with. If the whole would exceed 255
// characters, the last component is shortened and suffixed with a hash of
// all parts. The parent must itself be valid.
func DatasetName(parent string, parts ...string) (string, error) {
	if !ValidDatasetName(parent) {
		return "", fmt.Errorf("invalid parent dataset name %q", parent)
	}
	if len(parts) == 0 {
		return parent, nil
	}
	if len(strings.Split(parent, "/"))+len(parts) > MaxDatasetDepth {
		return "", fmt.Errorf("dataset under %q with %d more levels is nested deeper than %d", parent, len(parts), MaxDatasetDepth)
	}
	comps := make([]string, len(parts))
	for i, p := range parts {
		if validComponent(p) {
			comps[i] = p
			continue
		}
		s := strings.Trim(sanitize(p, isDatasetChar, '_', false), ".")
		if s == "" {
			s = "x"
		}
		comps[i] = s + "-" + hexHash(dsHashLen, "dscomp", p)
	}
	name := parent + "/" + strings.Join(comps, "/")
	if len(name) <= MaxDatasetNameLen {
		return name, nil
	}
	// Too long: shorten the last component and make it unique for the
	// whole input.
	head := parent
	if len(comps) > 1 {
		head += "/" + strings.Join(comps[:len(comps)-1], "/")
	}
	suffix := hexHash(dsHashLen, append([]string{"ds", parent}, parts...)...)
	room := MaxDatasetNameLen - len(head) - 1 - len(suffix) - 1
	if room < 1 {
		return "", fmt.Errorf("dataset name under %q cannot fit in %d characters", head, MaxDatasetNameLen)
	}
	last := comps[len(comps)-1]
	if len(last) > room {
		last = last[:room]
	}
	last = strings.TrimRight(last, ".")
	if last == "" {
		last = "x"
	}
	return head + "/" + last + "-" + suffix, nil
}
