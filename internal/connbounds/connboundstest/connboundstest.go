// Package connboundstest checks a server's connection cap from outside,
// as clients that connect and stall would meet it (tests only).
package connboundstest

import (
	"net"
	"os"
	"testing"
)

// OpenFiles counts this process's file descriptors.
func OpenFiles(t testing.TB) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count open files: %v", err)
	}
	return len(fds)
}

// StalledClientsAreCapped opens stalled connections to addr, a server
// in this process capped at limit connections, that never send a byte;
// then served must still get an answer (with credentials), and the
// server must hold at most limit descriptors for them.
func StalledClientsAreCapped(t *testing.T, addr string, limit, stalled int, served func()) {
	t.Helper()
	before := OpenFiles(t)
	for i := range stalled {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
	}
	served()
	// Ours are the stalled clients' descriptors; the server's are at
	// most the limit, with room for a few of the runtime's.
	if got, bound := OpenFiles(t)-before, stalled+limit+16; got > bound {
		t.Fatalf("%d stalled clients opened %d descriptors in this process; want at most %d (the server's bounded by %d)", stalled, got, bound, limit)
	}
}
