package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/pglock"
)

// How the change feed stays in order without one writer at a time.
//
// Every write takes its resource version from resource_version_seq and
// commits its row and its change together, but writes run at once, so
// version 11 may commit before version 10. A watcher that read 11 and
// moved on would never see 10. The feed therefore only reads up to a
// version below which nothing can still commit: the settled version.
//
// Writers take the change lock (pglock.Change) shared, in the statement
// that takes their version and before it (stampSQL), and hold it to
// commit or rollback; nothing else takes a version. settled takes the
// same lock exclusively, which PostgreSQL grants only once no transaction
// holds it shared, and reads the sequence's last value while holding it:
//
//   - every version at or below that value was handed out before the
//     exclusive lock was granted (no version is handed out while it is
//     held, and the sequence hands out increasing values with CACHE 1),
//     to a transaction that held the shared lock and so had already
//     committed or rolled back when the exclusive lock was granted; its
//     change, if it committed, is visible to every later statement;
//   - every version handed out later is greater than that value.
//
// So a reader that has delivered every change up to a settled version
// can never be handed an earlier one: no gap. It reads past its last
// version only, one row a version: no repeat. A rolled-back version is
// simply absent below the settled one, so nothing waits for it. A slow
// writer holds the settled version (and, while a reader waits for the
// exclusive lock, new writers queue behind it) until it ends: that is
// the wait the order requires, as long as the slowest write in flight,
// no longer. Writers do their reads, checks and row writes before they
// take the lock (Store.write), and between the lock and commit wait for
// nothing but the database, so the exclusive lock never waits on a
// writer that waits on it.
//
// The feed reads up to the settled version after every notification; a
// list reads its rows in a snapshot taken with the exclusive lock held
// (readSettled), so that its version is one a watch resumes from without
// a gap and without a repeat.

// settledSQL reads the sequence with the change lock held exclusively
// (the lock's CTE is read first); the lock ends with the statement.
const settledSQL = `WITH barrier AS MATERIALIZED (SELECT pg_advisory_xact_lock($1))
	SELECT coalesce(pg_sequence_last_value('resource_version_seq'), 0) FROM barrier`

// settled returns the greatest version below which every write has
// committed or rolled back (see above).
func (s *Store) settled(ctx context.Context) (int64, error) {
	var rv int64
	err := s.pool.QueryRow(ctx, settledSQL, pglock.Change).Scan(&rv)
	return rv, classify(err)
}

// ReadSettled is readSettled for readers of the changes table outside
// the store (the scheduler follows node and pod changes): reading up to
// the version it gives loses none that commits late.
func (s *Store) ReadSettled(ctx context.Context, fn func(tx pgx.Tx, rv int64) error) error {
	return s.readSettled(ctx, fn)
}

// readSettled runs fn in a read-only snapshot that holds exactly the
// writes up to a settled version, and gives it that version. The
// snapshot is taken while the change lock is held exclusively (on the
// session, as a transaction's snapshot is taken by its first statement,
// before any lock that statement waits for), then the lock is let go.
func (s *Store) readSettled(ctx context.Context, fn func(tx pgx.Tx, rv int64) error) error {
	s.settledReads.Add(1)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify(err)
	}
	defer conn.Release()
	// Until the unlock is read back, whether the session holds the lock
	// is unknown (a cancelled wait may have got it): ending the session
	// ends it, and the pool drops a closed connection.
	locked := true
	defer func() {
		if locked {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", pglock.Change); err != nil {
		return classify(err)
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it does nothing
	var rv int64
	var unlocked bool
	if err := tx.QueryRow(ctx, `SELECT coalesce(pg_sequence_last_value('resource_version_seq'), 0), pg_advisory_unlock($1)`,
		pglock.Change).Scan(&rv, &unlocked); err != nil {
		return classify(err)
	}
	locked = !unlocked
	if err := fn(tx, rv); err != nil {
		return classify(err)
	}
	return classify(tx.Commit(ctx))
}

// readAnyVersion runs fn in a read-only snapshot taken without the
// barrier, and gives it the version the feed has delivered up to, read
// before the snapshot: every write up to it had committed then, so the
// snapshot holds them all (and perhaps later ones). Without a running
// feed it is readSettled.
func (s *Store) readAnyVersion(ctx context.Context, fn func(tx pgx.Tx, rv int64) error) error {
	rv, ok := s.feed.delivered()
	if !ok {
		return s.readSettled(ctx, fn)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it does nothing
	if err := fn(tx, rv); err != nil {
		return classify(err)
	}
	return classify(tx.Commit(ctx))
}
