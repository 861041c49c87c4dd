// Package simtest gives tests real simulated illumos hosts: the
// illumos-sim binary, built once per test binary, and fresh nodes made
// with it.
//
// A package that uses it removes the built binary when its tests end:
//
//	func TestMain(m *testing.M) { os.Exit(simtest.Main(m.Run)) }
//
// or, together with pgtest:
//
//	func TestMain(m *testing.M) {
//		os.Exit(simtest.Main(func() int { return pgtest.Main(m) }))
//	}
package simtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const cmdPrefix = "github.com/zonewright/zonewright/cmd/"

// The illumos-sim binary, built on first use.
var sim struct {
	once sync.Once
	dir  string // temp dir holding bin; Main removes it
	bin  string
	err  error
}

// Main runs the tests with run (m.Run, or anything wrapping it such as
// pgtest.Main) and then removes the illumos-sim binary if a test built
// it. It returns run's exit code.
func Main(run func() int) int {
	code := run()
	if sim.dir != "" {
		_ = os.RemoveAll(sim.dir)
	}
	return code
}

// staticCmds are built without cgo, as the Makefile builds them:
// illumos-sim runs once per simulated command (every probe), and without
// the dynamic loader and libc it starts faster and takes less memory.
var staticCmds = map[string]bool{"illumos-sim": true}

// BuildBinaries builds the named commands of this module (cmd/NAME) into
// dir, each as dir/NAME.
func BuildBinaries(dir string, cmds ...string) error {
	return BuildTagged(dir, nil, cmds...)
}

// BuildTagged is BuildBinaries with build tags, e.g. nodev for a
// zonewright that runs only as an agent: built as production builds are,
// without the embedded Temporal server, it links and starts faster.
func BuildTagged(dir string, tags []string, cmds ...string) error {
	var pkgs, static []string
	for _, c := range cmds {
		if staticCmds[c] {
			static = append(static, cmdPrefix+c)
		} else {
			pkgs = append(pkgs, cmdPrefix+c)
		}
	}
	for _, b := range []struct {
		pkgs []string
		env  []string
	}{{pkgs, nil}, {static, []string{"CGO_ENABLED=0"}}} {
		if len(b.pkgs) == 0 {
			continue
		}
		args := []string{"build", "-o", dir + string(filepath.Separator)}
		if len(tags) > 0 {
			args = append(args, "-tags", strings.Join(tags, ","))
		}
		cmd := exec.Command("go", append(args, b.pkgs...)...)
		cmd.Env = append(os.Environ(), b.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %v: %v\n%s", cmds, err, out)
		}
	}
	return nil
}

// Bin returns the path of the illumos-sim binary, building it on the
// first call; a failed build fails t.
func Bin(t testing.TB) string {
	t.Helper()
	sim.once.Do(func() {
		sim.dir, sim.err = os.MkdirTemp("", "simtest-")
		if sim.err != nil {
			return
		}
		sim.err = BuildBinaries(sim.dir, "illumos-sim")
		sim.bin = filepath.Join(sim.dir, "illumos-sim")
	})
	if sim.err != nil {
		t.Fatal(sim.err)
	}
	return sim.bin
}

// Node is one simulated host: a directory of command links (a Runner's
// BinDir) and its state root. The root's base name is the host name.
// A Node literal with Root set works for a host installed some other way.
type Node struct {
	Name string
	Bin  string // command directory
	Root string // state root
}

// NewNode installs a fresh node named name (its host name) in a temp dir
// of t. When t ends, the node's zone supervisors and services are stopped.
func NewNode(t testing.TB, name string) *Node {
	t.Helper()
	bin := Bin(t)
	base := t.TempDir()
	n := &Node{Name: name, Bin: filepath.Join(base, "bin"), Root: filepath.Join(base, name)}
	if out, err := exec.Command(bin, "install", n.Bin, "--root", n.Root).CombinedOutput(); err != nil {
		t.Fatalf("illumos-sim install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(bin, "stop-all", "--root", n.Root).CombinedOutput(); err != nil {
			t.Logf("illumos-sim stop-all: %v\n%s", err, out)
		}
	})
	return n
}

// Run runs the admin command `illumos-sim SUB --root ROOT ARGS...` (such
// as fault) on the node and returns its combined output; a failure fails t.
func (n *Node) Run(t testing.TB, sub string, args ...string) string {
	t.Helper()
	full := append([]string{sub, "--root", n.Root}, args...)
	out, err := exec.Command(Bin(t), full...).CombinedOutput()
	if err != nil {
		t.Fatalf("illumos-sim %v: %v\n%s", full, err, out)
	}
	return string(out)
}

// State returns the node's `illumos-sim state`.
func (n *Node) State(t testing.TB) State {
	t.Helper()
	out, err := exec.Command(Bin(t), "state", "--root", n.Root).Output()
	if err != nil {
		t.Fatalf("illumos-sim state: %v", err)
	}
	var st State
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("illumos-sim state: %v\n%s", err, out)
	}
	return st
}

// State is the part of `illumos-sim state` that tests read.
type State struct {
	Zones    []Zone              `json:"zones"`
	Links    []Link              `json:"links"`
	Datasets []Dataset           `json:"datasets"`
	NAT      map[string]NATTable `json:"nat"`
}

// Zone is a zone, the global zone included.
type Zone struct {
	Name          string    `json:"name"`
	State         string    `json:"state"`
	ID            int       `json:"id"`   // -1 when not in the kernel
	UID           uint32    `json:"uid"`  // its root's uid under root; 0: none yet
	UIDs          uint32    `json:"uids"` // how many ids from UID it owns; 0: one
	SupervisorPID int       `json:"supervisor_pid"`
	InitPID       int       `json:"init_pid"` // in isolation mode, PID 1 of its PID namespace
	Cgroups       []string  `json:"cgroups"`  // the cgroup holding it to its memory and CPU caps
	Services      []Service `json:"services"`
	Addresses     []Address `json:"addresses"`
	Routes        []Route   `json:"routes"`
}

// Service is an SMF service instance in a zone.
type Service struct {
	FMRI     string `json:"fmri"`
	State    string `json:"state"`
	PID      int    `json:"pid"`
	Restarts int    `json:"restarts"`
}

// Address is an IP address object.
type Address struct {
	Obj  string `json:"obj"`
	Addr string `json:"addr"`
}

// Route is a routing-table entry.
type Route struct {
	Dest    string `json:"dest"`
	Gateway string `json:"gateway"`
}

// Link is a datalink: phys, vnic or etherstub.
type Link struct {
	Name  string `json:"name"`
	Class string `json:"class"`
}

// Dataset is a ZFS dataset with its locally set properties.
type Dataset struct {
	Name  string            `json:"name"`
	Props map[string]string `json:"props"`
}

// NATTable is one IP stack's NAT rules and active sessions.
type NATTable struct {
	Rules    []NATRule    `json:"rules"`
	Sessions []NATSession `json:"sessions"`
}

// NATRule is a loaded rule as `ipnat -l` prints it. A Deleted rule was
// removed but is kept while sessions use it.
type NATRule struct {
	Text    string `json:"text"`
	Hits    int    `json:"hits"`
	Deleted bool   `json:"deleted"`
}

// NATSession is an active translation: Remote sent to Out, forwarded to In.
type NATSession struct {
	Proto      string `json:"proto"`
	In         string `json:"in"`
	InPort     int    `json:"in_port"`
	Out        string `json:"out"`
	OutPort    int    `json:"out_port"`
	Remote     string `json:"remote"`
	RemotePort int    `json:"remote_port"`
}

// ForkUpTo is a python3 program for a zone (no double quotes, no $: it
// can be double-quoted for a shell): it forks up to n sleeping
// children, prints how many it got before a fork failed (a zone at its
// max-processes), then ends them.
func ForkUpTo(n int) string {
	return fmt.Sprintf(`import os, signal
pids = []
for i in range(%d):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        os.execv('/bin/sleep', ['sleep', '100'])
    pids.append(pid)
print(len(pids))
for p in pids:
    os.kill(p, signal.SIGKILL)
    os.waitpid(p, 0)
`, n)
}
