//go:build !illumos && !nodev

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestPodsShareUserWarningOnlyWhenPodsRunAsTheStacksUser(t *testing.T) {
	for _, c := range []struct {
		name     string
		isolated bool
		euid     int
		nodes    int
		warns    bool
	}{
		{"a user without isolation", false, 1000, 3, true},
		{"a user in isolation mode (zones get subordinate ids)", true, 1000, 3, false},
		{"root (zones get uids of their own)", false, 0, 3, false},
		{"no nodes, so no pods", false, 1000, 0, false},
	} {
		got := podsShareUserWarning(c.isolated, c.euid, c.nodes, "/home/u/.data", "isolation mode needs nft")
		if (got != "") != c.warns {
			t.Errorf("%s: warning %q", c.name, got)
		}
		if c.warns && (!strings.Contains(got, "/home/u/.data") || !strings.Contains(got, "isolation mode needs nft")) {
			t.Errorf("%s: the warning %q names neither the data directory nor why isolation is off", c.name, got)
		}
	}
}

// A user who is not root and gets no isolation mode is told, on stderr
// and in the banner, that pods can read the stack's data directory.
// (Drop the Fprintln of the warning in dev to see the stderr check fail;
// the %s of exposed in the banner for the other.)
func TestDevStackWithoutIsolationWarnsAUserThatPodsReadItsData(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot start the stack as another user")
	}
	cred, _, work := testUser(t)
	dataDir := filepath.Join(work, ".data")
	d := startDevAs(t, cred, buildBinary(t), dataDir,
		freeAddr(t), freeAddr(t), freeAddr(t), "--isolation=false", "--nodes", "1")
	t.Cleanup(func() { d.stop(t) })
	out := d.output.String()
	for _, want := range []string{"WARNING: pods run as your user (uid " + strconv.Itoa(int(cred.Uid)) + ") and can read " + dataDir, "  WARNING      pods run as your user"} {
		if !strings.Contains(out, want) {
			t.Errorf("the stack does not say %q:\n%s", want, out)
		}
	}
}
