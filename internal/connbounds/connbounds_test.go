package connbounds_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/connbounds"
)

// serve runs a server held to b whose handler authenticates a request
// that says "Authorization: yes".
func serve(t *testing.T, b connbounds.Bounds) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := b.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "yes" {
			connbounds.Authenticated(r)
		}
		io.WriteString(w, "ok")
	}), nil, nil)
	go func() { _ = srv.Serve(b.Listener(ln)) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// ask sends a request on c and reads its answer.
func ask(c net.Conn, r *bufio.Reader, auth string) error {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: "+auth+"\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// closed says whether the server closed c before the generous wait ran
// out.
func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Connections past MaxUnauthenticated close the ones not yet
// authenticated that waited longest; an authenticated connection stays.
// (Make Authenticated return at once to see the authenticated connection
// closed with the others.)
func TestTheLongestWaitingUnauthenticatedConnectionsMakeRoom(t *testing.T) {
	const room = 2
	addr := serve(t, connbounds.Bounds{MaxUnauthenticated: room, Header: time.Minute})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	authed := dial()
	authedR := bufio.NewReader(authed)
	if err := ask(authed, authedR, "yes"); err != nil {
		t.Fatal(err)
	}
	var stalled []net.Conn
	for range 3 * room {
		stalled = append(stalled, dial())
	}
	if err := ask(authed, authedR, "yes"); err != nil {
		t.Fatalf("the authenticated connection, after %d stalled ones: %v", len(stalled), err)
	}
	for i, c := range stalled[:len(stalled)-room] {
		if !closed(c) {
			t.Errorf("stalled connection %d of %d is still open, past the %d that may wait", i, len(stalled), room)
		}
	}
	// The newest ones wait on; a request without credentials is answered.
	last := stalled[len(stalled)-1]
	if err := ask(last, bufio.NewReader(last), "no"); err != nil {
		t.Fatalf("the newest stalled connection: %v", err)
	}
}
