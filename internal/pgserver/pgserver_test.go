package pgserver_test

import (
	"context"
	"os"
	"strconv"
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

// The cluster lets in nobody without its password, over loopback or its
// socket: a pod's process reaches loopback. A cluster made when clusters
// trusted loopback is secured at its next start. Write pg_hba.conf as
// initdb leaves it (trust) in ensurePassword to see this fail.
func TestTheClusterAsksForItsPassword(t *testing.T) {
	if _, err := pgserver.FindBinDir(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir() + "/pg"
	refused := func(pg *pgserver.Server) {
		t.Helper()
		for _, url := range []string{
			"postgres://postgres@" + pg.Addr() + "/postgres?sslmode=disable",
			"postgres://postgres:wrong@" + pg.Addr() + "/postgres?sslmode=disable",
			"host=" + dir + " port=" + strconv.Itoa(pg.Port()) + " user=postgres dbname=postgres sslmode=disable",
		} {
			if conn, err := pgx.Connect(ctx, url); err == nil {
				conn.Close(ctx)
				t.Errorf("connected without the password: %s", url)
			}
		}
		conn, err := pgx.Connect(ctx, pg.URL("postgres"))
		if err != nil {
			t.Fatalf("with the password: %v", err)
		}
		conn.Close(ctx)
	}
	pg, err := pgserver.Start(ctx, pgserver.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	refused(pg)
	if fi, err := os.Stat(pgserver.PasswordFile(dir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("password file: %v %v, want mode 0600", fi, err)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}

	// As a cluster of before: trust, no password file.
	trust := "local all all trust\nhost all all 127.0.0.1/32 trust\n"
	if err := os.WriteFile(dir+"/pg_hba.conf", []byte(trust), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pgserver.PasswordFile(dir)); err != nil {
		t.Fatal(err)
	}
	pg, err = pgserver.Start(ctx, pgserver.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	refused(pg)
}

// A server killed a moment ago may leave a backend behind that still
// holds its shared memory; postgres refuses to start beside it. Start
// waits for it to go rather than fail: here a backend is stopped so it
// cannot exit, the postmaster is killed, and the backend is let go a
// second into the new Start. (Make Start return waitReady's error at
// once to see it fail with "pre-existing shared memory block".)
func TestAStartWaitsForAKilledServersLastProcess(t *testing.T) {
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
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(backend, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(backend, syscall.SIGKILL) })
	_ = syscall.Kill(pg.Pid(), syscall.SIGKILL)
	_ = pg.Stop()
	go func() {
		time.Sleep(time.Second)
		_ = syscall.Kill(backend, syscall.SIGKILL)
	}()
	pg, err = pgserver.Start(ctx, pgserver.Config{DataDir: dir})
	if err != nil {
		t.Fatalf("start beside the killed server's last backend: %v", err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	c2, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	c2.Close(ctx)
}
