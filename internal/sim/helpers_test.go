package sim_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/simtest"
)

// The real illumos-sim binary is built once for the whole run; simtest.Bin
// returns it.

func TestMain(m *testing.M) { os.Exit(simtest.Main(m.Run)) }

// simHost is one simulated node: a command directory made by
// "illumos-sim install" and its state root.
type simHost struct {
	t    testing.TB
	root string
	bin  string
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// newHost installs a fresh node named node1 and stops everything it ran
// when the test ends.
func newHost(t testing.TB) *simHost {
	t.Helper()
	return newNamedHost(t, t.TempDir(), "node1")
}

func newNamedHost(t testing.TB, base, name string) *simHost {
	t.Helper()
	simBin := simtest.Bin(t)
	h := &simHost{t: t, root: filepath.Join(base, name), bin: filepath.Join(base, name+"-bin")}
	out, err := exec.Command(simBin, "install", h.bin, "--root", h.root).CombinedOutput()
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(simBin, "stop-all", "--root", h.root).CombinedOutput(); err != nil {
			t.Errorf("stop-all: %v\n%s", err, out)
		}
	})
	return h
}

// cleanEnv is the test's environment without the simulator's variables,
// so commands find their host through the command directory alone.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ILLUMOS_SIM_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// run runs a simulated command through its link in the host's bin dir.
func (h *simHost) run(cmd string, args ...string) result {
	h.t.Helper()
	return h.runEnv("", nil, cmd, args...)
}

// runIn runs a command with stdin.
func (h *simHost) runIn(stdin, cmd string, args ...string) result {
	h.t.Helper()
	return h.runEnv(stdin, nil, cmd, args...)
}

func (h *simHost) runEnv(stdin string, extraEnv []string, cmd string, args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(h.bin, cmd), args...)
	c.Env = append(cleanEnv(), extraEnv...)
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		h.t.Fatalf("%s %v: %v", cmd, args, err)
	}
	return result{out.String(), errb.String(), code}
}

// must runs a command that has to succeed.
func (h *simHost) must(cmd string, args ...string) string {
	h.t.Helper()
	r := h.run(cmd, args...)
	if r.code != 0 {
		h.t.Fatalf("%s %s: %v", cmd, strings.Join(args, " "), r)
	}
	return r.stdout
}

// expect checks exit status, stdout and stderr exactly.
func expect(t testing.TB, r result, code int, stdout, stderr string) {
	t.Helper()
	if r.code != code || r.stdout != stdout || r.stderr != stderr {
		t.Errorf("got %v\nwant exit %d\nstdout:\n%s\nstderr:\n%s", r, code, stdout, stderr)
	}
}

// node is the host as a simtest.Node, for the admin commands.
func (h *simHost) node() *simtest.Node {
	return &simtest.Node{Name: filepath.Base(h.root), Bin: h.bin, Root: h.root}
}

func (h *simHost) state() simtest.State {
	h.t.Helper()
	return h.node().State(h.t)
}

func (h *simHost) zoneState(name string) string {
	h.t.Helper()
	for _, z := range h.state().Zones {
		if z.Name == name {
			return z.State
		}
	}
	return ""
}

// servicePID returns a service's recorded pid (0 when not running).
func (h *simHost) service(zone, fmri string) (state string, pid, restarts int) {
	h.t.Helper()
	for _, z := range h.state().Zones {
		if z.Name != zone {
			continue
		}
		for _, s := range z.Services {
			if s.FMRI == fmri {
				return s.State, s.PID, s.Restarts
			}
		}
	}
	return "", 0, 0
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// alive is kill(pid, 0) that also treats a zombie as dead: orphaned
// processes of a finished test may linger as zombies under an init that
// does not reap.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// zoneSetup creates a zone with zonepath /zones/NAME and brings it to
// the given state.
func (h *simHost) zoneSetup(name, state string, extra ...string) {
	h.t.Helper()
	cfg := "create -b; set zonepath=/zones/" + name + "; set ip-type=exclusive"
	for _, e := range extra {
		cfg += "; " + e
	}
	h.must("zonecfg", "-z", name, cfg)
	switch state {
	case "configured":
		return
	case "incomplete":
		h.must("zoneadm", "-z", name, "install")
		h.must("zoneadm", "-z", name, "mark", "incomplete")
		return
	}
	h.must("zoneadm", "-z", name, "install")
	switch state {
	case "ready":
		h.must("zoneadm", "-z", name, "ready")
	case "running":
		h.must("zoneadm", "-z", name, "boot")
	}
	if got := h.zoneState(name); got != state {
		h.t.Fatalf("setup %s: state %s, want %s", name, got, state)
	}
}

// withZonesDataset makes /zones a ZFS mountpoint so install creates
// per-zone datasets.
func (h *simHost) withZonesDataset() {
	h.t.Helper()
	h.must("zfs", "create", "-o", "mountpoint=/zones", "tank/zones")
}

// manifest is an SMF manifest for one default instance.
func manifest(name, start, stop string, enabled bool) string {
	stopXML := ""
	if stop != "" {
		stopXML = fmt.Sprintf("    <exec_method type='method' name='stop' exec='%s' timeout_seconds='10'/>\n", xmlAttr(stop))
	}
	start = xmlAttr(start)
	return fmt.Sprintf(`<?xml version="1.0"?>
<!DOCTYPE service_bundle SYSTEM "/usr/share/lib/xml/dtd/service_bundle.dtd.1">
<service_bundle type='manifest' name='%[1]s'>
  <service name='site/%[1]s' type='service' version='1'>
    <create_default_instance enabled='%[4]t'/>
    <single_instance/>
    <exec_method type='method' name='start' exec='%[2]s' timeout_seconds='60'/>
%[3]s  </service>
</service_bundle>
`, name, start, stopXML, enabled)
}

// runBare runs "illumos-sim CMD ARGS" with no root configured anywhere.
func runBare(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := exec.Command(simtest.Bin(t), args...)
	c.Env = cleanEnv()
	out, err := c.CombinedOutput()
	return string(out), err
}

// xmlAttr escapes a value for a single-quoted XML attribute.
func xmlAttr(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
