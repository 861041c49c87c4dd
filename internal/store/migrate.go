package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/zonewright/zonewright/migrations"
)

// Migrator applies the embedded migrations. Every operation holds a
// PostgreSQL advisory lock, so replicas starting together migrate once.
type Migrator struct {
	db       *sql.DB
	provider *goose.Provider
}

// NewMigrator opens a dedicated connection for migrating the database at url.
func NewMigrator(url string) (*Migrator, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return &Migrator{db: db, provider: p}, nil
}

var _ = stdlib.GetDefaultDriver // registers the "pgx" database/sql driver

// Close releases the connection.
func (m *Migrator) Close() error { return m.db.Close() }

// Up applies every pending migration.
func (m *Migrator) Up(ctx context.Context) ([]*goose.MigrationResult, error) {
	res, err := m.provider.Up(ctx)
	if err != nil {
		return res, classify(fmt.Errorf("migrate up: %w", err))
	}
	return res, nil
}

// Down rolls back the newest migration.
func (m *Migrator) Down(ctx context.Context) (*goose.MigrationResult, error) {
	res, err := m.provider.Down(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate down: %w", err)
	}
	return res, nil
}

// DownTo rolls back every migration newer than version.
func (m *Migrator) DownTo(ctx context.Context, version int64) ([]*goose.MigrationResult, error) {
	res, err := m.provider.DownTo(ctx, version)
	if err != nil {
		return res, fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return res, nil
}

// Status writes one line per migration: version, state, applied time.
func (m *Migrator) Status(ctx context.Context, w io.Writer) error {
	st, err := m.provider.Status(ctx)
	if err != nil {
		return fmt.Errorf("migration status: %w", err)
	}
	for _, s := range st {
		applied := "pending"
		if s.State == goose.StateApplied {
			applied = "applied " + s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(w, "%05d  %-40s %s\n", s.Source.Version, s.Source.Path, applied)
	}
	return nil
}

// MigrateUp is the start-up path of serve and the dev stack.
func MigrateUp(ctx context.Context, url string, log *slog.Logger) error {
	m, err := NewMigrator(url)
	if err != nil {
		return err
	}
	defer m.Close()
	res, err := m.Up(ctx)
	for _, r := range res {
		log.Info("applied migration", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return err
}
