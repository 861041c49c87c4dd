package scheduler

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/internal/model"
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
	conn, unlock, err := s.lock(ctx)
	if err != nil {
		return MovePlan{}, err
	}
	defer unlock()

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
	pod, err := s.movingPod(ctx, ns, name, m.From)
	if err != nil {
		return MovePlan{}, err
	}
	candidates, err := s.moveCandidates(ctx, conn.Conn(), pod, c)
	if err != nil {
		return MovePlan{}, err
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

// moveCandidates are the nodes that may take claim c, moving with pod:
// not the node it leaves, and only the one an operator asked for if any.
func (s *Scheduler) moveCandidates(ctx context.Context, conn *pgx.Conn, pod *model.Pod, c *model.PersistentVolumeClaim) ([]Candidate, error) {
	if err := s.refresh(ctx); err != nil {
		return nil, err
	}
	nodes, used := s.cluster(pod.Metadata.UID)
	claimBytes, err := s.claimBytes(ctx, conn)
	if err != nil {
		return nil, err
	}
	m := c.Status.Move
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
	return candidates, nil
}

// movingPod is the pod to place for the claim (name in ns) leaving node
// from, unbound: the first of its pods on that node stands for them all
// (their node selectors and brands agree in practice); without one, a
// pod that asks for nothing.
func (s *Scheduler) movingPod(ctx context.Context, ns, name, from string) (*model.Pod, error) {
	names, err := s.Store.PodsUsingClaim(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		p, err := s.Store.Pods().Get(ctx, ns, n)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if p.Spec.NodeName == from {
			p.Spec.NodeName = "" // it is placed anew
			return p, nil
		}
	}
	return &model.Pod{Metadata: model.ObjectMeta{Namespace: ns, Name: name}}, nil
}

// reasonMoveSource: the node a claim moves away from; reasonNotAsked:
// the nodes an operator's move did not ask for.
const (
	reasonMoveSource = "node(s) the claim moves away from"
	reasonNotAsked   = "node(s) other than the one asked for"
)
