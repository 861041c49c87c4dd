package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pglock"
	"github.com/zonewright/zonewright/internal/store"
)

// MovePlan is where a claim's data goes when its node is drained.
type MovePlan struct {
	Move *model.ClaimMove
	// Message says why no node takes it yet (Move is nil then).
	Message string
}

// PlanMove picks the destination of a claim whose node is drained: the
// node Place picks for its pods there, with room for the claim beside
// the claims bound to it. The destination and a new move ID are written
// on the claim under the scheduling lock, so later placements count the
// claim's size on its destination. A claim whose move is planned already
// keeps its plan.
func (s *Scheduler) PlanMove(ctx context.Context, ns, name, uid string) (MovePlan, error) {
	done, err := s.wait(ctx)
	if err != nil {
		return MovePlan{}, err
	}
	defer done()
	conn, err := s.Store.Pool().Acquire(ctx)
	if err != nil {
		return MovePlan{}, fmt.Errorf("%w: %v", store.ErrUnavailable, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", pglock.Scheduling); err != nil {
		return MovePlan{}, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", pglock.Scheduling) //nolint:errcheck // the session ends the lock anyway

	c, err := s.Store.Claims().Get(ctx, ns, name)
	if err != nil {
		return MovePlan{}, err
	}
	m := c.Status.Move
	if c.Metadata.UID != uid || m == nil {
		return MovePlan{Message: "the claim is not moving"}, nil
	}
	if m.To != "" {
		return MovePlan{Move: m}, nil
	}
	// The pods of the claim on the node it leaves: the first one stands
	// for them all (their node selectors and brands agree in practice).
	var pod *model.Pod
	names, err := s.Store.PodsUsingClaim(ctx, ns, name)
	if err != nil {
		return MovePlan{}, err
	}
	for _, n := range names {
		p, err := s.Store.Pods().Get(ctx, ns, n)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return MovePlan{}, err
		}
		if p.Spec.NodeName == m.From {
			pod = p
			pod.Spec.NodeName = "" // it is placed anew
			break
		}
	}
	if pod == nil {
		pod = &model.Pod{Metadata: model.ObjectMeta{Namespace: ns, Name: name}}
	}
	nodes, used, err := s.cluster(ctx, conn.Conn(), pod.Metadata.UID)
	if err != nil {
		return MovePlan{}, err
	}
	claimBytes, err := s.claimBytes(ctx, conn.Conn())
	if err != nil {
		return MovePlan{}, err
	}
	candidates := make([]Candidate, 0, len(nodes))
	for _, n := range nodes {
		cand := Candidate{Node: n, Used: used[n.Metadata.Name], ClaimBytes: claimBytes[n.Metadata.Name], NewClaimBytes: model.ClaimBytes(c)}
		switch {
		case n.Metadata.Name == m.From:
			cand.Excluded = reasonMoveSource
		case m.Asked != "" && n.Metadata.Name != m.Asked:
			cand.Excluded = reasonNotAsked
		}
		candidates = append(candidates, cand)
	}
	d := Place(pod, candidates)
	if d.Node == "" {
		msg := d.Message
		if m.Message != msg {
			m.Message = msg
			if err := s.Store.Claims().Update(ctx, c); err != nil && !errors.Is(err, store.ErrConflict) {
				return MovePlan{}, err
			}
		}
		return MovePlan{Message: msg}, nil
	}
	c.Status.Move = &model.ClaimMove{Phase: model.MoveCopying, From: m.From, To: d.Node, Asked: m.Asked, ID: strconv.FormatInt(time.Now().UnixNano(), 36)}
	if err := s.Store.Claims().Update(ctx, c); err != nil {
		return MovePlan{}, err // a conflict is retried by the caller
	}
	return MovePlan{Move: c.Status.Move}, nil
}

// reasonMoveSource: the node a claim moves away from; reasonNotAsked:
// the nodes an operator's move did not ask for.
const (
	reasonMoveSource = "node(s) the claim moves away from"
	reasonNotAsked   = "node(s) other than the one asked for"
)
