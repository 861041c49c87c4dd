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
		'bytesDone', nullif(n.bytes_done, 0), 'bytesTotal', nullif(n.bytes_total, 0),
		'updated', to_char(n.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
		'lastUsed', to_char(n.last_used AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))) ORDER BY n.node))
	FROM image_node_status n WHERE n.image = images.name AND n.phase <> '` + collectedPhase + `' HAVING count(*) > 0), '{}'::jsonb)`

// collectedPhase marks an image garbage collection removed from a node:
// no state of the node in status.nodes (a pod there pulls the image
// again), but the node sync does not bring it back unasked.
const collectedPhase = "Collected"

// setNodeState is the upsert's SET of a node's new state: a pull that
// begins starts its progress afresh, one that ends Ready is complete, and
// a failed one keeps how far it got.
const setNodeState = `phase = excluded.phase, reason = excluded.reason,
			message = excluded.message, updated_at = excluded.updated_at,
			bytes_done = CASE WHEN excluded.phase = 'Pulling' AND n.phase <> 'Pulling' THEN 0
				WHEN excluded.phase = 'Ready' THEN n.bytes_total ELSE n.bytes_done END,
			bytes_total = CASE WHEN excluded.phase = 'Pulling' AND n.phase <> 'Pulling' THEN 0 ELSE n.bytes_total END`

// SetImageNode records the image's state on one node and returns the
// state it replaced (had is false when there was none). An image or node
// that does not exist is ErrNotFound. A Ready state counts as a use of
// the image on the node (its pull's end).
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
		INSERT INTO image_node_status AS n (image, node, phase, reason, message, updated_at, last_used)
			VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $3 = 'Ready' THEN $6::timestamptz END)
		ON CONFLICT (image, node) DO UPDATE SET `+setNodeState+`, last_used = coalesce(excluded.last_used, n.last_used)
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
	_, err := tx.Exec(ctx, `INSERT INTO image_node_status AS n (image, node, phase, reason, message, updated_at)
		SELECT $1, u.node, u.phase, u.reason, u.message, u.updated_at
		FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[]) AS u (node, phase, reason, message, updated_at)
		JOIN nodes ON nodes.name = u.node
		ON CONFLICT (image, node) DO UPDATE SET `+setNodeState, image, names, phases, reasons, messages, updated)
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

// ImageLayers are the layers of an oci image, bottom first (none for an
// image of another kind, or before its import has resolved them), read
// without the rest of the image: each layer download asks for them.
func (s *Store) ImageLayers(ctx context.Context, image string) ([]model.OCILayer, error) {
	var layers []model.OCILayer
	err := s.pool.QueryRow(ctx, "SELECT status -> 'oci' -> 'layers' FROM images WHERE name = $1", image).Scan(&layers)
	return layers, classify(err)
}

// ImagePulling reports whether a pull of the image to some node is under
// way (a node's state is Pulling).
func (s *Store) ImagePulling(ctx context.Context, image string) (bool, error) {
	var pulling bool
	err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM image_node_status WHERE image = $1 AND phase = $2)",
		image, model.ImagePulling).Scan(&pulling)
	return pulling, classify(err)
}

// SetImageNodeProgress records how far a node's pull of the image has got
// (bytes sent and the total), on the node's row only while it is Pulling:
// a download's last report arriving after its pull ended changes nothing.
// It reports whether a row took it.
func (s *Store) SetImageNodeProgress(ctx context.Context, image, node string, done, total int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE image_node_status SET bytes_done = $3, bytes_total = $4
		WHERE image = $1 AND node = $2 AND phase = $5`, image, node, done, total, model.ImagePulling)
	if err != nil {
		return false, classify(err)
	}
	return tag.RowsAffected() > 0, nil
}

// ImageOnNode names an image on a node.
type ImageOnNode struct{ Image, Node string }

// ImageNodeStates reads the states of images on nodes, one query for all;
// a pair with no state is left out of the map.
func (s *Store) ImageNodeStates(ctx context.Context, pairs []ImageOnNode) (map[ImageOnNode]model.ImageNodeStatus, error) {
	out := map[ImageOnNode]model.ImageNodeStatus{}
	if len(pairs) == 0 {
		return out, nil
	}
	images, nodes := make([]string, len(pairs)), make([]string, len(pairs))
	for i, p := range pairs {
		images[i], nodes[i] = p.Image, p.Node
	}
	rows, err := s.pool.Query(ctx, `SELECT n.image, n.node, n.phase, n.reason, n.message, n.bytes_done, n.bytes_total
		FROM image_node_status n JOIN unnest($1::text[], $2::text[]) AS u (image, node) ON n.image = u.image AND n.node = u.node`,
		images, nodes)
	if err != nil {
		return nil, classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k ImageOnNode
		var ns model.ImageNodeStatus
		if err := rows.Scan(&k.Image, &k.Node, &ns.Phase, &ns.Reason, &ns.Message, &ns.BytesDone, &ns.BytesTotal); err != nil {
			return nil, classify(err)
		}
		ns.Node = k.Node
		out[k] = ns
	}
	return out, classify(rows.Err())
}

// TouchImageNodes records that a pod on the node used the images now
// (it started, or it ended); images the node does not hold are passed
// over.
func (s *Store) TouchImageNodes(ctx context.Context, node string, images []string) error {
	_, err := s.pool.Exec(ctx, "UPDATE image_node_status SET last_used = now() WHERE node = $1 AND image = ANY($2)", node, images)
	return classify(err)
}

// HeldImage is an image a node holds (Ready there), as its garbage
// collection sees it.
type HeldImage struct {
	Image string
	// Bytes is the image's size: its artefact's, or its oci layers'.
	Bytes    int64
	LastUsed time.Time
	// InUse: a pod assigned to the node (in any phase, until its row
	// goes) names the image.
	InUse bool
}

// podOnNodeUsesImageSQL is true when a pod bound to node $node names the
// image images.name; it uses the pods_containers and pods_node_name
// indexes.
const podOnNodeUsesImageSQL = `EXISTS (SELECT 1 FROM pods p WHERE p.node_name = n.node
	AND p.spec -> 'containers' @> jsonb_build_array(jsonb_build_object('image', n.image)))`

// ImagesOnNode lists the images Ready on the node.
func (s *Store) ImagesOnNode(ctx context.Context, node string) ([]HeldImage, error) {
	rows, err := s.pool.Query(ctx, `SELECT n.image,
			greatest(coalesce((i.status ->> 'artefactSize')::bigint, 0),
				coalesce((SELECT sum((l ->> 'size')::bigint) FROM jsonb_array_elements(
					CASE WHEN jsonb_typeof(i.status -> 'oci' -> 'layers') = 'array' THEN i.status -> 'oci' -> 'layers' ELSE '[]' END) l), 0))::bigint,
			coalesce(n.last_used, n.updated_at), `+podOnNodeUsesImageSQL+`
		FROM image_node_status n JOIN images i ON i.name = n.image
		WHERE n.node = $1 AND n.phase = $2 ORDER BY n.image`, node, model.ImageReady)
	if err != nil {
		return nil, classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HeldImage, error) {
		var i HeldImage
		err := r.Scan(&i.Image, &i.Bytes, &i.LastUsed, &i.InUse)
		return i, err
	})
	return out, classify(err)
}

// ReleaseImageNode forgets that the node holds the image, so that its
// removal can begin: a pod scheduled there from now on pulls it again,
// while the node sync leaves it alone (CollectedImageNodes).
// It refuses (released false, and why) while the node's state of it is
// not Ready (a pull runs) or a pod assigned to the node names the image;
// the check and the delete share one transaction, with the row locked.
func (s *Store) ReleaseImageNode(ctx context.Context, image, node string) (released bool, why string, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var phase string
		var inUse bool
		err := tx.QueryRow(ctx, "SELECT n.phase, "+podOnNodeUsesImageSQL+
			" FROM image_node_status n WHERE n.image = $1 AND n.node = $2 FOR UPDATE", image, node).Scan(&phase, &inUse)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			why = "the node does not hold it"
			return nil
		case err != nil:
			return err
		case phase != model.ImageReady:
			why = "its state on the node is " + phase
			return nil
		case inUse:
			why = "a pod assigned to the node uses it"
			return nil
		}
		_, err = tx.Exec(ctx, "UPDATE image_node_status SET phase = $3, reason = '', message = '', updated_at = now() WHERE image = $1 AND node = $2",
			image, node, collectedPhase)
		released = err == nil
		return err
	})
	return released, why, classify(err)
}

// CollectedImageNodes lists the images garbage collection removed from
// nodes and no pull brought back, as image -> node -> true.
func (s *Store) CollectedImageNodes(ctx context.Context) (map[string]map[string]bool, error) {
	rows, err := s.pool.Query(ctx, "SELECT image, node FROM image_node_status WHERE phase = $1", collectedPhase)
	if err != nil {
		return nil, classify(err)
	}
	out := map[string]map[string]bool{}
	var image, node string
	_, err = pgx.ForEachRow(rows, []any{&image, &node}, func() error {
		if out[image] == nil {
			out[image] = map[string]bool{}
		}
		out[image][node] = true
		return nil
	})
	return out, classify(err)
}
