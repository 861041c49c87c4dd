// Package portforward carries one TCP connection to a pod's port over a
// WebSocket (subprotocol Subprotocol, binary messages holding the bytes
// either way), as the API relays it from the client to the pod's node,
// which connects to the pod. A pod's address is reachable only from its
// node (and other pods): this is how a person reaches a pod's port from
// elsewhere.
package portforward

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"

	"github.com/zonewright/zonewright/internal/execstream"
)

// Subprotocol is the WebSocket subprotocol both ends must speak.
const Subprotocol = "v1.portforward.zonewright.io"

// maxMessage bounds one message: the bytes of one read.
const maxMessage = 64 << 10

// Dial opens a forwarded connection at url (https://…/portforward?port=N)
// with client, which carries the caller's credentials. A refusal is an
// *execstream.RefusedError with the server's message.
func Dial(ctx context.Context, client *http.Client, url string) (net.Conn, error) {
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: client, Subprotocols: []string{Subprotocol}})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, execstream.Refusal(resp)
		}
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	if conn.Subprotocol() != Subprotocol {
		conn.Close(websocket.StatusProtocolError, "subprotocol "+Subprotocol+" expected")
		return nil, fmt.Errorf("port-forward: the server does not speak %s", Subprotocol)
	}
	conn.SetReadLimit(maxMessage)
	// The connection lives past ctx, which bounds only the opening.
	return &wsConn{websocket.NetConn(context.Background(), conn, websocket.MessageBinary), conn}, nil
}

// Accept upgrades the request to a forwarded connection. On failure it
// has answered the request itself.
func Accept(w http.ResponseWriter, r *http.Request) (net.Conn, error) {
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}})
	if err != nil {
		return nil, err
	}
	if conn.Subprotocol() != Subprotocol {
		conn.Close(websocket.StatusPolicyViolation, "subprotocol "+Subprotocol+" required")
		return nil, fmt.Errorf("port-forward: subprotocol %s required", Subprotocol)
	}
	conn.SetReadLimit(maxMessage)
	return &wsConn{websocket.NetConn(r.Context(), conn, websocket.MessageBinary), conn}, nil
}

// wsConn is a forwarded connection whose Close ends the WebSocket with
// its close handshake. The NetConn's own Close cancels a read under way
// first (Join always has one), and a cancelled read drops the connection
// at once: the other end then read an error after the last bytes, not
// the end of the stream.
type wsConn struct {
	net.Conn
	ws *websocket.Conn
}

func (c *wsConn) Close() error {
	err := c.ws.Close(websocket.StatusNormalClosure, "")
	_ = c.Conn.Close()
	return err
}

// Join carries the bytes between a and b both ways until either end
// closes (a stream carries no half-close) or stop ends, then closes
// both.
func Join(a, b net.Conn, stop <-chan struct{}) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	select {
	case <-done:
	case <-stop:
	}
	a.Close()
	b.Close()
}

// Port reads the query's port, a TCP port number.
func Port(q url.Values) (int, error) {
	p, err := strconv.Atoi(q.Get("port"))
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q is not a TCP port (1 to 65535)", q.Get("port"))
	}
	return p, nil
}
