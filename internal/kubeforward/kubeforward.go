// Package kubeforward serves Kubernetes' port-forward protocol
// (portforward.k8s.io), as kubectl port-forward speaks it: one SPDY
// connection per kubectl session, either tunnelled in the binary messages
// of a WebSocket (subprotocol TunnelProtocol, what kubectl tries first) or
// upgraded from an HTTP/1.1 POST (Upgrade: SPDY/3.1, its fallback). For
// each local connection kubectl opens two streams, an error stream and a
// data stream, carrying the headers streamType, port and requestID; the
// server pairs them by requestID, connects the data stream to the pod's
// port through a Dialer, and writes why it could not (if so) on the error
// stream, as kubelet does.
package kubeforward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
)

const (
	// Protocol is the port-forward protocol kubectl negotiates.
	Protocol = "portforward.k8s.io"
	// TunnelProtocol is the WebSocket subprotocol of SPDY tunnelled in
	// WebSocket messages (client-go tools/portforward's tunnelling dialer).
	TunnelProtocol = "SPDY/3.1+" + Protocol

	// The stream headers (k8s.io/api/core/v1: StreamType, PortHeader,
	// PortForwardRequestIDHeader) and the stream types.
	headerStreamType = "streamType"
	headerPort       = "port"
	headerRequestID  = "requestID"
	streamTypeError  = "error"
	streamTypeData   = "data"

	// pairTimeout bounds the wait for a request's second stream
	// (kubelet's stream creation timeout).
	pairTimeout = 30 * time.Second
	// maxPairs bounds a session's connections, open or awaiting their
	// second stream: each holds a goroutine, and its node a session.
	maxPairs = 128
	// pingPeriod keeps idle sessions' connections alive through proxies
	// that drop silent ones; kubectl pings as often.
	pingPeriod = 10 * time.Second
	// maxMessage bounds one WebSocket message of the tunnel: a SPDY frame
	// (a 24-bit length) and its header, never more.
	maxMessage = 1<<24 + 8
)

// Dialer connects to the pod's port for one forwarded connection. Its
// error's text is what kubectl prints.
type Dialer func(ctx context.Context, port uint16) (net.Conn, error)

// IsTunnel reports whether r asks for port-forward tunnelled in a
// WebSocket.
func IsTunnel(r *http.Request) bool {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return false
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if strings.TrimSpace(p) == TunnelProtocol {
				return true
			}
		}
	}
	return false
}

// IsSPDY reports whether r asks for a SPDY upgrade.
func IsSPDY(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "SPDY/3.1")
}

// ServeTunnel accepts the WebSocket of r and serves the session in it
// until either end closes it. On failure to accept it has answered.
func ServeTunnel(w http.ResponseWriter, r *http.Request, dial Dialer) error {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{TunnelProtocol}})
	if err != nil {
		return err
	}
	if ws.Subprotocol() != TunnelProtocol {
		ws.Close(websocket.StatusPolicyViolation, "subprotocol "+TunnelProtocol+" required")
		return fmt.Errorf("port-forward: subprotocol %s required", TunnelProtocol)
	}
	ws.SetReadLimit(maxMessage)
	// Each SPDY write is a binary message, each message read is bytes of
	// SPDY frames: the tunnel has no framing of its own.
	conn := websocket.NetConn(r.Context(), ws, websocket.MessageBinary)
	s := newSession(r.Context(), dial)
	sc, err := spdy.NewServerConnectionWithPings(conn, s.received, pingPeriod)
	if err != nil {
		conn.Close()
		return fmt.Errorf("port-forward: %w", err)
	}
	s.serve(sc)
	return nil
}

// ServeSPDY upgrades r to SPDY (answering it itself, also when it
// cannot) and serves the session until either end closes it.
func ServeSPDY(w http.ResponseWriter, r *http.Request, dial Dialer) error {
	if _, err := httpstream.Handshake(r, w, []string{Protocol}); err != nil {
		return err // Handshake answered 403 with the protocols it speaks
	}
	s := newSession(r.Context(), dial)
	sc := spdy.NewResponseUpgraderWithPings(pingPeriod).UpgradeResponse(upgradeWriter{w}, r, s.received)
	if sc == nil {
		return errors.New("port-forward: the SPDY upgrade failed") // UpgradeResponse answered
	}
	s.serve(sc)
	return nil
}

// upgradeWriter sends the 101 as it is written: the SPDY upgrader writes
// it, then takes the connection over, and a writer that holds its header
// until the first write or flush (gin's) would never send it.
type upgradeWriter struct{ http.ResponseWriter }

func (w upgradeWriter) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w upgradeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// session is one kubectl port-forward: the streams of its connections.
type session struct {
	// ctx ends with the session: it ends the dials and connections.
	ctx     context.Context
	cancel  context.CancelFunc
	dial    Dialer
	streams chan httpstream.Stream

	mu    sync.Mutex
	pairs map[string]*pair
}

// pair is the two streams of one forwarded connection.
type pair struct {
	id                    string
	errStream, dataStream httpstream.Stream
	complete              chan struct{}
}

func newSession(ctx context.Context, dial Dialer) *session {
	ctx, cancel := context.WithCancel(ctx)
	return &session{ctx: ctx, cancel: cancel, dial: dial, streams: make(chan httpstream.Stream), pairs: map[string]*pair{}}
}

// received accepts or refuses (by resetting it) a stream the client
// opens, as kubelet does: a port and a known type are required.
func (s *session) received(st httpstream.Stream, _ <-chan struct{}) error {
	if _, err := streamPort(st.Headers()); err != nil {
		return err
	}
	switch t := st.Headers().Get(headerStreamType); t {
	case streamTypeError, streamTypeData:
	case "":
		return fmt.Errorf("%q header is required", headerStreamType)
	default:
		return fmt.Errorf("invalid stream type %q", t)
	}
	select {
	case s.streams <- st:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// streamPort is the port a stream's headers name.
func streamPort(h http.Header) (uint16, error) {
	v := h.Get(headerPort)
	if v == "" {
		return 0, fmt.Errorf("%q header is required", headerPort)
	}
	p, err := strconv.ParseUint(v, 10, 16)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("%q header %q is not a TCP port (1 to 65535)", headerPort, v)
	}
	return uint16(p), nil
}

// requestID is the stream's request: its header, or for clients that
// send none, derived from stream identifiers as kubelet does (the client
// opens a request's error stream, then its data stream, so the data
// stream's identifier is the error stream's plus two).
func requestID(st httpstream.Stream) string {
	if id := st.Headers().Get(headerRequestID); id != "" {
		return id
	}
	id := st.Identifier()
	if st.Headers().Get(headerStreamType) == streamTypeData {
		id -= 2
	}
	return strconv.FormatUint(uint64(id), 10)
}

// serve pairs the streams as they come until the connection closes, then
// closes what is left.
func (s *session) serve(sc httpstream.Connection) {
	var wg sync.WaitGroup
	defer func() {
		sc.Close() // resets the streams left
		s.cancel()
		wg.Wait()
	}()
	for {
		select {
		case <-sc.CloseChan():
			return
		case <-s.ctx.Done():
			return
		case st := <-s.streams:
			p, created, err := s.add(st)
			if err != nil {
				// A second stream of one type, or one too many
				// requests: the client is told on its error stream if
				// it has one.
				switch {
				case p == nil && st.Headers().Get(headerStreamType) == streamTypeError:
					// Closed, not reset: the message is read to its end.
					fmt.Fprintf(st, "error processing stream for request %s: %v", requestID(st), err)
					st.Close()
					continue
				case p != nil && p.errStream != nil:
					fmt.Fprintf(p.errStream, "error processing stream for request %s: %v", p.id, err)
				}
				st.Reset()
				continue
			}
			if created {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.run(sc, p)
				}()
			}
		}
	}
}

// add files st under its request, reporting whether the request is new.
func (s *session) add(st httpstream.Stream) (*pair, bool, error) {
	id := requestID(st)
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pairs[id]
	if !ok && len(s.pairs) >= maxPairs {
		return nil, false, fmt.Errorf("the session has %d connections open or opening, the most it may", maxPairs)
	}
	if !ok {
		p = &pair{id: id, complete: make(chan struct{})}
		s.pairs[id] = p
	}
	switch st.Headers().Get(headerStreamType) {
	case streamTypeError:
		if p.errStream != nil {
			return p, false, errors.New("error stream already received")
		}
		p.errStream = st
	case streamTypeData:
		if p.dataStream != nil {
			return p, false, errors.New("data stream already received")
		}
		p.dataStream = st
	}
	if p.errStream != nil && p.dataStream != nil {
		close(p.complete)
	}
	return p, !ok, nil
}

// run waits for the pair's streams, then forwards the connection.
func (s *session) run(sc httpstream.Connection, p *pair) {
	defer func() {
		s.mu.Lock()
		delete(s.pairs, p.id)
		s.mu.Unlock()
	}()
	select {
	case <-p.complete:
	case <-time.After(pairTimeout):
		s.mu.Lock()
		es, ds := p.errStream, p.dataStream
		s.mu.Unlock()
		if es != nil {
			fmt.Fprintf(es, "timed out waiting for the streams of request %s", p.id)
			es.Close()
		}
		for _, st := range []httpstream.Stream{es, ds} {
			if st != nil {
				st.Reset()
				sc.RemoveStreams(st)
			}
		}
		return
	case <-s.ctx.Done():
		return
	}
	defer sc.RemoveStreams(p.errStream, p.dataStream)
	defer p.dataStream.Close()
	defer p.errStream.Close()
	port, _ := streamPort(p.dataStream.Headers()) // received checked it
	pod, err := s.dial(s.ctx, port)
	if err != nil {
		fmt.Fprintf(p.errStream, "error forwarding port %d: %v", port, err)
		return
	}
	join(p.dataStream, pod, s.ctx.Done())
}

// join carries the bytes between the data stream and the pod's
// connection until either ends (the pod's connection carries no
// half-close), then closes both.
func join(data io.ReadWriteCloser, pod net.Conn, stop <-chan struct{}) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(pod, data); done <- struct{}{} }()
	go func() { _, _ = io.Copy(data, pod); done <- struct{}{} }()
	select {
	case <-done:
	case <-stop:
	}
	pod.Close()
	data.Close()
}
