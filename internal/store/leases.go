package store

import (
	"context"
	"fmt"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// RenewNodeLease renews node's lease for holder, creating it at the first
// renewal; a new holder counts a transition. It is one statement on the
// node_leases table: no change-feed row, no NOTIFY, no global lock.
func (s *Store) RenewNodeLease(ctx context.Context, node, holder string, durationSeconds int32) (*model.Lease, error) {
	row := s.pool.QueryRow(ctx, `
		INSERT INTO node_leases AS l (node_name, holder_identity, lease_duration_seconds)
		VALUES ($1, $2, $3)
		ON CONFLICT (node_name) DO UPDATE SET
			renew_time = now(),
			lease_duration_seconds = EXCLUDED.lease_duration_seconds,
			holder_identity = EXCLUDED.holder_identity,
			acquire_time = CASE WHEN l.holder_identity = EXCLUDED.holder_identity THEN l.acquire_time ELSE now() END,
			lease_transitions = l.lease_transitions + CASE WHEN l.holder_identity = EXCLUDED.holder_identity THEN 0 ELSE 1 END
		RETURNING holder_identity, lease_duration_seconds, acquire_time, renew_time, lease_transitions`,
		node, holder, durationSeconds)
	l, err := scanLease(node, row.Scan)
	if err != nil {
		return nil, fmt.Errorf("renew the lease of node %s: %w", node, classify(err))
	}
	return l, nil
}

// NodeLease is node's lease and its age by the database's clock; it fails
// with ErrNotFound when the node never renewed one.
func (s *Store) NodeLease(ctx context.Context, node string) (*model.Lease, time.Duration, error) {
	var age float64
	row := s.pool.QueryRow(ctx, `SELECT holder_identity, lease_duration_seconds, acquire_time, renew_time, lease_transitions,
		extract(epoch FROM now() - renew_time)::float8 FROM node_leases WHERE node_name = $1`, node)
	l, err := scanLease(node, func(dest ...any) error { return row.Scan(append(dest, &age)...) })
	if err != nil {
		return nil, 0, fmt.Errorf("read the lease of node %s: %w", node, classify(err))
	}
	return l, max(time.Duration(age*float64(time.Second)), 0), nil
}

// NodeLeaseAges is every node lease's age by the database's clock, by
// node name; a node that never renewed one is missing.
func (s *Store) NodeLeaseAges(ctx context.Context) (map[string]time.Duration, error) {
	rows, err := s.pool.Query(ctx, `SELECT node_name, extract(epoch FROM now() - renew_time)::float8 FROM node_leases`)
	if err != nil {
		return nil, fmt.Errorf("read the node leases: %w", classify(err))
	}
	defer rows.Close()
	ages := map[string]time.Duration{}
	for rows.Next() {
		var node string
		var age float64
		if err := rows.Scan(&node, &age); err != nil {
			return nil, fmt.Errorf("read the node leases: %w", classify(err))
		}
		ages[node] = max(time.Duration(age*float64(time.Second)), 0)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the node leases: %w", classify(err))
	}
	return ages, nil
}

// DeleteNodeLease drops node's lease (the node was deleted).
func (s *Store) DeleteNodeLease(ctx context.Context, node string) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM node_leases WHERE node_name = $1", node); err != nil {
		return fmt.Errorf("delete the lease of node %s: %w", node, classify(err))
	}
	return nil
}

func scanLease(node string, scan func(dest ...any) error) (*model.Lease, error) {
	l := &model.Lease{TypeMeta: model.TypeMeta{APIVersion: model.APIVersionCoordination, Kind: model.KindLease},
		Metadata: model.ObjectMeta{Name: node}}
	var acquire, renew time.Time
	if err := scan(&l.Spec.HolderIdentity, &l.Spec.LeaseDurationSeconds, &acquire, &renew, &l.Spec.LeaseTransitions); err != nil {
		return nil, err
	}
	acquire, renew = acquire.UTC(), renew.UTC()
	l.Spec.AcquireTime, l.Spec.RenewTime = &acquire, &renew
	return l, nil
}
