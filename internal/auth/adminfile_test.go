package auth_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The first start writes a cluster-admin token (0600); later starts reuse
// it while it authenticates. One an operator revoked (it leaked, say) is
// not replaced in the same place until its file is removed. Drop the
// revoked branch of EnsureAdminToken to see a new token minted.
func TestAdminTokenIsMadeOnceAndReusedWhileValid(t *testing.T) {
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
	tokens := &auth.Tokens{Pool: st.Pool()}
	path := filepath.Join(t.TempDir(), "admin.token")

	first, err := auth.EnsureAdminToken(ctx, tokens, path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file: %v %v", fi, err)
	}
	id, err := tokens.Authenticate(ctx, first)
	if err != nil || id.Role != auth.RoleClusterAdmin {
		t.Fatalf("admin token: %+v %v", id, err)
	}
	again, err := auth.EnsureAdminToken(ctx, tokens, path)
	if err != nil || again != first {
		t.Fatalf("a valid admin token was not reused: %v", err)
	}
	if err := tokens.Revoke(ctx, id.TokenID, ""); err != nil {
		t.Fatal(err)
	}
	if tok, err := auth.EnsureAdminToken(ctx, tokens, path); !errors.Is(err, auth.ErrAdminTokenRevoked) || tok != "" {
		t.Fatalf("after the admin token was revoked: %q, %v; want ErrAdminTokenRevoked and none", tok, err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != first {
		t.Fatalf("the revoked token's file was rewritten")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	renewed, err := auth.EnsureAdminToken(ctx, tokens, path)
	if err != nil || renewed == first || !tokens.Valid(ctx, renewed) {
		t.Fatalf("with its file removed, the revoked admin token was not replaced: %v", err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != renewed {
		t.Fatalf("the file does not hold the new token")
	}
}
