package execstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/coder/websocket"

	"github.com/zonewright/zonewright/internal/model"
)

// Session is an exec session a client opened.
type Session struct {
	conn *websocket.Conn
}

// Dial opens an exec session at url (https://…/exec?command=…, as the API
// serves it) with client, which carries the caller's credentials (nil:
// http.DefaultClient), and header added to the upgrade request. An answer
// other than the upgrade is an error carrying the Status message the
// server gave.
func Dial(ctx context.Context, client *http.Client, url string, header http.Header) (*Session, error) {
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: client, HTTPHeader: header,
		Subprotocols: []string{Subprotocol}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, Refusal(resp)
		}
		return nil, fmt.Errorf("exec: %w", err)
	}
	if conn.Subprotocol() != Subprotocol {
		conn.Close(websocket.StatusProtocolError, "subprotocol "+Subprotocol+" expected")
		return nil, fmt.Errorf("exec: the server does not speak %s", Subprotocol)
	}
	conn.SetReadLimit(readLimit)
	return &Session{conn: conn}, nil
}

// RefusedError is a server's refusal of the upgrade: its HTTP code and the
// message of the Status it answered.
type RefusedError struct {
	Code    int
	Message string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// Refusal is the error of a server's refusal of an upgrade.
func Refusal(resp *http.Response) error {
	e := &RefusedError{Code: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
	if resp.Body != nil {
		var st struct{ Message string }
		if b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); err == nil && json.Unmarshal(b, &st) == nil && st.Message != "" {
			e.Message = st.Message
		}
	}
	return e
}

// Run relays the session until the command ends and returns its exit
// code: stdin (nil: none) is sent and then closed with a close message,
// stdout and stderr receive the command's output (with a terminal both
// arrive on stdout), resize sends each size it yields (nil: none). An
// error means the command did not run to an exit, or the connection
// failed. Run closes the session.
func (s *Session) Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, resize <-chan Size) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer s.conn.CloseNow()
	sendErr := make(chan error, 2)
	if stdin != nil {
		go func() { sendErr <- s.sendStdin(ctx, stdin) }()
	}
	if resize != nil {
		go s.sendResizes(ctx, resize)
	}
	for {
		typ, data, err := s.conn.Read(ctx)
		if err != nil {
			select {
			case serr := <-sendErr:
				if serr != nil {
					return 0, serr
				}
			default:
			}
			return 0, fmt.Errorf("exec: the session ended without an exit status: %w", err)
		}
		if typ != websocket.MessageBinary || len(data) == 0 {
			continue
		}
		switch data[0] {
		case ChannelStdout:
			if _, err := stdout.Write(data[1:]); err != nil {
				return 0, fmt.Errorf("exec: write stdout: %w", err)
			}
		case ChannelStderr:
			w := stderr
			if w == nil {
				w = stdout
			}
			if _, err := w.Write(data[1:]); err != nil {
				return 0, fmt.Errorf("exec: write stderr: %w", err)
			}
		case ChannelStatus:
			var st model.Status
			if err := json.Unmarshal(data[1:], &st); err != nil {
				return 0, fmt.Errorf("exec: unreadable exit status: %w", err)
			}
			code, err := ExitCode(st)
			if err == nil {
				s.conn.Close(websocket.StatusNormalClosure, "")
			}
			return code, err
		}
	}
}

// sendStdin sends stdin in messages of at most MaxData bytes, then the
// close message of channel 0.
func (s *Session) sendStdin(ctx context.Context, stdin io.Reader) error {
	buf := make([]byte, MaxData+1)
	for {
		n, err := stdin.Read(buf[1:])
		if n > 0 {
			buf[0] = ChannelStdin
			if werr := s.conn.Write(ctx, websocket.MessageBinary, buf[:1+n]); werr != nil {
				return nil // the read loop reports the connection's end
			}
		}
		if errors.Is(err, io.EOF) {
			_ = s.conn.Write(ctx, websocket.MessageBinary, []byte{ChannelClose, ChannelStdin})
			return nil
		}
		if err != nil {
			return fmt.Errorf("exec: read stdin: %w", err)
		}
	}
}

func (s *Session) sendResizes(ctx context.Context, resize <-chan Size) {
	for {
		select {
		case <-ctx.Done():
			return
		case sz, ok := <-resize:
			if !ok {
				return
			}
			if s.conn.Write(ctx, websocket.MessageBinary, resizeFrame(sz)) != nil {
				return
			}
		}
	}
}
