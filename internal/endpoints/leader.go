package endpoints

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Leader is leadership among control-plane replicas through a PostgreSQL
// session advisory lock: whoever holds the lock leads, and the database
// drops it when the holder's connection ends (a crash, a partition), so
// another replica takes over within a check interval. It was chosen over
// conditioned writes alone because those keep concurrent writers correct
// but not cheap: N replicas would each recompute and race on every change.
// The controller still conditions its writes, which covers the moment a
// leader lost its connection and has not noticed yet.
type Leader struct {
	Pool *pgxpool.Pool
	Key  int64
	// Check is how often the lock's connection is checked and, while not
	// leading, how often the lock is tried; zero: 2 s.
	Check time.Duration
}

// While waits to lead, then runs fn with a context that ends when the
// lock is lost or ctx ends, and gives the lock up when fn returns.
func (l *Leader) While(ctx context.Context, fn func(context.Context) error) error {
	every := l.Check
	if every <= 0 {
		every = 2 * time.Second
	}
	for {
		pooled, err := l.Pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("leader lock connection: %w", err)
		}
		// The lock lives with this session: it must not go back to the pool.
		conn := pooled.Hijack()
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.Key).Scan(&got); err != nil {
			conn.Close(context.Background())
			return fmt.Errorf("try leader lock: %w", err)
		}
		if !got {
			conn.Close(context.Background())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(every):
			}
			continue
		}
		lctx, cancel := context.WithCancel(ctx)
		lost := make(chan error, 1)
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-lctx.Done():
					lost <- nil
					return
				case <-t.C:
					pctx, pcancel := context.WithTimeout(lctx, every)
					err := conn.Ping(pctx)
					pcancel()
					if err != nil && lctx.Err() == nil {
						cancel()
						lost <- fmt.Errorf("leader lock connection lost: %w", err)
						return
					}
				}
			}
		}()
		err = fn(lctx)
		cancel()
		if lerr := <-lost; lerr != nil && err == nil {
			err = lerr
		}
		// Closing the session releases the lock.
		conn.Close(context.Background())
		return err
	}
}

// Lead runs fn each time this replica leads, until ctx ends: fn follows
// the store for as long as the lead lasts. A lost lead is logged as
// name's, and tried for again a second later.
func (l *Leader) Lead(ctx context.Context, log *slog.Logger, name string, fn func(context.Context)) {
	for ctx.Err() == nil {
		err := l.While(ctx, func(lctx context.Context) error {
			fn(lctx)
			return nil
		})
		if err != nil && ctx.Err() == nil {
			log.Warn(name+": leadership", "err", err)
		}
		sleep(ctx, time.Second)
	}
}
