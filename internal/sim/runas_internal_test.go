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
		uid, err := nextZoneUID(counter, base)
		if err != nil {
			t.Fatal(err)
		}
		if uid < base || seen[uid] {
			t.Errorf("call %d (base %d): uid %d, seen before or below the base", i, base, uid)
		}
		seen[uid] = true
	}
	if uid, _ := nextZoneUID(counter, 2000000); uid != 3000002 {
		t.Errorf("after a host with a higher base: uid %d, want 3000002", uid)
	}
	if err := os.WriteFile(counter, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if uid, err := nextZoneUID(counter, 2000000); err == nil {
		t.Errorf("a garbled counter gave uid %d", uid)
	}
}
