package devstack

import (
	"context"
	"log/slog"
	"os"
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := StartTemporalOnFreePorts(ctx, cfg)
	if err != nil {
		t.Fatalf("devstack: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("devstack: %v", err)
		}
	})
	return srv
}
