package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
)

func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// stdoutOf runs fn and returns what it printed on stdout.
func stdoutOf(t *testing.T, fn func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	err = fn()
	os.Stdout = saved
	w.Close()
	out, _ := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// The operator's token commands work on a database where no token exists
// yet, and what they print authenticates as what was asked.
func TestOperatorTokenCommands(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	if err := store.MigrateUp(ctx, url, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.EnsureNamespace(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tokens := &auth.Tokens{Pool: pool}

	admin := stdoutOf(t, func() error { return token(ctx, []string{"create", "--database-url", url, "--ttl", "1h"}) })
	if id, err := tokens.Authenticate(ctx, admin); err != nil || id.Role != auth.RoleClusterAdmin {
		t.Fatalf("token create: %q is %+v, %v", admin, id, err)
	}
	edit := stdoutOf(t, func() error {
		return token(ctx, []string{"create", "--database-url", url, "--namespace", "team", "--role", "edit"})
	})
	id, err := tokens.Authenticate(ctx, edit)
	if err != nil || id.Role != auth.RoleEdit || id.Namespace != "team" {
		t.Fatalf("namespace token: %+v %v", id, err)
	}
	join := stdoutOf(t, func() error { return node(ctx, []string{"join-token", "create", "--database-url", url}) })
	if id, err := tokens.Authenticate(ctx, join); err != nil || id.Role != auth.RoleNodeJoin || id.JoinNode != "" {
		t.Fatalf("join token: %+v %v", id, err)
	}
	bound := stdoutOf(t, func() error {
		return node(ctx, []string{"join-token", "create", "--database-url", url, "--node", "n4"})
	})
	if id, err := tokens.Authenticate(ctx, bound); err != nil || id.Role != auth.RoleNodeJoin || id.JoinNode != "n4" {
		t.Fatalf("join token for n4: %+v %v", id, err)
	}
	if err := node(ctx, []string{"join-token", "create", "--database-url", url, "--node", "N_4"}); err == nil {
		t.Error("a join token for an invalid node name: no error")
	}
	if err := node(ctx, []string{"join-token", "create", "--database-url", url, "--ttl", "25h"}); err == nil || !strings.Contains(err.Error(), "at most 24h") {
		t.Errorf("a join token for 25 hours: %v, want a refusal", err)
	}
	stdoutOf(t, func() error { return token(ctx, []string{"revoke", "--database-url", url, id.TokenID}) })
	if _, err := tokens.Authenticate(ctx, edit); err == nil {
		t.Fatal("a revoked token still authenticates")
	}
	for _, args := range [][]string{
		{"create", "--database-url", url, "--role", "edit"},
		{"create", "--database-url", url, "--namespace", "team", "--role", "cluster-admin"},
		{"create", "--database-url", url, "--ttl", "-1h"},
		{"revoke", "--database-url", url, "nosuchtoken"},
	} {
		if err := token(ctx, args); err == nil {
			t.Errorf("token %v: no error", args)
		}
	}
}
