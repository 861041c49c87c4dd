package pglock

import "testing"

func TestKeysAreDistinct(t *testing.T) {
	seen := map[int64]bool{}
	for _, k := range All {
		if seen[k] {
			t.Fatalf("advisory lock key %#x is used twice", k)
		}
		seen[k] = true
	}
}
