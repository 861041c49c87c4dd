package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/zonewright/zonewright/internal/model"
)

// An image's state on each node is a row of image_node_status, written by
// that node's pull with one upsert outside the change lock; reads of the
// Image put the rows back into status.nodes (imageNodesJSON), so clients
// see the shape they always did. Rows go with their image or node.

// imageNodesJSON is {"nodes": [...]} for the image row in scope (empty
// when no node has a state), in model.ImageNodeStatus's JSON.
const imageNodesJSON = `coalesce((SELECT jsonb_build_object('nodes', jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
		'node', n.node, 'phase', n.phase, 'reason', nullif(n.reason, ''), 'message', nullif(n.message, ''),
		'updated', to_char(n.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))) ORDER BY n.node))
	FROM image_node_status n WHERE n.image = images.name HAVING count(*) > 0), '{}'::jsonb)`

// SetImageNode records the image's state on one node and returns the
// state it replaced (had is false when there was none). An image or node
// that does not exist is ErrNotFound.
func (s *Store) SetImageNode(ctx context.Context, image string, ns model.ImageNodeStatus) (prev model.ImageNodeStatus, had bool, err error) {
	updated := time.Now().UTC()
	if ns.Updated != nil {
		updated = ns.Updated.UTC()
	}
	var (
		prevPhase   *string
		prevReason  *string
		prevMessage *string
		prevUpdated *time.Time
	)
	// prev reads the row as the statement's snapshot has it, before the
	// upsert. Two reports for one node at once may both see the same
	// previous state; callers only measure with it.
	err = s.pool.QueryRow(ctx, `WITH prev AS (
			SELECT phase, reason, message, updated_at FROM image_node_status WHERE image = $1 AND node = $2)
		INSERT INTO image_node_status AS n (image, node, phase, reason, message, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (image, node) DO UPDATE SET phase = excluded.phase, reason = excluded.reason,
			message = excluded.message, updated_at = excluded.updated_at
		RETURNING (SELECT phase FROM prev), (SELECT reason FROM prev), (SELECT message FROM prev), (SELECT updated_at FROM prev)`,
		image, ns.Node, ns.Phase, ns.Reason, ns.Message, updated).Scan(&prevPhase, &prevReason, &prevMessage, &prevUpdated)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // the image or the node is gone
		return prev, false, ErrNotFound
	}
	if err != nil || prevPhase == nil {
		return prev, false, classify(err)
	}
	prev = model.ImageNodeStatus{Node: ns.Node, Phase: *prevPhase, Reason: *prevReason, Message: *prevMessage}
	if prevUpdated != nil {
		t := prevUpdated.UTC()
		prev.Updated = &t
	}
	return prev, true, nil
}

// setImageNodes records states of the image on several nodes in tx; those
// of nodes gone are left out.
func setImageNodes(ctx context.Context, tx pgx.Tx, image string, nodes []model.ImageNodeStatus) error {
	if len(nodes) == 0 {
		return nil
	}
	names := make([]string, len(nodes))
	phases := make([]string, len(nodes))
	reasons := make([]string, len(nodes))
	messages := make([]string, len(nodes))
	updated := make([]time.Time, len(nodes))
	now := time.Now().UTC()
	for i, n := range nodes {
		names[i], phases[i], reasons[i], messages[i], updated[i] = n.Node, n.Phase, n.Reason, n.Message, now
		if n.Updated != nil {
			updated[i] = n.Updated.UTC()
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO image_node_status (image, node, phase, reason, message, updated_at)
		SELECT $1, u.node, u.phase, u.reason, u.message, u.updated_at
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[]) AS u (node, phase, reason, message, updated_at)
		JOIN nodes ON nodes.name = u.node
		ON CONFLICT (image, node) DO UPDATE SET phase = excluded.phase, reason = excluded.reason,
			message = excluded.message, updated_at = excluded.updated_at`, image, names, phases, reasons, messages, updated)
	return err
}

// UpdateImageWithNodes is Images().Update that also records the image's
// state on nodes, in the same transaction: the image's new status and
// those states become visible together.
func (s *Store) UpdateImageWithNodes(ctx context.Context, img *model.Image, nodes []model.ImageNodeStatus) error {
	r := s.Images()
	return s.write(ctx, func(tx pgx.Tx) (pending, error) {
		if err := setImageNodes(ctx, tx, img.Metadata.Name, nodes); err != nil {
			return pending{}, err
		}
		return r.updateTx(ctx, tx, img)
	})
}

// ImageArtefactSize is the size of the image's artefact (0 before its
// import ends), read without the image's per-node states.
func (s *Store) ImageArtefactSize(ctx context.Context, image string) (int64, error) {
	var size int64
	err := s.pool.QueryRow(ctx, "SELECT coalesce((status ->> 'artefactSize')::bigint, 0) FROM images WHERE name = $1", image).Scan(&size)
	return size, classify(err)
}

// ImagePulling reports whether a pull of the image to some node is under
// way (a node's state is Pulling).
func (s *Store) ImagePulling(ctx context.Context, image string) (bool, error) {
	var pulling bool
	err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM image_node_status WHERE image = $1 AND phase = $2)",
		image, model.ImagePulling).Scan(&pulling)
	return pulling, classify(err)
}
