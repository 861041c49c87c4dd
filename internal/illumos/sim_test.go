package illumos_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
)

// The integration tests run every wrapper against the real simulator
// binary, built once here. Each test gets its own simulated node: a
// directory of command links (the Runner's BinDir) and a state root.

var (
	simBin      string
	simBuildErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "illumos-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	simBin = filepath.Join(dir, "illumos-sim")
	build := exec.Command("go", "build", "-o", simBin, "github.com/zonewright/zonewright/cmd/illumos-sim")
	if out, err := build.CombinedOutput(); err != nil {
		simBuildErr = fmt.Errorf("go build illumos-sim: %v\n%s", err, out)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type simNode struct {
	name   string
	bin    string
	root   string
	runner *illumos.Runner
	host   illumos.Host
}

// newNode installs a fresh simulated node named name (its hostname).
func newNode(t *testing.T, name string) *simNode {
	t.Helper()
	if simBuildErr != nil {
		t.Fatal(simBuildErr)
	}
	base := t.TempDir()
	n := &simNode{name: name, bin: filepath.Join(base, "bin-"+name), root: filepath.Join(base, name)}
	if out, err := exec.Command(simBin, "install", n.bin, "--root", n.root).CombinedOutput(); err != nil {
		t.Fatalf("illumos-sim install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// Kill the zone supervisors this test's zones started.
		if out, err := exec.Command(simBin, "stop-all", "--root", n.root).CombinedOutput(); err != nil {
			t.Logf("illumos-sim stop-all: %v\n%s", err, out)
		}
	})
	n.runner = &illumos.Runner{BinDir: n.bin, Timeout: time.Minute}
	n.host = illumos.Host{Runner: n.runner}
	return n
}

// simState is the part of `illumos-sim state` the tests look at.
type simState struct {
	Zones    []simZone    `json:"zones"`
	Links    []simLink    `json:"links"`
	Datasets []simDataset `json:"datasets"`
}

type simZone struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Routes []struct {
		Dest    string `json:"dest"`
		Gateway string `json:"gateway"`
	} `json:"routes"`
}

type simLink struct {
	Name  string `json:"name"`
	Class string `json:"class"`
}

type simDataset struct {
	Name string `json:"name"`
}

func (n *simNode) state(t *testing.T) simState {
	t.Helper()
	out, err := exec.Command(simBin, "state", "--root", n.root).Output()
	if err != nil {
		t.Fatalf("illumos-sim state: %v", err)
	}
	var st simState
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("illumos-sim state: %v", err)
	}
	return st
}

// sim runs an illumos-sim admin command on this node.
func (n *simNode) sim(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(simBin, append(args, "--root", n.root)...).CombinedOutput()
	if err != nil {
		t.Fatalf("illumos-sim %v: %v\n%s", args, err, out)
	}
	return string(out)
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
