package sim

import (
	"os"
	"path/filepath"
	"testing"
)

// The machine's zone uid counter hands out every uid once, never below
// the base, and refuses a counter it cannot read rather than start over.
func TestZoneUIDsAreGivenOnceAndNeverBelowTheBase(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "lib", "next-zone-uid")
	seen := map[uint32]bool{}
	for i, base := range []uint32{2000000, 2000000, 1000, 3000000, 2000000} {
		uid, err := nextZoneUID(counter, base, maxZoneUID)
		if err != nil {
			t.Fatal(err)
		}
		if uid < base || seen[uid] {
			t.Errorf("call %d (base %d): uid %d, seen before or below the base", i, base, uid)
		}
		seen[uid] = true
	}
	if uid, _ := nextZoneUID(counter, 2000000, maxZoneUID); uid != 3000002 {
		t.Errorf("after a host with a higher base: uid %d, want 3000002", uid)
	}
	if err := os.WriteFile(counter, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if uid, err := nextZoneUID(counter, 2000000, maxZoneUID); err == nil {
		t.Errorf("a garbled counter gave uid %d", uid)
	}
}

// In a user namespace of its own a zone's uid is one the namespace maps
// (a subordinate id of the stack's user), never its root (the user
// itself); on the machine's own ids the base stands.
func TestZoneUIDsComeFromTheUserNamespacesIds(t *testing.T) {
	for _, c := range []struct {
		uidMap       string
		base, lo, hi uint32
	}{
		{"         0          0 4294967295\n", 2000000, 2000000, maxZoneUID},
		{"         0       1000          1\n         1     100000      65536\n", 2000000, 10000, 65536},
		{"0 1000 1\n1 100000 65536\n", 20000, 20000, 65536},
		{"0 1000 1\n1 100000 5000\n", 2000000, 10000, 5000}, // nothing to give
		{"0 1000 1\n", 2000000, 2000000, 1999999},
	} {
		lo, hi := zoneUIDRange(c.uidMap, c.base)
		if lo != c.lo || hi != c.hi {
			t.Errorf("uid_map %q, base %d: %d-%d, want %d-%d", c.uidMap, c.base, lo, hi, c.lo, c.hi)
		}
	}
	counter := filepath.Join(t.TempDir(), "next-zone-uid")
	if _, err := nextZoneUID(counter, 10000, 9999); err == nil {
		t.Error("an empty range gave a uid")
	}
}
