package main

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zonewright/zonewright/internal/connbounds"
)

// Slow clients hold a connection instead of finishing a request: they
// stall in the TLS handshake or the headers, trickle or stall a body, or
// leave an answer unread. The server must let go of each within its
// bound, answering nothing worse than a 4xx, while the other requests
// keep being answered.

// slowKind is one way of holding a connection.
type slowKind struct {
	name string
	// bound is how long the server may hold such a client; the client
	// gives up (and it is a failure) at bound plus slowGrace.
	bound time.Duration
	hold  func(c *slowConn) (status int, err error)
}

// slowGrace is the room past a bound before a held client is a failure:
// the server checks its deadlines on a loaded machine.
const slowGrace = 20 * time.Second

var slowKinds = []slowKind{
	{"silent before TLS", connbounds.DefaultHeader, func(c *slowConn) (int, error) {
		return 0, c.waitClosed()
	}},
	{"headers a byte a second", connbounds.DefaultHeader, func(c *slowConn) (int, error) {
		if err := c.handshake(); err != nil {
			return 0, err
		}
		return 0, c.trickle("GET /api/v1/namespaces HTTP/1.1\r\nHost: "+c.host+"\r\nX-Slow: "+strings.Repeat("a", 120), time.Second)
	}},
	{"body stalled", connbounds.DefaultHeader + connbounds.DefaultBody, func(c *slowConn) (int, error) {
		if err := c.handshake(); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(c.conn, c.head("POST", "/api/v1/namespaces/fz/secrets", 400, true)+`{"metadata":`); err != nil {
			return 0, err
		}
		return c.answer()
	}},
	{"body stalled, no credentials", connbounds.DefaultHeader + connbounds.DefaultBody, func(c *slowConn) (int, error) {
		if err := c.handshake(); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(c.conn, c.head("POST", "/api/v1/namespaces/fz/pods", 400, false)+`{`); err != nil {
			return 0, err
		}
		return c.answer()
	}},
	{"body a byte every 300 ms", connbounds.DefaultHeader + connbounds.DefaultBody, func(c *slowConn) (int, error) {
		if err := c.handshake(); err != nil {
			return 0, err
		}
		body := `{"metadata":{"name":"slow"},"stringData":{"k":"` + strings.Repeat("v", 200) + `"}}`
		if _, err := io.WriteString(c.conn, c.head("POST", "/api/v1/namespaces/fz/secrets", len(body), true)); err != nil {
			return 0, err
		}
		if err := c.trickle(body, 300*time.Millisecond); err != nil {
			return 0, err
		}
		return c.answer()
	}},
	{"answer read 15 s late", connbounds.DefaultWrite, func(c *slowConn) (int, error) {
		if err := c.handshake(); err != nil {
			return 0, err
		}
		if _, err := io.WriteString(c.conn, c.head("GET", "/openapi/v3/api/v1", 0, true)); err != nil {
			return 0, err
		}
		time.Sleep(15 * time.Second)
		return c.answer()
	}},
}

// slowConn is one slow client's connection to the API.
type slowConn struct {
	conn  net.Conn
	raw   net.Conn
	host  string
	token string
	tls   *tls.Config
}

// head is a request's head; an authorised one carries the token.
func (c *slowConn) head(method, path string, length int, authorised bool) string {
	h := method + " " + path + " HTTP/1.1\r\nHost: " + c.host + "\r\nContent-Type: application/json\r\n"
	if length > 0 {
		h += fmt.Sprintf("Content-Length: %d\r\n", length)
	}
	if authorised {
		h += "Authorization: Bearer " + c.token + "\r\n"
	}
	return h + "\r\n"
}

func (c *slowConn) handshake() error {
	t := tls.Client(c.raw, c.tls)
	if err := t.Handshake(); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	c.conn = t
	return nil
}

// trickle sends s a byte at a time, every; a write the server refuses
// because it closed the connection ends it early, as it should.
func (c *slowConn) trickle(s string, every time.Duration) error {
	for i := range len(s) {
		if _, err := c.conn.Write([]byte{s[i]}); err != nil {
			if isTimeout(err) {
				return err
			}
			return nil // the server closed it: what a slow client should get
		}
		time.Sleep(every)
	}
	return nil
}

// answer reads the status of the server's answer, if it gave one.
func (c *slowConn) answer() (int, error) {
	resp, err := http.ReadResponse(bufio.NewReader(c.conn), nil)
	if err != nil {
		if isClosed(err) {
			return 0, nil
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// waitClosed waits for the server to close a connection the client
// never spoke on.
func (c *slowConn) waitClosed() error {
	_, err := c.raw.Read(make([]byte, 1))
	if err == nil || isClosed(err) {
		return nil
	}
	return err
}

// isClosed: the server ended the connection (the client's own deadline
// is not that).
func isClosed(err error) bool {
	return !isTimeout(err) && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// slowResult is what a slow client saw.
type slowResult struct {
	kind   string
	status int
	held   time.Duration
	err    error
}

// slowClients holds n connections at once, of every kind in turn, and
// returns what each saw.
func (t *target) slowClients(n int) []slowResult {
	u, err := url.Parse(t.base)
	if err != nil {
		return []slowResult{{kind: "setup", err: err}}
	}
	tr, _ := t.client.Transport.(*http.Transport)
	cfg := &tls.Config{ServerName: u.Hostname()}
	if tr != nil && tr.TLSClientConfig != nil {
		cfg = tr.TLSClientConfig.Clone()
		cfg.ServerName = u.Hostname()
	}
	out := make([]slowResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = hold(u.Host, t.token, cfg, slowKinds[i%len(slowKinds)], slowGrace)
		}()
	}
	wg.Wait()
	return out
}

// hold runs one slow client; one still held at its bound plus grace is a
// failure.
func hold(host, token string, cfg *tls.Config, k slowKind, grace time.Duration) slowResult {
	res := slowResult{kind: k.name}
	raw, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		res.err = err
		return res
	}
	defer raw.Close()
	start := time.Now()
	// The client's own deadline: past it the server held it too long.
	_ = raw.SetDeadline(start.Add(k.bound + grace))
	c := &slowConn{conn: raw, raw: raw, host: host, token: token, tls: cfg}
	res.status, res.err = k.hold(c)
	res.held = time.Since(start)
	if isTimeout(res.err) {
		res.err = fmt.Errorf("held for %s, past its bound of %s", res.held.Round(time.Second), k.bound)
	}
	return res
}

// slowFailures are the slow clients the server held past their bound or
// answered with a server error.
func slowFailures(results []slowResult) []string {
	var out []string
	for _, r := range results {
		switch {
		case r.err != nil:
			out = append(out, fmt.Sprintf("slow client (%s): %v", r.kind, r.err))
		case r.status >= 500:
			out = append(out, fmt.Sprintf("slow client (%s): answered %d", r.kind, r.status))
		}
	}
	return out
}

// slowSummary says, for each kind, how the server answered (0: it
// closed the connection) and the longest it held one.
func slowSummary(w io.Writer, results []slowResult) {
	for _, k := range slowKinds {
		answers := map[int]int{}
		var longest time.Duration
		for _, r := range results {
			if r.kind == k.name {
				answers[r.status]++
				longest = max(longest, r.held)
			}
		}
		fmt.Fprintf(w, "  slow: %-30s answers %v, held %s at most (bound %s)\n", k.name, answers, longest.Round(100*time.Millisecond), k.bound)
	}
}
