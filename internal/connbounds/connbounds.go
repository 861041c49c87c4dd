// Package connbounds bounds the connections of zonewright's HTTP servers
// (the API, a node's endpoint, the admin Web UI): how long a client may
// take to send its request's headers and body, to take its answer, to
// stay idle; how many connections are held at once; and how many of those
// may be held by clients not yet authenticated. A streaming route is
// freed of the read and write deadlines only once its caller is
// authenticated and authorised (Stream); one that may sit silent is
// bounded by its idleness instead (Idle).
package connbounds

import (
	"container/list"
	"context"
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// Defaults of Bounds.
const (
	DefaultHeader         = 10 * time.Second
	DefaultBody           = 30 * time.Second
	DefaultWrite          = 2 * time.Minute
	DefaultIdle           = 2 * time.Minute
	DefaultMaxConnections = 4096
)

// Bounds are a server's bounds; a zero field takes its default.
type Bounds struct {
	// Header is how long a connection may take to send its request
	// headers, its TLS handshake included.
	Header time.Duration
	// Body is how long a request's body may take once its headers are
	// in: the read deadline is Header + Body from the request's start.
	Body time.Duration
	// Write is how long a request that does not stream may take, from
	// its headers read to its answer written.
	Write time.Duration
	// Idle is how long a kept-alive connection may wait for its next
	// request.
	Idle time.Duration
	// MaxConnections bounds the connections held open at once; those
	// past it wait in the kernel's accept queue, costing no descriptor.
	MaxConnections int
	// MaxUnauthenticated bounds those of them not authenticated yet
	// (Authenticated): a connection accepted past it closes the one
	// that has waited longest, so that clients who connect and stall
	// cannot keep out the clients who bring credentials. Zero: a quarter
	// of MaxConnections.
	MaxUnauthenticated int
}

func (b Bounds) withDefaults() Bounds {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&b.Header, DefaultHeader)
	def(&b.Body, DefaultBody)
	def(&b.Write, DefaultWrite)
	def(&b.Idle, DefaultIdle)
	if b.MaxConnections <= 0 {
		b.MaxConnections = DefaultMaxConnections
	}
	if b.MaxUnauthenticated <= 0 {
		b.MaxUnauthenticated = max(1, b.MaxConnections/4)
	}
	return b
}

// Server is an http.Server for h held to the bounds; serve it on a
// listener from Listener.
func (b Bounds) Server(h http.Handler, tlsConfig *tls.Config, errorLog *log.Logger) *http.Server {
	b = b.withDefaults()
	return &http.Server{Handler: h, TLSConfig: tlsConfig, ErrorLog: errorLog, MaxHeaderBytes: 64 << 10,
		ReadHeaderTimeout: b.Header, ReadTimeout: b.Header + b.Body, WriteTimeout: b.Write, IdleTimeout: b.Idle,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }}
}

// Listener caps the connections accepted on ln: MaxConnections in all,
// MaxUnauthenticated of them not yet authenticated.
func (b Bounds) Listener(ln net.Listener) net.Listener {
	b = b.withDefaults()
	return &listener{Listener: netutil.LimitListener(ln, b.MaxConnections), max: b.MaxUnauthenticated}
}

// Stream frees a request that streams by design (a watch, logs, an exec
// session, a transfer) of the read and write deadlines: call it once its
// caller is authenticated and authorised. The handler bounds it itself
// (a watch's time, Idle, stall detection, the client going away).
func Stream(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

// Authenticated counts the request's connection as authenticated: it no
// longer counts against MaxUnauthenticated, nor can it be closed to make
// room. Call it once the request's credentials are checked.
func Authenticated(r *http.Request) {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	for c != nil {
		if bc, ok := c.(*conn); ok {
			bc.authenticated()
			return
		}
		inner, ok := c.(interface{ NetConn() net.Conn }) // *tls.Conn
		if !ok {
			return
		}
		c = inner.NetConn()
	}
}

type connKey struct{}

// listener keeps the connections not yet authenticated in the order they
// came.
type listener struct {
	net.Listener
	max             int
	mu              sync.Mutex
	unauthenticated list.List // of *conn, oldest first
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	bc := &conn{Conn: c, l: l}
	l.mu.Lock()
	var evicted net.Conn
	if l.unauthenticated.Len() >= l.max {
		oldest := l.unauthenticated.Front().Value.(*conn)
		l.unauthenticated.Remove(oldest.waiting)
		oldest.waiting = nil
		evicted = oldest.Conn
	}
	bc.waiting = l.unauthenticated.PushBack(bc)
	l.mu.Unlock()
	if evicted != nil {
		// Its server goroutine sees the connection end and lets it go.
		_ = evicted.Close()
	}
	return bc, nil
}

// conn is an accepted connection; waiting is its place among those not
// yet authenticated, nil once it is (or was closed).
type conn struct {
	net.Conn
	l       *listener
	waiting *list.Element
}

func (c *conn) authenticated() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.waiting != nil {
		c.l.unauthenticated.Remove(c.waiting)
		c.waiting = nil
	}
}

func (c *conn) Close() error {
	c.authenticated() // leaves the waiting list
	return c.Conn.Close()
}
