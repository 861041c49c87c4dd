package store

import (
	"context"
)

// PodsByPhase counts pods by status.phase ("" for a pod whose lifecycle has
// written none yet); one grouped scan of the pods' phase column.
func (s *Store) PodsByPhase(ctx context.Context) (map[string]int, error) {
	return s.countBy(ctx, "SELECT coalesce(phase, ''), count(*) FROM pods GROUP BY 1")
}

// NodesByReady counts nodes by the status of their Ready condition
// ("Unknown" for a node that has none yet).
func (s *Store) NodesByReady(ctx context.Context) (map[string]int, error) {
	return s.countBy(ctx, `SELECT coalesce((SELECT c ->> 'status' FROM jsonb_array_elements(coalesce(status -> 'conditions', '[]')) c
		WHERE c ->> 'type' = 'Ready' LIMIT 1), 'Unknown'), count(*) FROM nodes GROUP BY 1`)
}

func (s *Store) countBy(ctx context.Context, q string) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, q)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			return nil, classify(err)
		}
		out[key] = n
	}
	return out, classify(rows.Err())
}
