package controlplane

import (
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// openFiles counts this process's file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count open files: %v", err)
	}
	return len(fds)
}

// Clients that connect and send half a request hold at most
// MaxConnections of the server's descriptors, are closed after the
// header timeout, and a well-formed request is served once they are.
func TestStalledConnectionsAreBoundedAndTimedOut(t *testing.T) {
	const limit, stalled = 8, 64
	cfg := testConfig(t)
	cfg.APITLS.InsecureHTTP = true
	cfg.MaxConnections = limit
	cfg.HeaderTimeout = time.Second
	cp, _ := start(t, cfg)
	client := &http.Client{Timeout: 60 * time.Second}
	if resp, err := client.Get(cp.URL() + "/healthz"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	client.CloseIdleConnections()
	before := openFiles(t)

	conns := make([]net.Conn, stalled)
	for i := range conns {
		c, err := net.Dial("tcp", cp.Addr())
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the server accepts what it will
	// Ours are the stalled clients' descriptors; the server's are at most
	// the limit, plus room for the database connections it may open.
	if got, bound := openFiles(t)-before, stalled+limit+32; got > bound {
		t.Fatalf("%d stalled clients opened %d descriptors in this process; want at most %d (the server's bounded by %d)", stalled, got, bound, limit)
	}

	resp, err := client.Get(cp.URL() + "/healthz")
	if err != nil {
		t.Fatalf("a well-formed request behind %d stalled connections: %v", stalled, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %d", resp.StatusCode)
	}
	// Every stalled connection was closed by the server.
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("stalled connection %d is still open: %v", i, err)
		}
	}
}
