package portforward

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A pod's port that answers and closes ends the forwarded stream cleanly:
// the client reads the answer and then the end, never an error, however
// Join's two copies interleave. (Return the plain NetConn from Accept to
// see "failed to read frame header: EOF" in some of the rounds.)
func TestAClosedPortEndsTheStreamCleanly(t *testing.T) {
	pod, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pod.Close()
	go func() {
		for {
			c, err := pod.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "answered\n")
			c.Close()
		}
	}()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client, err := Accept(w, r)
		if err != nil {
			return
		}
		backend, err := net.Dial("tcp", pod.Addr().String())
		if err != nil {
			client.Close()
			return
		}
		Join(client, backend, nil)
	}))
	defer srv.Close()
	// Many at once, so the scheduler interleaves the closes every way.
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := Dial(context.Background(), srv.Client(), strings.Replace(srv.URL, "http://", "ws://", 1))
			if err != nil {
				t.Error(err)
				return
			}
			got, err := io.ReadAll(conn)
			conn.Close()
			if err != nil || string(got) != "answered\n" {
				t.Errorf("connection %d: %q, %v", i, got, err)
			}
		}()
	}
	wg.Wait()
}
