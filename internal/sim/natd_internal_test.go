package sim

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// The daemon holds the node's natd lock for as long as it runs, through
// garbage collections: a lock released early lets the next ipnat start a
// second daemon beside the first, which nothing stops.
func TestNatdHoldsItsLockThroughGarbageCollection(t *testing.T) {
	h, err := openHost(filepath.Join(t.TempDir(), "node1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(h.root, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { done <- runNatd([]string{h.root}, io.Discard) }()
	deadline := time.Now().Add(10 * time.Second)
	for !natdRunning(h) {
		if time.Now().After(deadline) {
			t.Fatal("natd never took its lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		runtime.GC() // finalizers of what the daemon no longer references run after it
		time.Sleep(50 * time.Millisecond)
	}
	if !natdRunning(h) {
		t.Error("natd's lock was released while it runs: a second natd would start")
	}
	// A second daemon for the node finds the lock taken and leaves at once.
	second := make(chan int, 1)
	go func() { second <- runNatd([]string{h.root}, io.Discard) }()
	select {
	case code := <-second:
		second = nil
		if code != 0 {
			t.Errorf("second natd: exit %d, want 0", code)
		}
	case <-time.After(2 * time.Second):
		t.Error("a second natd runs beside the first")
	}
	// The daemon leaves when its node is removed.
	if err := os.RemoveAll(h.zonesDir()); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []chan int{done, second} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("natd did not stop when its node went away")
		}
	}
}
