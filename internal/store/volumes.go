package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
)

// CreateClaim stores a new claim in an existing namespace.
func (s *Store) CreateClaim(ctx context.Context, c *model.PersistentVolumeClaim) error {
	return s.Claims().CreateWith(ctx, c, func(tx pgx.Tx) error {
		if err := namespaceExists(ctx, c.Metadata.Namespace)(tx); err != nil {
			return err
		}
		object := fmt.Sprintf("persistentvolumeclaims %q", c.Metadata.Name)
		if err := admitLimits(ctx, tx, c.Metadata.Namespace, object, nil, c); err != nil {
			return err
		}
		return admitQuota(ctx, tx, c.Metadata.Namespace, object, model.ClaimUsage(c), nil)
	})
}

// DeleteClaim deletes a claim that no node holds; a bound claim is
// stamped deleting instead, for its node to release.
func (s *Store) DeleteClaim(ctx context.Context, ns, name, resourceVersion string) (*model.PersistentVolumeClaim, bool, error) {
	return deleteOrMark(ctx, s.Claims(), ns, name, resourceVersion, func(c *model.PersistentVolumeClaim) bool { return c.Status.NodeName != "" })
}

// CreateSnapshot stores a new snapshot in an existing namespace.
func (s *Store) CreateSnapshot(ctx context.Context, snap *model.VolumeSnapshot) error {
	return s.Snapshots().CreateWith(ctx, snap, namespaceExists(ctx, snap.Metadata.Namespace))
}

// DeleteSnapshot deletes a snapshot not placed on a node yet; one placed
// is stamped deleting instead, for its node to destroy.
func (s *Store) DeleteSnapshot(ctx context.Context, ns, name, resourceVersion string) (*model.VolumeSnapshot, bool, error) {
	return deleteOrMark(ctx, s.Snapshots(), ns, name, resourceVersion, func(v *model.VolumeSnapshot) bool { return v.Status.NodeName != "" })
}

// PodsUsingClaim lists the pods of namespace ns (by name) whose volumes
// name the claim. A pod row lasts until its zone is gone, so while one is
// listed, a zone may mount the claim's dataset.
func (s *Store) PodsUsingClaim(ctx context.Context, ns, claim string) ([]string, error) {
	return s.names(ctx, "SELECT name FROM pods WHERE namespace = $1 AND spec -> 'volumes' @> $2::jsonb ORDER BY name", ns,
		[]map[string]any{{"persistentVolumeClaim": map[string]string{"claimName": claim}}})
}

// ClaimsFromSnapshot lists the claims of namespace ns restored from the
// snapshot (their spec.dataSource).
func (s *Store) ClaimsFromSnapshot(ctx context.Context, ns, snapshot string) ([]string, error) {
	return s.names(ctx, "SELECT name FROM persistentvolumeclaims WHERE namespace = $1 AND spec @> $2::jsonb ORDER BY name", ns,
		map[string]any{"dataSource": map[string]string{"kind": model.KindVolumeSnapshot, "name": snapshot}})
}

// names runs a query of names in namespace ns whose JSON document
// contains match.
func (s *Store) names(ctx context.Context, q, ns string, match any) ([]string, error) {
	doc, err := json.Marshal(match)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, q, ns, doc)
	if err != nil {
		return nil, classify(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, classify(err)
}

// SetClaimsPhase sets the phase of every claim bound to node (Lost while
// the node is unreachable or gone, Bound again when it is back) and
// returns the claims it changed.
func (s *Store) SetClaimsPhase(ctx context.Context, node, phase string) ([]string, error) {
	claims, err := s.Claims().ListAll(ctx, ListOptions{FieldSelector: "status.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, c := range claims {
		_, err := s.Claims().Modify(ctx, c.Metadata.Namespace, c.Metadata.Name, func(c *model.PersistentVolumeClaim) bool {
			if c.Status.NodeName != node || c.Status.Phase == phase {
				return false
			}
			c.Status.Phase = phase
			changed = append(changed, c.Metadata.Namespace+"/"+c.Metadata.Name)
			return true
		})
		if err != nil && !errors.Is(err, ErrNotFound) {
			return changed, err
		}
	}
	return changed, nil
}
