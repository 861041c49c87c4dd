package illumos_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/simtest"
)

// The integration tests run every wrapper against the real simulator
// binary (simtest builds it once). Each test gets its own simulated node:
// a directory of command links (the Runner's BinDir) and a state root.

func TestMain(m *testing.M) { os.Exit(simtest.Main(m.Run)) }

type simNode struct {
	sim    *simtest.Node
	runner *illumos.Runner
	host   illumos.Host
}

// newNode installs a fresh simulated node named name (its hostname).
func newNode(t *testing.T, name string) *simNode {
	t.Helper()
	n := &simNode{sim: simtest.NewNode(t, name)}
	n.runner = &illumos.Runner{BinDir: n.sim.Bin, Timeout: time.Minute}
	n.host = illumos.Host{Runner: n.runner}
	return n
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// must fails the test on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantKind fails unless errors.Is(err, sentinel); a nil sentinel wants success.
func wantKind(t *testing.T, what string, err error, sentinel error) {
	t.Helper()
	if sentinel == nil {
		if err != nil {
			t.Fatalf("%s: %v, want success", what, err)
		}
		return
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: %v (kind %v), want %v", what, err, illumos.KindOf(err), sentinel)
	}
}
