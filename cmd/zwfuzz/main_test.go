package main

import (
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/simtest"
)

// Two thousand hostile requests against a dev stack of the test's own get
// no answer of 500 or more, none hangs and the server logs no panic.
func TestHostileRequestsGetNoServerError(t *testing.T) {
	bin := t.TempDir()
	if err := simtest.BuildBinaries(bin, "zonewright", "illumos-sim"); err != nil {
		t.Fatal(err)
	}
	if err := run(bin, "", 2000, 11, 8, 45*time.Second); err != nil {
		t.Fatal(err)
	}
}
