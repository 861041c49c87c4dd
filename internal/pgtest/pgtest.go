// Package pgtest gives tests a real PostgreSQL: one private cluster per test
// binary, and a fresh database per test.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/pgserver"
)

var (
	once    sync.Once
	server  *pgserver.Server
	baseDir string
	setup   error
	seq     atomic.Int64
)

// Main runs the package's tests and stops the cluster afterwards. Call it
// from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if server != nil {
		_ = server.Stop()
	}
	if baseDir != "" {
		_ = os.RemoveAll(baseDir)
	}
	return code
}

func start() {
	baseDir, setup = os.MkdirTemp("", "zw-pgtest-")
	if setup != nil {
		return
	}
	server, setup = pgserver.Start(context.Background(), pgserver.Config{DataDir: filepath.Join(baseDir, "pg")})
}

// Server returns the shared cluster, starting it on first use.
func Server(t testing.TB) *pgserver.Server {
	t.Helper()
	once.Do(start)
	if setup != nil {
		t.Fatalf("start test PostgreSQL: %v", setup)
	}
	return server
}

// NewDatabase creates an empty database for this test and returns its URL.
// It is dropped when the test ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	srv := Server(t)
	name := fmt.Sprintf("t%d_%s", seq.Add(1), sanitize(t.Name()))
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		t.Fatalf("connect to test PostgreSQL: %v", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, srv.URL("postgres"))
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return srv.URL(name)
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	out := b.String()
	if len(out) > 40 {
		out = out[:40]
	}
	return out
}
