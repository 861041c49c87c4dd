package scheduler

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
)

// usage is what the pods bound to each node and still holding their
// resources request. It follows the change feed: a placement reads the
// pod changes written since the one before, not every bound pod, and
// reads the pods afresh only when it falls behind the retained history.
// Writes to pods all go through the feed, their versions visible in order.
type usage struct {
	loaded  bool
	through int64 // the feed's version applied
	pods    map[string]podUse
	nodes   map[string]Resources
}

// podUse is one bound pod's share of its node; a pod's requests are fixed
// when it is created.
type podUse struct {
	node string
	req  Resources
}

// holds reports whether a pod with these fields holds room on a node.
func holds(node, phase string) bool {
	return node != "" && phase != model.PodSucceeded && phase != model.PodFailed
}

// usage brings s.used up to date and returns the sums per node, leaving
// out the pod uid (the one being placed).
func (s *Scheduler) usage(ctx context.Context, conn *pgx.Conn, uid string) (map[string]Resources, error) {
	if err := s.used.refresh(ctx, conn); err != nil {
		s.used = usage{} // read afresh next time
		return nil, err
	}
	out := maps.Clone(s.used.nodes)
	if p, ok := s.used.pods[uid]; ok {
		r := out[p.node]
		out[p.node] = Resources{r.MilliCPU - p.req.MilliCPU, r.Memory - p.req.Memory, r.Pods - p.req.Pods}
	}
	return out, nil
}

func (u *usage) refresh(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only
	var newest, compacted int64
	if err := tx.QueryRow(ctx, `SELECT (SELECT coalesce(max(resource_version), 0) FROM changes),
		(SELECT through FROM changes_compacted)`).Scan(&newest, &compacted); err != nil {
		return err
	}
	if !u.loaded || u.through < compacted {
		err = u.load(ctx, tx)
	} else {
		err = u.follow(ctx, tx, newest)
	}
	if err != nil {
		return err
	}
	u.loaded, u.through = true, newest
	return nil
}

// load reads every bound pod holding room, as of the transaction's snapshot.
func (u *usage) load(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT uid::text, node_name, coalesce(phase, ''), spec FROM pods WHERE node_name IS NOT NULL`)
	if err != nil {
		return err
	}
	bound, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		UID, Node, Phase string
		Spec             model.PodSpec
	}])
	if err != nil {
		return err
	}
	u.pods, u.nodes = map[string]podUse{}, map[string]Resources{}
	for _, p := range bound {
		if holds(p.Node, p.Phase) {
			u.set(p.UID, podUse{node: p.Node, req: PodRequests(&model.Pod{Spec: p.Spec})})
		}
	}
	return nil
}

// follow applies the pod changes after u.through up to newest.
func (u *usage) follow(ctx context.Context, tx pgx.Tx, newest int64) error {
	rows, err := tx.Query(ctx, `SELECT type, object -> 'metadata' ->> 'uid', coalesce(object -> 'spec' ->> 'nodeName', ''),
		coalesce(object -> 'status' ->> 'phase', ''), object -> 'spec'
		FROM changes WHERE kind = $1 AND resource_version > $2 AND resource_version <= $3 ORDER BY resource_version`,
		model.KindPod, u.through, newest)
	if err != nil {
		return err
	}
	changes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Type, UID, Node, Phase string
		Spec                   json.RawMessage
	}])
	if err != nil {
		return err
	}
	for _, c := range changes {
		if c.Type == "DELETED" || !holds(c.Node, c.Phase) {
			u.drop(c.UID)
			continue
		}
		if p, ok := u.pods[c.UID]; ok && p.node == c.Node {
			continue
		}
		var spec model.PodSpec
		if err := json.Unmarshal(c.Spec, &spec); err != nil {
			return err
		}
		u.drop(c.UID)
		u.set(c.UID, podUse{node: c.Node, req: PodRequests(&model.Pod{Spec: spec})})
	}
	return nil
}

func (u *usage) set(uid string, p podUse) {
	u.pods[uid] = p
	u.nodes[p.node] = u.nodes[p.node].add(p.req)
}

func (u *usage) drop(uid string) {
	p, ok := u.pods[uid]
	if !ok {
		return
	}
	delete(u.pods, uid)
	r := u.nodes[p.node]
	r = Resources{r.MilliCPU - p.req.MilliCPU, r.Memory - p.req.Memory, r.Pods - p.req.Pods}
	if r == (Resources{}) {
		delete(u.nodes, p.node)
	} else {
		u.nodes[p.node] = r
	}
}
