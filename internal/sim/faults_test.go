package sim_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fault runs "illumos-sim fault ..." against the host.
func (h *simHost) fault(args ...string) {
	h.t.Helper()
	h.node().Run(h.t, "fault", args...)
}

func TestFaultLatency(t *testing.T) {
	h := newHost(t)
	h.fault("latency", "zfs list", "400ms")
	start := time.Now()
	h.must("zfs", "list")
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("zfs list took %v, want >= 400ms", d)
	}
	// A more specific key wins; other subcommands are not delayed.
	h.fault("latency", "zfs", "5s")
	h.fault("latency", "zfs create", "0s")
	start = time.Now()
	h.must("zfs", "create", "tank/fast")
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("zfs create took %v despite its own 0s latency", d)
	}
	h.fault("clear")

	// zoneadm install sleeps while the zone is incomplete.
	h.zoneSetup("web01", "configured")
	h.fault("latency", "zoneadm install", "1s")
	done := make(chan result, 1)
	go func() { done <- h.run("zoneadm", "-z", "web01", "install") }()
	waitFor(t, 5*time.Second, "incomplete during install", func() bool { return h.zoneState("web01") == "incomplete" })
	if r := <-done; r.code != 0 {
		t.Fatalf("install: %v", r)
	}
	if got := h.zoneState("web01"); got != "installed" {
		t.Errorf("after install: %s", got)
	}
}

func TestFaultFailNext(t *testing.T) {
	h := newHost(t)
	h.fault("fail-next", "dladm create-vnic", "2", "--stderr", "dladm: vnic creation over net0 failed: operation failed", "--exit", "1")
	for i := 0; i < 2; i++ {
		expect(t, h.run("dladm", "create-vnic", "-l", "net0", "v0"), 1, "", "dladm: vnic creation over net0 failed: operation failed\n")
	}
	expect(t, h.run("dladm", "show-vnic", "-p", "-o", "link"), 0, "", "")
	h.must("dladm", "create-vnic", "-l", "net0", "v0")

	// Concurrent callers share the counter: exactly N fail.
	h.fault("fail-next", "zfs create", "3")
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := h.run("zfs", "create", "tank/d"+string(rune('a'+i)))
			mu.Lock()
			defer mu.Unlock()
			if r.code != 0 {
				failed++
				if !strings.HasSuffix(r.stderr, ": Resource temporarily unavailable\n") {
					t.Errorf("default fail-next stderr: %q", r.stderr)
				}
			}
		}(i)
	}
	wg.Wait()
	if failed != 3 {
		t.Errorf("%d calls failed, want 3", failed)
	}

	// A brand exit status makes install fail the way the brand hook does.
	h.zoneSetup("z255", "configured")
	h.fault("fail-next", "zoneadm install", "1", "--brand-exit", "255")
	if r := h.run("zoneadm", "-z", "z255", "install"); r.code != 1 {
		t.Errorf("install with brand exit 255: %v", r)
	}
	if got := h.zoneState("z255"); got != "incomplete" {
		t.Errorf("after brand exit 255: %s, want incomplete", got)
	}
	h.zoneSetup("z254", "configured")
	h.fault("fail-next", "zoneadm install", "1", "--brand-exit", "254")
	h.run("zoneadm", "-z", "z254", "install")
	if got := h.zoneState("z254"); got != "configured" {
		t.Errorf("after brand exit 254: %s, want configured", got)
	}
}

func TestFaultProbabilityIsDeterministic(t *testing.T) {
	h := newHost(t)
	h.fault("seed", "7")
	pattern := func() string {
		h.fault("probability", "zfs list", "0.5")
		var b strings.Builder
		for i := 0; i < 16; i++ {
			r := h.run("zfs", "list", "-H", "-o", "name", "tank")
			switch {
			case r.code == 0:
				b.WriteByte('.')
			case r.code == 1 && r.stderr == "cannot list 'tank': Resource temporarily unavailable\n":
				b.WriteByte('x')
			default:
				t.Fatalf("unexpected result %v", r)
			}
		}
		return b.String()
	}
	a, b := pattern(), pattern()
	if a != b {
		t.Errorf("same seed, different failures:\n%s\n%s", a, b)
	}
	if !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Errorf("p=0.5 over 16 calls gave %s", a)
	}
	h.fault("seed", "8")
	if c := pattern(); c == a {
		t.Errorf("another seed gave the same sequence %s", c)
	}
}

func TestFaultHang(t *testing.T) {
	h := newHost(t)
	h.zoneSetup("web01", "installed")
	h.fault("hang", "zoneadm boot")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(h.bin, "zoneadm"), "-z", "web01", "boot")
	c.Env = cleanEnv()
	start := time.Now()
	err := c.Run()
	if err == nil || ctx.Err() == nil {
		t.Fatalf("hung boot returned on its own: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("killing the hung call took %v", d)
	}
	if got := h.zoneState("web01"); got != "installed" {
		t.Errorf("hung boot changed the state to %s", got)
	}
	h.fault("unhang", "zoneadm boot")
	h.must("zoneadm", "-z", "web01", "boot")
}

func TestFaultsFromEnvironment(t *testing.T) {
	h := newHost(t)
	env := []string{`ILLUMOS_SIM_FAULTS={"fail_next":{"zonecfg create web01":{"count":1,"stderr":"web01: injected","exit":9}}}`}
	expect(t, h.runEnv("", env, "zonecfg", "-z", "web01", "create"), 9, "", "web01: injected\n")
	h.must("zonecfg", "-z", "web01", "create; set zonepath=/z/web01")
}

func TestFaultStreamRate(t *testing.T) {
	h := newHost(t)
	h.must("zfs", "create", "-V", "4M", "tank/vol")
	f, err := os.OpenFile(h.fsPath("/dev/zvol/rdsk/tank/vol"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bytes.Repeat([]byte("data"), 1<<20))
	f.Close()
	h.must("zfs", "snapshot", "tank/vol@s")
	h.fault("stream-rate", "zfs send", "2M")
	start := time.Now()
	stream, stderr, code := h.runBytes(nil, "zfs", "send", "tank/vol@s")
	if code != 0 {
		t.Fatal(stderr)
	}
	// 4 MiB at 2 MiB/s: the last piece is due after 1.9 s.
	if d := time.Since(start); d < 1800*time.Millisecond {
		t.Errorf("a 4 MiB stream at 2M/s took %v", d)
	}
	h.fault("clear", "zfs send")
	if _, stderr, code := h.runBytes(stream, "zfs", "receive", "tank/copy"); code != 0 {
		t.Errorf("the throttled stream does not receive: %s", stderr)
	}
	// A receive reads at the rate: a slow disk holds its writer back.
	// (Drop throttleReader in zfs receive to see it fail.)
	h.fault("stream-rate", "zfs receive", "2M")
	start = time.Now()
	if _, stderr, code := h.runBytes(stream, "zfs", "receive", "tank/slow"); code != 0 {
		t.Errorf("a throttled receive fails: %s", stderr)
	}
	if d := time.Since(start); d < 1800*time.Millisecond {
		t.Errorf("a 4 MiB receive at 2M/s took %v", d)
	}
}
