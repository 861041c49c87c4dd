package execstream

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/coder/websocket"

	"github.com/zonewright/zonewright/internal/model"
)

// Server is the node's end of an exec session: Stdin yields what the
// client sends on channel 0 (EOF at its close message), Resizes the
// terminal sizes it asks for, Stdout and Stderr send the command's output,
// and Finish ends the session with how the command ended.
type Server struct {
	conn    *websocket.Conn
	ctx     context.Context
	cancel  context.CancelFunc
	stdinR  *io.PipeReader
	stdinW  *io.PipeWriter
	resizes chan Size
	once    sync.Once
}

// Accept upgrades the request to an exec session speaking Subprotocol or
// KubernetesSubprotocol. On failure it has answered the request itself.
func Accept(w http.ResponseWriter, r *http.Request) (*Server, error) {
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol, KubernetesSubprotocol}})
	if err != nil {
		return nil, err
	}
	if p := conn.Subprotocol(); p != Subprotocol && p != KubernetesSubprotocol {
		conn.Close(websocket.StatusPolicyViolation, "subprotocol "+Subprotocol+" or "+KubernetesSubprotocol+" required")
		return nil, io.ErrUnexpectedEOF
	}
	conn.SetReadLimit(readLimit)
	ctx, cancel := context.WithCancel(r.Context())
	pr, pw := io.Pipe()
	s := &Server{conn: conn, ctx: ctx, cancel: cancel, stdinR: pr, stdinW: pw, resizes: make(chan Size, 1)}
	go s.readLoop()
	return s, nil
}

// Context ends when the client goes away or the session is finished.
func (s *Server) Context() context.Context { return s.ctx }

// Stdin is the client's standard input. A write to the pipe waits for
// the command to read, so a client cannot make the node buffer its input.
func (s *Server) Stdin() io.Reader { return s.stdinR }

// Resizes yields the sizes the client asks for; only the newest waiting
// one is kept.
func (s *Server) Resizes() <-chan Size { return s.resizes }

// Stdout and Stderr send on their channels.
func (s *Server) Stdout() io.Writer { return channelWriter{s, ChannelStdout} }
func (s *Server) Stderr() io.Writer { return channelWriter{s, ChannelStderr} }

// Finish sends st and closes the session.
func (s *Server) Finish(st model.Status) {
	s.once.Do(func() {
		_ = s.conn.Write(s.ctx, websocket.MessageBinary, statusFrame(st))
		s.conn.Close(websocket.StatusNormalClosure, "")
		s.cancel()
		s.stdinR.Close()
	})
}

func (s *Server) readLoop() {
	defer s.cancel()
	defer s.stdinW.Close()
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
			s.stdinW.CloseWithError(io.ErrUnexpectedEOF)
			return
		}
		if typ != websocket.MessageBinary || len(data) == 0 {
			continue
		}
		switch data[0] {
		case ChannelStdin:
			if _, err := s.stdinW.Write(data[1:]); err != nil {
				// The command stopped reading; keep serving resizes and
				// noticing the client's departure.
				continue
			}
		case ChannelResize:
			sz, err := parseResize(data[1:])
			if err != nil || sz.Width == 0 || sz.Height == 0 {
				continue
			}
			select {
			case <-s.resizes:
			default:
			}
			s.resizes <- sz
		case ChannelClose:
			if len(data) > 1 && data[1] == ChannelStdin {
				s.stdinW.Close()
			}
		}
	}
}

type channelWriter struct {
	s  *Server
	ch byte
}

// Write sends p in messages of at most MaxData bytes.
func (w channelWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxData)]
		if err := w.s.conn.Write(w.s.ctx, websocket.MessageBinary, frame(w.ch, chunk)); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}
