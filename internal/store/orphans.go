package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OrphanSighting is what the store remembers of one orphan on a node.
type OrphanSighting struct {
	// Age is how long it has been seen, by the database's clock (so the
	// grace period does not depend on which worker's clock reads it).
	Age time.Duration
	// New is true when this call saw it first.
	New bool
}

// TrackOrphans records that exactly keys are orphans on node now: keys
// not seen before start their grace period, keys no longer reported are
// forgotten. It returns what is known of each key.
func (s *Store) TrackOrphans(ctx context.Context, node string, keys []string) (map[string]OrphanSighting, error) {
	if keys == nil {
		keys = []string{}
	}
	out := make(map[string]OrphanSighting, len(keys))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM host_orphans WHERE node_name = $1 AND NOT (key = ANY($2))", node, keys); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `INSERT INTO host_orphans (node_name, key) SELECT $1, k FROM unnest($2::text[]) AS k
			ON CONFLICT DO NOTHING RETURNING key`, node, keys)
		if err != nil {
			return err
		}
		fresh, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, "SELECT key, extract(epoch FROM now() - first_seen)::float8 FROM host_orphans WHERE node_name = $1", node)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var key string
			var age float64
			if err := rows.Scan(&key, &age); err != nil {
				return err
			}
			out[key] = OrphanSighting{Age: time.Duration(age * float64(time.Second))}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, k := range fresh {
			o := out[k]
			o.New = true
			out[k] = o
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("track orphans of node %s: %w", node, classify(err))
	}
	return out, nil
}

// ForgetOrphan drops one orphan of node (it was removed).
func (s *Store) ForgetOrphan(ctx context.Context, node, key string) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM host_orphans WHERE node_name = $1 AND key = $2", node, key); err != nil {
		return fmt.Errorf("forget orphan %s of node %s: %w", key, node, classify(err))
	}
	return nil
}
