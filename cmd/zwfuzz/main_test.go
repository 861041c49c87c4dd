package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Two thousand hostile requests against a dev stack of the test's own get
// no answer of 500 or more, none hangs and the server logs no panic.
func TestHostileRequestsGetNoServerError(t *testing.T) {
	bin := t.TempDir()
	for _, pkg := range []string{"../zonewright", "../illumos-sim"} {
		cmd := exec.Command("go", "build", "-o", bin+"/", pkg)
		if pkg == "../illumos-sim" { // static, as make build makes it
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(bin, "zonewright")); err != nil {
		t.Fatal(err)
	}
	if err := run(bin, "", 2000, 11, 8, 45*time.Second); err != nil {
		t.Fatal(err)
	}
}
