package sim

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// A block whose host is gone is given again only once no process runs as
// one of its ids: a zone's process left running (its host's state root
// removed under it) keeps its block from the next zone, which could
// otherwise signal it and read its /proc files. A block whose host is
// still there is never taken.
//
// Drop the busy check in takeZoneUIDBlock to see the first take reuse
// the held block.
func TestAGoneHostsBlockIsReusedOnlyOnceNoProcessHoldsIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting a process as a zone's uid needs root")
	}
	dir := t.TempDir()
	const base = 2000000
	first := uint32(firstZoneUIDBlock(base))
	// The first block's host is gone; its process still runs.
	if err := os.Symlink(filepath.Join(dir, "gone-host"), filepath.Join(dir, strconv.Itoa(int(first)))); err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: first + 1000, Gid: first + 1000}}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleep.Process.Kill()
	live := t.TempDir() // a host that is still there holds the second block
	if err := os.Symlink(live, filepath.Join(dir, strconv.Itoa(int(first)+zoneUIDBlock))); err != nil {
		t.Fatal(err)
	}

	got, err := takeZoneUIDBlock(dir, "/new-host", base)
	if err != nil {
		t.Fatal(err)
	}
	if want := first + 2*zoneUIDBlock; got != want {
		t.Fatalf("with a process still running in the gone host's block, took %d, want the next free %d", got, want)
	}
	_ = sleep.Process.Kill()
	_ = sleep.Wait()
	if got, err = takeZoneUIDBlock(dir, "/newer-host", base); err != nil || got != first {
		t.Fatalf("once its process ended, took %d (%v), want the gone host's %d again", got, err, first)
	}
	if to, _ := os.Readlink(filepath.Join(dir, strconv.Itoa(int(first)))); to != "/newer-host" {
		t.Errorf("the reused block names %q, want its new host", to)
	}
	if err := releaseZoneUIDBlock(dir, "/someone-else", first); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, strconv.Itoa(int(first)))); err != nil {
		t.Errorf("another host's release gave the block away: %v", err)
	}
}
