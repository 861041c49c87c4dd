package devstack

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// StartTestTemporal starts an embedded Temporal server for an integration
// test: a free loopback port, a database in t.TempDir(), the default
// namespace, server logs at error level on stderr, stopped by t.Cleanup.
// configure may adjust the config (typically SearchAttributes) before start.
func StartTestTemporal(t testing.TB, configure ...func(*TemporalConfig)) *Temporal {
	t.Helper()
	cfg := TemporalConfig{
		DataDir:  t.TempDir(),
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, nil)),
		LogLevel: slog.LevelError,
	}
	for _, f := range configure {
		f(&cfg)
	}
	explicitAddress := cfg.Address != ""

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A free port can be taken by a parallel test (other packages' tests run
	// in parallel processes) between the probe and the server's bind; try
	// again on other ports.
	var lastErr error
	for range 3 {
		if !explicitAddress {
			port, err := freePort(loopback, reservedPortSet())
			if err != nil {
				t.Fatalf("devstack: %v", err)
			}
			cfg.Address = net.JoinHostPort(loopback, strconv.Itoa(port))
		}
		srv, err := StartTemporal(ctx, cfg)
		if err == nil {
			t.Cleanup(func() {
				if err := srv.Stop(); err != nil {
					t.Errorf("devstack: %v", err)
				}
			})
			return srv
		}
		lastErr = err
		// Internal ports are picked the same way and can race the same, so
		// a taken port is worth another try, unless it is the caller's.
		var frontendTaken *PortInUseError
		if !errors.Is(err, syscall.EADDRINUSE) || (explicitAddress && errors.As(err, &frontendTaken)) {
			break
		}
	}
	t.Fatalf("devstack: %v", lastErr)
	return nil
}
