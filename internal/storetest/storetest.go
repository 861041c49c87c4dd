// Package storetest gives a test a migrated store of its own, with the
// default namespace, on the test binary's PostgreSQL (internal/pgtest).
package storetest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
)

// New opens a fresh database for t, migrated, with the default namespace;
// it is closed when t ends. The test binary's TestMain must run pgtest.Main.
func New(t testing.TB) *store.Store {
	t.Helper()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	if err := store.MigrateUp(ctx, url, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.EnsureNamespace(ctx, model.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	return s
}
