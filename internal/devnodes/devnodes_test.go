package devnodes

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestEachDataDirHasAPodRangeOfItsOwn(t *testing.T) {
	service := netip.MustParsePrefix("127.96.0.0/16")
	seen := map[string]string{}
	for i := range 8 {
		dir := fmt.Sprintf("/home/user%d/zonewright/.data", i)
		cidr := ClusterCIDROf(dir, service)
		if again := ClusterCIDROf(dir, service); again != cidr {
			t.Fatalf("%s: %s, then %s: the same directory must keep its range", dir, cidr, again)
		}
		p := netip.MustParsePrefix(cidr)
		if b := p.Addr().As4(); b[0] != 127 || b[1] < 128 || b[1] == 255 || p.Bits() != 16 {
			t.Fatalf("%s: %s, want 127.<128-254>.0.0/16", dir, cidr)
		}
		if other, ok := seen[cidr]; ok {
			t.Logf("%s and %s share %s (a hash collision)", dir, other, cidr)
		}
		seen[cidr] = dir
	}
	if len(seen) < 6 {
		t.Fatalf("8 data dirs got %d distinct ranges: %v", len(seen), seen)
	}
	// A range that overlaps the service range moves on.
	dir := "/srv/dev"
	taken := netip.MustParsePrefix(ClusterCIDROf(dir))
	if got := ClusterCIDROf(dir, taken); netip.MustParsePrefix(got).Overlaps(taken) {
		t.Fatalf("with %s taken, %s got %s", taken, dir, got)
	}
}

// A file rewritten while it is read (an agent's pid file at its restart)
// is never read empty or half written. (Write with os.WriteFile in
// writeRenamed to see empty reads.)
func TestARewrittenFileIsNeverReadEmpty(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.pid")
	if err := writeRenamed(file, []byte("100000\n")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			if err := writeRenamed(file, []byte(strconv.Itoa(100000+i)+"\n")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for reads := 0; ; reads++ {
		select {
		case <-done:
			return
		default:
		}
		b, err := os.ReadFile(file)
		if err != nil || len(b) != len("100000\n") {
			t.Fatalf("read %d: %q, %v", reads, b, err)
		}
	}
}

// What an agent started and left running when it was stopped (a zoneadm
// boot in flight) does not outlive Stop: it would bring its zone up after
// stop-all halted the node's zones. (Remove the process group's kill in
// stop to see the command outlive it.)
func TestStopEndsWhatTheAgentLeftRunning(t *testing.T) {
	dir := t.TempDir()
	childPid := filepath.Join(dir, "child.pid")
	agent := filepath.Join(dir, "agent")
	// An agent that exits on SIGTERM and leaves its command running.
	script := "#!/bin/sh\nsleep 300 &\necho $! > " + childPid + "\ntrap 'exit 0' TERM\nwait\n"
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// No simulator: the node's directory is made here, and stop-all does
	// nothing.
	if err := os.MkdirAll(filepath.Join(dir, "nodes", "node-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	ns, err := Start(t.Context(), Config{Count: 1, DataDir: filepath.Join(dir, "nodes"), Agent: agent, Sim: "/bin/true", APIURL: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for range 100 {
		if b, err := os.ReadFile(childPid); err == nil && len(b) > 1 {
			pid, _ = strconv.Atoi(string(b[:len(b)-1]))
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("the agent did not start its command")
	}
	ns.Stop()
	// Killed: gone, or a zombie not yet reaped by init.
	for range 40 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("the agent's command (pid %d) outlived Stop", pid)
}

// Every node's stop-all runs at once, so each is given its share of a
// machine-wide bound on the zones halted at once: 50 nodes halting 16
// each starved the zones' supervisors and a stop took minutes. (Drop the
// --at-once argument from stop's stop-all to see this fail.)
func TestTheNodesShareOneBoundOnZonesHaltedAtOnce(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "sim-calls")
	sim := filepath.Join(dir, "illumos-sim")
	// A simulator that records how stop-all is called.
	script := "#!/bin/sh\n[ \"$1\" = stop-all ] && echo \"$@\" >> " + calls + "\nexit 0\n"
	agent := filepath.Join(dir, "agent")
	if err := os.WriteFile(sim, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(agent, []byte("#!/bin/sh\ntrap 'exit 0' TERM\nwhile :; do sleep 1; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const nodes = 5
	for i := range nodes {
		if err := os.MkdirAll(filepath.Join(dir, "nodes", fmt.Sprintf("node-%d", i+1)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := Start(t.Context(), Config{Count: nodes, DataDir: filepath.Join(dir, "nodes"), Agent: agent, Sim: sim, APIURL: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ns.Stop()
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != nodes {
		t.Fatalf("stop-all ran %d times, want %d: %q", len(lines), nodes, lines)
	}
	total := 0
	for _, l := range lines {
		f := strings.Fields(l)
		i := slices.Index(f, "--at-once")
		if i < 0 || i+1 == len(f) {
			t.Fatalf("stop-all without a bound: %q", l)
		}
		n, err := strconv.Atoi(f[i+1])
		if err != nil || n < 1 {
			t.Fatalf("stop-all with a bad bound: %q", l)
		}
		total += n
	}
	if limit := max(nodes, haltsPerCPU*runtime.NumCPU()); total > limit {
		t.Fatalf("the nodes halt %d zones at once between them, more than %d", total, limit)
	}
}
