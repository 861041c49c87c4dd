package pgserver_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/pgserver"
)

// A commit PostgreSQL acknowledged survives a crash of PostgreSQL (not of
// the machine): the control plane acts on what it wrote, and a pod whose
// Succeeded was forgotten stays Running with no zone. Put back
// synchronous_commit=off in start to see the last rows lost.
func TestAcknowledgedCommitsSurviveAKill(t *testing.T) {
	if _, err := pgserver.FindBinDir(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pg, err := pgserver.Start(ctx, pgserver.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE acked (n int)"); err != nil {
		t.Fatal(err)
	}
	const rows = 50
	for i := range rows {
		if _, err := conn.Exec(ctx, "INSERT INTO acked VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	_ = syscall.Kill(-pg.Pid(), syscall.SIGKILL)
	_ = pg.Stop()
	conn.Close(ctx)

	pg, err = pgserver.Start(ctx, pgserver.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	conn, err = pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM acked").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != rows {
		t.Fatalf("%d of %d acknowledged commits survived PostgreSQL's SIGKILL", n, rows)
	}
}
