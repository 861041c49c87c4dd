package devstack

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"go.temporal.io/server/common/log/tag"
)

// A server that cannot bind an internal port panics through the logger
// with the listen error as a tag: the panic must still say EADDRINUSE, or
// StartTestTemporal never tries other ports after a race.
func TestServerPanicUnwrapsTheListenError(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, listenErr := net.Listen("tcp", taken.Addr().String())
	if !errors.Is(listenErr, syscall.EADDRINUSE) {
		t.Fatalf("listening twice: %v", listenErr)
	}
	p := serverPanic{msg: "Failed to start gRPC listener", tags: []tag.Tag{tag.Error(listenErr), tag.Address(taken.Addr().String())}}
	if !errors.Is(p, syscall.EADDRINUSE) {
		t.Fatalf("%v does not unwrap to EADDRINUSE", p)
	}
}
