package controlplane

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/connbounds/connboundstest"
)

// openFiles counts this process's file descriptors.
func openFiles(t *testing.T) int { return connboundstest.OpenFiles(t) }

// Clients that connect and send half a request hold at most
// MaxConnections of the server's descriptors, are closed after the
// header timeout, and a well-formed request is served once they are.
func TestStalledConnectionsAreBoundedAndTimedOut(t *testing.T) {
	const limit, stalled = 8, 64
	cfg := testConfig(t)
	cfg.APITLS.InsecureHTTP = true
	// Every one may wait to be authenticated: the total cap and the
	// header timeout are what this test looks at.
	cfg.MaxConnections, cfg.MaxUnauthenticated = limit, limit
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

// Requests without credentials cannot hold connections: not by looking
// like a stream (?watch=true on a POST, a volume transfer whose body never
// comes), nor by keeping the connection after their 401. They are closed
// within the header and body timeouts, and a well-formed request is then
// served, though they filled every connection. An authenticated watch
// outlives those timeouts. Remove ReadTimeout from the http.Server in
// Start to see the transfers' connections held.
func TestUnauthenticatedRequestsCannotHoldConnections(t *testing.T) {
	const limit = 8
	cfg := testConfig(t)
	cfg.APITLS.InsecureHTTP = true
	// Every one may wait to be authenticated: the timeouts, not the
	// unauthenticated cap, are what this test looks at.
	cfg.MaxConnections, cfg.MaxUnauthenticated = limit, limit
	cfg.HeaderTimeout, cfg.BodyTimeout = time.Second, time.Second
	cp, _ := start(t, cfg)

	stalls := []string{
		"POST /healthz?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nab",
		"PUT /api/v1/volumetransfers/x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nab",
		"GET /api/v1/namespaces?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
	}
	conns := make([]net.Conn, limit)
	for i := range conns {
		c, err := net.Dial("tcp", cp.Addr())
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, stalls[i%len(stalls)]); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if b, err := io.ReadAll(c); err != nil {
			t.Errorf("connection %d (%q) is still open after 10 s (read %q): %v", i, strings.SplitN(stalls[i%len(stalls)], " HTTP", 2)[0], b, err)
		}
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(cp.URL() + "/healthz")
	if err != nil {
		t.Fatalf("a well-formed request after %d unauthenticated ones: %v", limit, err)
	}
	resp.Body.Close()

	// An authenticated watch lasts past the header and body timeouts.
	req, _ := http.NewRequest("GET", cp.URL()+"/api/v1/namespaces?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+cp.AdminToken())
	watch, err := (&http.Client{}).Do(req)
	if err != nil || watch.StatusCode != http.StatusOK {
		t.Fatalf("watch namespaces: %v %v", watch, err)
	}
	defer watch.Body.Close()
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(watch.Body)
		for sc.Scan() {
			events <- sc.Text()
		}
		close(events)
	}()
	time.Sleep(3 * time.Second)
	create, _ := http.NewRequest("POST", cp.URL()+"/api/v1/namespaces", strings.NewReader(`{"metadata":{"name":"late"}}`))
	create.Header.Set("Authorization", "Bearer "+cp.AdminToken())
	create.Header.Set("Content-Type", "application/json")
	if resp, err := client.Do(create); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create namespace: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("the authenticated watch ended before the namespace it waited for")
			}
			if strings.Contains(e, `"late"`) {
				return
			}
		case <-deadline:
			t.Fatal("the authenticated watch saw no namespace 3 s in")
		}
	}
}

// watch=true on a GET of one object is no watch: its connection, its body
// stalled, is cut off by the body timeout though its caller is
// authenticated. (Drop `&& lists.match(r.URL.Path)` in api's streams to
// see its deadlines lifted and the connection held.)
func TestWatchTrueOnOneObjectIsBoundedAsAnyRequest(t *testing.T) {
	cfg := testConfig(t)
	cfg.APITLS.InsecureHTTP = true
	cfg.HeaderTimeout, cfg.BodyTimeout = time.Second, time.Second
	cp, _ := start(t, cfg)
	conn, err := net.Dial("tcp", cp.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, "GET /api/v1/namespaces/default?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+cp.AdminToken()+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":")
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("GET of one namespace with watch=true, its body stalled: the connection is still open after 30 s (read %q): %v", b, err)
	}
	if !strings.HasPrefix(string(b), "HTTP/1.1 408") {
		t.Fatalf("GET of one namespace with watch=true, its body stalled: %q, want a 408", b)
	}
}

// A negative stream bound is refused by name rather than quietly taken
// for the default (drop either check in Start to see it start).
func TestNegativeStreamBoundsAreRefused(t *testing.T) {
	t.Parallel()
	for flag, cfg := range map[string]Config{
		"--min-request-timeout":               {MinRequestTimeout: -time.Second},
		"--streaming-connection-idle-timeout": {StreamIdleTimeout: -time.Minute},
	} {
		cfg.StateDir = t.TempDir()
		cfg.Listen = "127.0.0.1:0"
		cp, err := Start(context.Background(), cfg)
		if err == nil {
			_ = cp.Stop(context.Background())
			t.Fatalf("%s negative: started", flag)
		}
		if !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "negative") {
			t.Errorf("%s negative: %v, want a refusal naming the flag", flag, err)
		}
	}
}
