package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// Scheduler places pods recorded in the store.
type Scheduler struct {
	Store *store.Store
	// mu keeps this process to one connection waiting on the scheduling
	// lock, so waiters never starve the lock holder of pool connections.
	mu sync.Mutex
}

// schedulingLock serialises placements across every control-plane replica:
// each reads the nodes' usage and binds before the next one reads.
const schedulingLock = 0x7a77_0002

// Schedule binds the pod to the best node, or reports why none fits. It is
// idempotent: a pod already bound keeps its node.
func (s *Scheduler) Schedule(ctx context.Context, ns, name string) (Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	conn, err := s.Store.Pool().Acquire(ctx)
	if err != nil {
		return Decision{}, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(schedulingLock)); err != nil {
		return Decision{}, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(schedulingLock)) //nolint:errcheck // the session ends the lock anyway

	for {
		pod, err := s.Store.Pods().Get(ctx, ns, name)
		if err != nil {
			return Decision{}, err
		}
		if pod.Spec.NodeName != "" && hasCondition(pod, model.PodScheduled) {
			return Decision{Node: pod.Spec.NodeName}, nil
		}
		nodes, err := s.Store.Nodes().List(ctx, store.ListOptions{})
		if err != nil {
			return Decision{}, err
		}
		used, err := s.usage(ctx, conn.Conn(), pod.Metadata.UID)
		if err != nil {
			return Decision{}, err
		}
		candidates := make([]Candidate, len(nodes.Items))
		for i := range nodes.Items {
			candidates[i] = Candidate{Node: &nodes.Items[i], Used: used[nodes.Items[i].Metadata.Name]}
		}
		d := Place(pod, candidates)
		if d.Node == "" {
			return d, nil
		}
		now := time.Now().UTC()
		pod.Spec.NodeName = d.Node
		model.SetCondition(&pod.Status.Conditions, model.PodCondition{Type: model.PodScheduled, Status: model.ConditionTrue}, now)
		err = s.Store.Pods().Update(ctx, pod)
		if errors.Is(err, store.ErrConflict) {
			continue // the pod changed under us (a label edit): read it again
		}
		return d, err
	}
}

// usage sums the requests of pods bound to each node, other than pod uid,
// that still hold their resources.
func (s *Scheduler) usage(ctx context.Context, conn *pgx.Conn, uid string) (map[string]Resources, error) {
	rows, err := conn.Query(ctx, `SELECT node_name, spec FROM pods
		WHERE node_name IS NOT NULL AND coalesce(phase, '') NOT IN ('Succeeded', 'Failed') AND uid <> $1`, uid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Resources{}
	for rows.Next() {
		var node string
		var p model.Pod
		if err := rows.Scan(&node, &p.Spec); err != nil {
			return nil, err
		}
		out[node] = out[node].add(PodRequests(&p))
	}
	return out, rows.Err()
}

func hasCondition(p *model.Pod, typ string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ && c.Status == model.ConditionTrue {
			return true
		}
	}
	return false
}
