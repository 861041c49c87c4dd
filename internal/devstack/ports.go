package devstack

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"syscall"
)

// PortInUseError reports that an address the dev stack wants to listen on is
// already taken. Callers that know the flag controlling the port can add it to
// the message: errors.As(err, &pe) and mention their own flag.
type PortInUseError struct {
	Addr string
	Err  error
}

func (e *PortInUseError) Error() string {
	return fmt.Sprintf("%s is already in use (by another dev stack?); choose another port", e.Addr)
}

func (e *PortInUseError) Unwrap() error { return e.Err }

// CheckPortFree reports whether addr (host:port) can be listened on right now.
// A port taken by another process is a *PortInUseError; anything else (a bad
// address, a host that is not ours) is returned wrapped as it is.
//
// The check is a snapshot: another process may take the port before it is
// used. The embedded Temporal server calls it before it starts anything, so
// the common case (a dev stack already running) fails fast and clearly.
func CheckPortFree(addr string) error {
	ln, err := listenTCP(addr)
	if err != nil {
		return err
	}
	if err := ln.Close(); err != nil {
		return fmt.Errorf("release %s: %w", addr, err)
	}
	return nil
}

// listenTCP listens on addr; a port taken by another process is a
// *PortInUseError.
func listenTCP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, &PortInUseError{Addr: addr, Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// FreeAddr is a loopback host:port free at the time of the call, for the
// programs that start stacks of their own.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// freePort asks the kernel for a free TCP port on host, skipping the ports in
// avoid (the well-known dev stack ports), so the internal services of the
// embedded server never sit on a port a user expects to be free.
func freePort(host string, avoid map[int]bool) (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if err := ln.Close(); err != nil {
			return 0, fmt.Errorf("release probe port %d: %w", port, err)
		}
		if !avoid[port] {
			avoid[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("find a free port on %s: every port offered is reserved", host)
}

// splitHostPort parses host:port with a numeric port.
func splitHostPort(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("parse address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("parse address %q: bad port %q", addr, portStr)
	}
	return host, port, nil
}

// membershipPorts are where a split server's gossip listens: its
// membership table keeps a port as a PostgreSQL smallint, so the kernel's
// ephemeral ports (from 32768) do not fit.
const membershipPortLow, membershipPortHigh = 20000, 32767

// freeMembershipPort is a free TCP port on host in the membership range.
func freeMembershipPort(host string, avoid map[int]bool) (int, error) {
	for range 100 {
		port := membershipPortLow + rand.IntN(membershipPortHigh-membershipPortLow+1)
		if avoid[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		if err := ln.Close(); err != nil {
			return 0, fmt.Errorf("release probe port %d: %w", port, err)
		}
		avoid[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("find a free port on %s from %d to %d: none of 100 tried", host, membershipPortLow, membershipPortHigh)
}
