package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
)

func TestRequestsAreBoundedButWatchesAreNot(t *testing.T) {
	handlerEnded := make(chan error, 1)
	slow := api.ReadyCheck{Name: "slow", Check: func(ctx context.Context) error {
		<-ctx.Done()
		handlerEnded <- context.Cause(ctx)
		return ctx.Err()
	}}
	c := serveConfig(t, pgtest.NewDatabase(t), api.Config{Ready: []api.ReadyCheck{slow},
		RequestTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond})

	// A handler that runs too long: its context ends, the client gets a Status.
	start := time.Now()
	r := c.json("GET", "/readyz", nil)
	var st model.Status
	if err := json.Unmarshal(r.body, &st); err != nil || r.code != http.StatusServiceUnavailable || st.Kind != "Status" || st.Reason != "Timeout" {
		t.Fatalf("want a 503 Timeout Status, got %d %s", r.code, r.body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the request took %s", took)
	}
	select {
	case err := <-handlerEnded:
		if err == nil {
			t.Fatal("the handler's context did not end")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}

	// A normal request still works.
	if r := c.json("POST", "/api/v1/namespaces", `{"metadata":{"name":"bounded"}}`); r.code != http.StatusCreated {
		t.Fatalf("create namespace: %d %s", r.code, r.body)
	}

	// A watch outlives the request timeout.
	resp, err := c.http.Get(c.base + "/api/v1/namespaces?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	deadline := time.Now().Add(4 * 300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if !lines.Scan() {
			t.Fatalf("the watch ended after %s: %v", time.Since(deadline.Add(-1200*time.Millisecond)), lines.Err())
		}
	}
}

func TestAClientThatStallsItsBodyIsCutOff(t *testing.T) {
	c := serveConfig(t, pgtest.NewDatabase(t), api.Config{BodyTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = conn.Write([]byte("POST /api/v1/namespaces HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"metadata\":"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body after %s: %v", time.Since(start), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("stalled body: %d after %s, want 408 soon after the body timeout", resp.StatusCode, time.Since(start))
	}
	// The server closes the connection: nothing more is read from it.
	buf := make([]byte, 1)
	if _, err := conn.Read(buf); err == nil {
		t.Fatal("the connection stayed open")
	}
	if r := c.json("POST", "/api/v1/namespaces", `{"metadata":{"name":"after"}}`); r.code != http.StatusCreated {
		t.Fatalf("a normal request after the stalled one: %d %s", r.code, r.body)
	}
}

// A watch ends by itself, cleanly, as kube-apiserver's do: after its
// timeoutSeconds, capped at twice --min-request-timeout, or without one
// after between that and twice that. Drop the `case <-end.C` of watch
// (api/watch.go) to see each read wait until the client gives up.
func TestAWatchEndsAfterItsTime(t *testing.T) {
	c := serveConfig(t, pgtest.NewDatabase(t), api.Config{MinRequestTimeout: time.Second})
	for _, query := range []string{"timeoutSeconds=2", "timeoutSeconds=3600", "timeoutSeconds=0", ""} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/namespaces?watch=true&"+query, nil)
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"type":"ADDED"`) {
			t.Fatalf("watch?%s: %d %q, %v; want its events, then its end", query, resp.StatusCode, b, err)
		}
	}
	for _, bad := range []string{"-1", "x", "1.5"} {
		if r := c.json("GET", "/api/v1/namespaces?watch=true&timeoutSeconds="+bad, nil); r.code != http.StatusBadRequest || !strings.Contains(r.status().Message, "timeoutSeconds") {
			t.Errorf("timeoutSeconds=%s: %d %s, want 400 naming timeoutSeconds", bad, r.code, r.body)
		}
	}
}
