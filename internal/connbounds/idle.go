package connbounds

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Idle bounds a streaming request by its silence, as kubelet bounds exec
// and port-forward sessions: once nothing it counts (Writer, Conn) has
// carried a byte either way for its timeout, the request's context ends,
// which ends the handler (a reverse proxy closes an upgraded connection
// with it). Whatever the client sends that is counted keeps it open, its
// protocol's pings too.
type Idle struct {
	timeout time.Duration
	last    atomic.Int64 // when a byte was last counted, in Unix nanoseconds
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// NewIdle starts r's idle clock: serve it with the request returned, and
// call Stop once the handler returns.
func NewIdle(r *http.Request, timeout time.Duration) (*Idle, *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	i := &Idle{timeout: timeout, cancel: cancel, done: make(chan struct{})}
	i.touch()
	go i.watch()
	return i, r.WithContext(ctx)
}

// Stop ends the clock.
func (i *Idle) Stop() {
	i.once.Do(func() {
		close(i.done)
		i.cancel()
	})
}

func (i *Idle) touch() { i.last.Store(time.Now().UnixNano()) }

func (i *Idle) watch() {
	t := time.NewTimer(i.timeout)
	defer t.Stop()
	for {
		select {
		case <-i.done:
			return
		case <-t.C:
		}
		quiet := time.Since(time.Unix(0, i.last.Load()))
		if quiet >= i.timeout {
			i.cancel()
			return
		}
		t.Reset(i.timeout - quiet)
	}
}

// Writer counts what is written to w and, once it is taken over
// (Hijack), what its connection carries either way.
func (i *Idle) Writer(w http.ResponseWriter) http.ResponseWriter { return &idleWriter{w, i} }

// Conn counts what c carries either way.
func (i *Idle) Conn(c net.Conn) net.Conn { return &idleConn{c, i} }

type idleWriter struct {
	http.ResponseWriter
	idle *Idle
}

func (w *idleWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if n > 0 {
		w.idle.touch()
	}
	return n, err
}

func (w *idleWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return w.idle.Conn(c), brw, nil
}

// Unwrap lets http.ResponseController reach w's flush and deadlines.
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type idleConn struct {
	net.Conn
	idle *Idle
}

func (c *idleConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.idle.touch()
	}
	return n, err
}

func (c *idleConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.idle.touch()
	}
	return n, err
}
