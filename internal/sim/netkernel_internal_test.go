package sim

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// A thread inNetns sent into another namespace is never the main thread,
// whose namespace /proc/PID/ns/net names: with one P, the goroutine that
// enters would otherwise run on the main thread while the main goroutine
// waits, and the runtime keeps a main thread it cannot end. Delete the
// init of netkernel.go that locks the main goroutine to see it fail.
func TestEnteringANamespaceLeavesTheProcesssOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("entering a network namespace needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip(err)
	}
	name := "zwenter" + filepath.Base(t.TempDir())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot make a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	other := "/run/netns/" + name

	own, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for range 20 {
		if err := inNetns(other, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		now, err := os.Stat("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(own, now) {
			t.Fatalf("after entering %s from a goroutine, the process's own namespace (/proc/self/ns/net) is %s's", other, other)
		}
	}
}
