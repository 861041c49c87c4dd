// Package store persists zonewright's resources in PostgreSQL: typed
// get/list/create/update/delete with optimistic concurrency on
// resource_version, label and field selectors, pagination, and a change feed
// over LISTEN/NOTIFY that any API replica can serve watches from.
package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is a pool of connections to zonewright's database.
type Store struct {
	pool *pgxpool.Pool
	// locks holds session advisory locks (Exclusive): connections apart
	// from pool's, which the lock holders use.
	locks *pgxpool.Pool
	feed  *feed
	// settledReads counts the reads behind the barrier (readSettled).
	settledReads atomic.Int64
}

// Open connects to the database at url. It does not wait for the database
// to be up: calls fail with ErrUnavailable until it is.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if cfg.MaxConns < 16 {
		cfg.MaxConns = 16
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	lockCfg := cfg.Copy()
	lockCfg.MaxConns, lockCfg.MinConns = 8, 0
	locks, err := pgxpool.NewWithConfig(ctx, lockCfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	s := &Store{pool: pool, locks: locks}
	s.feed = newFeed(s)
	return s, nil
}

// Close stops the change feed and closes every connection.
func (s *Store) Close() {
	s.feed.close()
	s.pool.Close()
	s.locks.Close()
}

// Exclusive runs fn holding the session advisory lock (class,
// hashtext(key)), waiting for it while another holds it, in this process
// or another. The lock is on a connection of its own: fn works through
// the pool, and waiters holding the pool's connections could leave it
// none (a deadlock PostgreSQL cannot see). The two-key form keeps these
// apart from the single-key locks of pglock.
func (s *Store) Exclusive(ctx context.Context, class int32, key string, fn func() error) error {
	conn, err := s.locks.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, hashtext($2))", class, key); err != nil {
		return classify(err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1, hashtext($2))", class, key) //nolint:errcheck // the session ends the lock anyway
	return fn()
}

// Pool exposes the connection pool to packages that keep their own tables
// (IPAM, the scheduler) so they share one pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// Errors callers branch on. The API maps them to HTTP status codes.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	ErrConflict      = errors.New("conflict") // stale resourceVersion, or a dependent object
	ErrUnavailable   = errors.New("database unavailable")
	ErrExpired       = errors.New("resource version too old")
	ErrInvalid       = errors.New("invalid request") // a bad selector or continue token
)

// classify turns driver errors into the store's errors.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrAlreadyExists) ||
		errors.Is(err, ErrConflict) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrExpired) || errors.Is(err, ErrInvalid) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		// The driver's error stays wrapped, not spelled into the message:
		// its detail (keys, constraint names) is for the log, not clients.
		case pgErr.Code == "23505":
			return fmt.Errorf("%w: %w", ErrAlreadyExists, pgErr)
		case pgErr.Code == "23503":
			return fmt.Errorf("%w: %w", ErrConflict, pgErr)
		case pgErr.Code[:2] == "08", pgErr.Code[:2] == "53", pgErr.Code[:2] == "57":
			// connection exceptions, resource exhaustion, operator intervention
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return err
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

func (s *Store) inTx(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	err := pgx.BeginTxFunc(ctx, s.pool, opts, fn)
	return classify(err)
}

// Reachable connects once to url: nil if the database answers,
// ErrUnavailable if it does not (yet), another error if the URL is wrong.
func Reachable(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse database URL: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "3D000" || pgErr.Code == "28000") {
			return fmt.Errorf("connect to database: %w", err) // bad credentials or database: waiting will not help
		}
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return conn.Close(ctx)
}
