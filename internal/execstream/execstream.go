// Package execstream is the wire form of an exec session (a command run in
// a pod's container, its standard streams relayed) over a WebSocket, as
// Kubernetes' channel protocol frames it: every binary message starts with
// the byte of its channel. The client (Dial, Session.Run) is what zwctl
// and the tests use; the server side (Accept, Server) is the node's. The
// control plane relays the connection between them unchanged.
//
// Channels: 0 stdin, 1 stdout, 2 stderr, 3 the session's end (a
// Kubernetes Status carrying the exit code), 4 a terminal resize
// ({"Width":w,"Height":h}), and 255 "close", whose second byte names the
// channel that will carry no more data (KEP-4006's v5 close message: the
// client ends stdin with [255, 0]).
package execstream

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/zonewright/zonewright/internal/model"
)

// Subprotocol is the WebSocket subprotocol both ends must speak.
const Subprotocol = "v1.exec.zonewright.io"

// KubernetesSubprotocol is Kubernetes' own name for the same framing
// (KEP-4006's v5, which kubectl exec offers first): the server accepts it
// too, so the stock kubectl runs commands in pods.
const KubernetesSubprotocol = "v5.channel.k8s.io"

// Channels, the first byte of every message.
const (
	ChannelStdin  byte = 0
	ChannelStdout byte = 1
	ChannelStderr byte = 2
	ChannelStatus byte = 3
	ChannelResize byte = 4
	ChannelClose  byte = 255
)

// MaxData is the most data one message carries; longer writes are split.
// Both ends refuse larger messages, so a session never buffers more than
// one message per direction.
const MaxData = 32 << 10

// readLimit is the largest message accepted: the channel byte and MaxData,
// or a status with room to spare.
const readLimit = MaxData + 1

// Size is a terminal's size in character cells.
type Size struct {
	Width  uint16 `json:"Width"`
	Height uint16 `json:"Height"`
}

// Reasons of a Status.
const (
	ReasonNonZeroExitCode = "NonZeroExitCode"
	causeExitCode         = "ExitCode"
)

// A session ends with a Status on ChannelStatus, as Kubernetes' exec does:
// a command that exited non-zero is reason NonZeroExitCode with its code
// in the cause of reason ExitCode; any other Failure means the command
// could not be run.

// ExitStatus is the Status of a command that exited with code.
func ExitStatus(code int) model.Status {
	if code == 0 {
		return model.Status{Status: "Success"}
	}
	return model.Status{Status: "Failure", Reason: ReasonNonZeroExitCode,
		Message: fmt.Sprintf("command terminated with non-zero exit code: %d", code),
		Details: &model.StatusDetails{Causes: []model.StatusCause{{Type: causeExitCode, Message: strconv.Itoa(code)}}}}
}

// ErrorStatus is the Status of a session whose command could not run.
func ErrorStatus(msg string) model.Status { return model.Status{Status: "Failure", Message: msg} }

// ExitCode is the command's exit code in s; an error when the command did
// not run to an exit (the Status's message says why).
func ExitCode(s model.Status) (int, error) {
	switch {
	case s.Status == "Success":
		return 0, nil
	case s.Reason == ReasonNonZeroExitCode && s.Details != nil:
		for _, c := range s.Details.Causes {
			if c.Type == causeExitCode {
				code, err := strconv.Atoi(c.Message)
				if err != nil {
					return 0, fmt.Errorf("exec: exit code %q is not a number", c.Message)
				}
				return code, nil
			}
		}
	}
	if s.Message == "" {
		return 0, fmt.Errorf("exec: the session failed (%s)", s.Status)
	}
	return 0, fmt.Errorf("exec: %s", s.Message)
}

// frame is a message of channel ch carrying data.
func frame(ch byte, data []byte) []byte {
	return append([]byte{ch}, data...)
}

func statusFrame(s model.Status) []byte {
	b, _ := json.Marshal(s) // a Status always encodes
	return frame(ChannelStatus, b)
}

func resizeFrame(sz Size) []byte {
	b, _ := json.Marshal(sz)
	return frame(ChannelResize, b)
}

// parseResize reads a resize message's payload.
func parseResize(data []byte) (Size, error) {
	var sz Size
	if err := json.Unmarshal(data, &sz); err != nil {
		return Size{}, fmt.Errorf("resize: %w", err)
	}
	return sz, nil
}
