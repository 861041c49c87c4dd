package controlplane

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/pki"
)

// raiseOpenFiles lets this process hold n more descriptors than it does,
// as far as its hard limit allows.
func raiseOpenFiles(t *testing.T, n int) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if want := uint64(openFiles(t) + n); lim.Cur < want {
		was := lim
		lim.Cur = min(want, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was) })
	}
	if lim.Cur < uint64(openFiles(t)+n) {
		t.Skipf("this process may open %d files, too few for %d more", lim.Cur, n)
	}
}

// As many clients with no credentials as the API holds connections
// connect and stall, their handshakes given all the time they want: the
// API still answers a client with credentials and a probe of /readyz,
// each held connection past MaxUnauthenticated having closed the one that
// waited longest. (Make the listener in connbounds a plain
// netutil.LimitListener, without its unauthenticated list, to see both
// wait in the accept queue until the client gives up.)
func TestConnectionsWithoutCredentialsDoNotKeepOutThoseWith(t *testing.T) {
	held := DefaultMaxConnections
	raiseOpenFiles(t, 2*held+256) // this process is the clients and the server
	cfg := testConfig(t)
	cfg.HeaderTimeout = 10 * time.Minute
	cp, _ := start(t, cfg)
	tlsConfig, err := pki.ClientTLS(CAFile(cfg.StateDir), "", "")
	if err != nil {
		t.Fatal(err)
	}

	conns := make([]net.Conn, 0, held)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range held {
		c, err := net.Dial("tcp", cp.Addr())
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
	}

	get := func(client *http.Client, path string) (int, error) {
		resp, err := client.Get(cp.URL() + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	// Generous, as the server accepts every held connection first, yet
	// shorter than the 2 minutes after which the held handshakes time
	// out (the write bound caps a handshake's too).
	authed := &http.Client{Timeout: time.Minute,
		Transport: auth.Bearer{Token: cp.AdminToken(), Next: &http.Transport{TLSClientConfig: tlsConfig}}}
	if code, err := get(authed, "/api/v1/namespaces"); err != nil || code != http.StatusOK {
		t.Fatalf("GET namespaces with a token behind %d held connections: %d %v", held, code, err)
	}
	probe := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	if code, err := get(probe, "/readyz"); err != nil || code == 0 {
		t.Fatalf("GET /readyz behind %d held connections: %d %v", held, code, err)
	}
	// The server closed the held connections that waited longest.
	_ = conns[0].SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := bufio.NewReader(conns[0]).ReadByte(); err == nil {
		t.Fatal("the first held connection got a byte; want it closed")
	}
}
