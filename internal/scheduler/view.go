package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// view is the scheduler's picture of the nodes and of what the pods bound
// to each, still holding their resources, request. It follows the change
// feed: a placement reads the node and pod changes written since the one
// before, not every node and bound pod, and reads them afresh only when it
// falls behind the retained history. Writes to nodes and pods all go
// through the feed, their versions visible in order.
type view struct {
	loaded bool
	// podsThrough and nodesThrough: the feed's versions applied.
	podsThrough, nodesThrough int64
	pods                      map[string]podUse
	used                      map[string]Resources
	nodes                     map[string]*model.Node
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

// refresh brings s.view up to date.
func (s *Scheduler) refresh(ctx context.Context) error {
	if err := s.view.refresh(ctx, s.Store); err != nil {
		s.view = view{} // read afresh next time
		return err
	}
	return nil
}

// cluster returns the view's nodes, by name, and the requests bound to
// each, leaving out the pod uid (the one being placed). The nodes are the
// view's own: callers read them only.
func (s *Scheduler) cluster(uid string) ([]*model.Node, map[string]Resources) {
	used := maps.Clone(s.view.used)
	if p, ok := s.view.pods[uid]; ok {
		r := used[p.node]
		used[p.node] = Resources{r.MilliCPU - p.req.MilliCPU, r.Memory - p.req.Memory, r.Pods - p.req.Pods}
	}
	nodes := slices.Collect(maps.Values(s.view.nodes))
	slices.SortFunc(nodes, func(a, b *model.Node) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
	return nodes, used
}

func (v *view) refresh(ctx context.Context, st *store.Store) error {
	err := v.follow(ctx, st)
	if errors.Is(err, errReload) {
		err = v.follow(ctx, st)
	}
	return err
}

// follow applies what changed since the view's versions, loading it first
// if it is empty.
func (v *view) follow(ctx context.Context, st *store.Store) error {
	if !v.loaded {
		// The nodes from one list's snapshot; what changed after it is
		// followed below.
		list, err := st.Nodes().List(ctx, store.ListOptions{})
		if err != nil {
			return err
		}
		if v.nodesThrough, err = strconv.ParseInt(list.Metadata.ResourceVersion, 10, 64); err != nil {
			return err
		}
		v.nodes = make(map[string]*model.Node, len(list.Items))
		for i := range list.Items {
			v.nodes[list.Items[i].Metadata.Name] = &list.Items[i]
		}
	}
	// Writes commit out of version order; a settled snapshot holds every
	// change up to its version and none after it, so nothing applied
	// later can be older than what was applied.
	return st.ReadSettled(ctx, func(tx pgx.Tx, newest int64) error {
		var compacted int64
		if err := tx.QueryRow(ctx, `SELECT through FROM changes_compacted`).Scan(&compacted); err != nil {
			return err
		}
		if v.nodesThrough < compacted || v.loaded && v.podsThrough < compacted {
			if !v.loaded {
				return errors.New("the change history was compacted past the nodes just listed; read them again")
			}
			*v = view{}
			return errReload
		}
		if !v.loaded {
			if err := v.loadPods(ctx, tx); err != nil {
				return err
			}
			v.podsThrough = newest
		} else if err := v.followPods(ctx, tx, newest); err != nil {
			return err
		}
		if err := v.followNodes(ctx, tx, newest); err != nil {
			return err
		}
		v.loaded = true
		return nil
	})
}

// errReload says the view fell behind the retained history and was
// cleared: refresh reads it afresh.
var errReload = errors.New("the view fell behind the change history")

// loadPods reads every bound pod holding room, as of the transaction's snapshot.
func (v *view) loadPods(ctx context.Context, tx pgx.Tx) error {
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
	v.pods, v.used = map[string]podUse{}, map[string]Resources{}
	for _, p := range bound {
		if holds(p.Node, p.Phase) {
			v.setPod(p.UID, podUse{node: p.Node, req: PodRequests(&model.Pod{Spec: p.Spec})})
		}
	}
	return nil
}

// followPods applies the pod changes after v.podsThrough up to newest.
func (v *view) followPods(ctx context.Context, tx pgx.Tx, newest int64) error {
	rows, err := tx.Query(ctx, `SELECT type, object -> 'metadata' ->> 'uid', coalesce(object -> 'spec' ->> 'nodeName', ''),
		coalesce(object -> 'status' ->> 'phase', ''), object -> 'spec'
		FROM changes WHERE kind = $1 AND resource_version > $2 AND resource_version <= $3 ORDER BY resource_version`,
		model.KindPod, v.podsThrough, newest)
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
			v.dropPod(c.UID)
			continue
		}
		if p, ok := v.pods[c.UID]; ok && p.node == c.Node {
			continue
		}
		var spec model.PodSpec
		if err := json.Unmarshal(c.Spec, &spec); err != nil {
			return err
		}
		v.dropPod(c.UID)
		v.setPod(c.UID, podUse{node: c.Node, req: PodRequests(&model.Pod{Spec: spec})})
	}
	v.podsThrough = max(v.podsThrough, newest)
	return nil
}

// followNodes applies the node changes after v.nodesThrough up to newest.
func (v *view) followNodes(ctx context.Context, tx pgx.Tx, newest int64) error {
	rows, err := tx.Query(ctx, `SELECT type, name, object FROM changes
		WHERE kind = $1 AND resource_version > $2 AND resource_version <= $3 ORDER BY resource_version`,
		model.KindNode, v.nodesThrough, newest)
	if err != nil {
		return err
	}
	changes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Type, Name string
		Object     json.RawMessage
	}])
	if err != nil {
		return err
	}
	for _, c := range changes {
		if c.Type == "DELETED" {
			delete(v.nodes, c.Name)
			continue
		}
		n := new(model.Node)
		if err := json.Unmarshal(c.Object, n); err != nil {
			return err
		}
		v.nodes[c.Name] = n
	}
	v.nodesThrough = max(v.nodesThrough, newest)
	return nil
}

// bind counts a pod just bound to node, as its change will say.
func (v *view) bind(uid, node string, req Resources) {
	v.dropPod(uid)
	v.setPod(uid, podUse{node: node, req: req})
}

func (v *view) setPod(uid string, p podUse) {
	v.pods[uid] = p
	v.used[p.node] = v.used[p.node].add(p.req)
}

func (v *view) dropPod(uid string) {
	p, ok := v.pods[uid]
	if !ok {
		return
	}
	delete(v.pods, uid)
	r := v.used[p.node]
	r = Resources{r.MilliCPU - p.req.MilliCPU, r.Memory - p.req.Memory, r.Pods - p.req.Pods}
	if r == (Resources{}) {
		delete(v.used, p.node)
	} else {
		v.used[p.node] = r
	}
}
