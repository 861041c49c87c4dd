package controlops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/transfer"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// TransferRelay removes the streams of volume transfers (transfer.Relay).
type TransferRelay interface {
	Remove(id string) error
}

// StartClaimMoves marks for moving each claim bound to node that a pod
// bound there uses, has no VolumeSnapshots (they live on the node and
// would not follow) and is neither being deleted nor Lost, and returns
// them (namespace/name), those marked before included. The claims'
// workflows then move the data with the pods; the caller wakes them.
func StartClaimMoves(ctx context.Context, st *store.Store, node string) ([]string, error) {
	claims, err := st.Claims().ListAll(ctx, store.ListOptions{FieldSelector: "status.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list the claims on node %s: %w", node, err)
	}
	pods, err := PodsOnNode(ctx, st, node)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, p := range pods {
		for _, c := range p.Spec.ClaimNames() {
			used[p.Metadata.Namespace+"/"+c] = true
		}
	}
	var moving []string
	for _, c := range claims {
		key := c.Metadata.Namespace + "/" + c.Metadata.Name
		if m := c.Status.Move; m != nil {
			if m.From == node && m.Phase != model.MoveCleaning {
				moving = append(moving, key)
			}
			continue
		}
		if !used[key] || c.Metadata.DeletionTimestamp != nil || c.Status.Phase != model.ClaimBound {
			continue
		}
		why, err := markClaimMove(ctx, st, &c, "")
		if err != nil {
			return moving, err
		}
		marked := why == ""
		if marked {
			moving = append(moving, key)
		}
	}
	return moving, nil
}

// markClaimMove marks claim c, bound to its node, for moving to asked
// (empty: a node the scheduler picks). why says why it cannot move: its
// VolumeSnapshots live on its node and would not follow; a claim being
// deleted, Lost or moving already stays.
func markClaimMove(ctx context.Context, st *store.Store, c *model.PersistentVolumeClaim, asked string) (why string, err error) {
	snaps, err := st.Snapshots().ListAll(ctx, store.ListOptions{Namespace: c.Metadata.Namespace,
		FieldSelector: "spec.source.persistentVolumeClaimName=" + c.Metadata.Name})
	if err != nil {
		return "", err
	}
	if len(snaps) > 0 {
		return fmt.Sprintf("its %d VolumeSnapshot(s) live on node %s and would not follow", len(snaps), c.Status.NodeName), nil
	}
	node := c.Status.NodeName
	why = "it is gone"
	_, err = st.Claims().Modify(ctx, c.Metadata.Namespace, c.Metadata.Name, func(c *model.PersistentVolumeClaim) bool {
		switch {
		case c.Status.NodeName != node || c.Status.NodeName == "":
			why = "it is not bound to a node: it holds no data yet"
		case c.Status.Move != nil:
			why = fmt.Sprintf("it is moving already, from node %s to node %s", c.Status.Move.From, c.Status.Move.To)
		case c.Metadata.DeletionTimestamp != nil:
			why = "it is being deleted"
		case c.Status.Phase != model.ClaimBound:
			why = fmt.Sprintf("it is %s", c.Status.Phase)
		default:
			c.Status.Move = &model.ClaimMove{Phase: model.MovePlanning, From: node, Asked: asked}
			why = ""
			return true
		}
		return false
	})
	if errors.Is(err, store.ErrNotFound) {
		return "it is gone", nil
	}
	return why, err
}

// StartClaimMove marks one claim for moving off its node, to asked if
// set (an operator's move): its workflow moves the data, then its pods.
// The claim must be Bound, with no VolumeSnapshots, not moving and not
// being deleted; otherwise a store.ErrConflict says why. The caller
// wakes its workflow.
func StartClaimMove(ctx context.Context, st *store.Store, ns, name, asked string) (*model.PersistentVolumeClaim, error) {
	c, err := st.Claims().Get(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if asked != "" {
		if asked == c.Status.NodeName {
			return nil, fmt.Errorf("%w: persistentvolumeclaim %q is on node %s already", store.ErrConflict, name, asked)
		}
		if _, err := st.Nodes().Get(ctx, "", asked); err != nil {
			return nil, err
		}
	}
	why, err := markClaimMove(ctx, st, c, asked)
	if err != nil {
		return nil, err
	}
	if why != "" {
		return nil, fmt.Errorf("%w: persistentvolumeclaim %q cannot move: %s", store.ErrConflict, name, why)
	}
	return st.Claims().Get(ctx, ns, name)
}

// keptForMove reports whether pod p uses one of the claims (namespace/
// name) whose workflows move it off its node.
func keptForMove(p *model.Pod, claims []string) bool {
	for _, c := range p.Spec.ClaimNames() {
		if slices.Contains(claims, p.Metadata.Namespace+"/"+c) {
			return true
		}
	}
	return false
}

// PlanClaimMove picks the destination of a claim being moved (see
// scheduler.PlanMove). Move is nil, with a Message, while no node fits.
func (a *Control) PlanClaimMove(ctx context.Context, t controlapi.ClaimTarget) (controlapi.ClaimMovePlan, error) {
	for {
		plan, err := a.Scheduler.PlanMove(ctx, t.Claim.Namespace, t.Claim.Name, t.UID)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if errors.Is(err, store.ErrNotFound) {
			return controlapi.ClaimMovePlan{Message: "the claim is gone"}, nil
		}
		if err != nil {
			return controlapi.ClaimMovePlan{}, err
		}
		if plan.Move != nil {
			a.event(ctx, model.ObjectReference{Kind: model.KindPersistentVolumeClaim, Namespace: t.Claim.Namespace, Name: t.Claim.Name, UID: t.UID},
				model.EventNormal, "ClaimMoving", fmt.Sprintf("Moving the claim's data from node %s to node %s with its pods", plan.Move.From, plan.Move.To))
		}
		return controlapi.ClaimMovePlan{Move: plan.Move, Message: plan.Message}, nil
	}
}

// TransferID names one stream of a claim's move.
func TransferID(claimUID, moveID string, step int) string {
	return claimUID + "-" + model.MoveSnapshot(moveID, step)
}

// ClaimTransfer mints the tickets of one stream of the move.
func (a *Control) ClaimTransfer(ctx context.Context, in controlapi.ClaimTransferInput) (controlapi.ClaimTransferTickets, error) {
	if a.Transfers == nil {
		return controlapi.ClaimTransferTickets{}, errors.New("this control plane relays no volume transfers")
	}
	id := TransferID(in.Move.Target.UID, in.Move.MoveID, in.Step)
	if err := transfer.ValidID(id); err != nil {
		return controlapi.ClaimTransferTickets{}, err
	}
	u := transfer.URL(a.AdvertiseURL, id)
	return controlapi.ClaimTransferTickets{
		Upload:   transfer.Ticket{ID: id, URL: u},
		Download: transfer.Ticket{ID: id, URL: u},
	}, nil
}

// moveClaim changes the claim's move if it is still move in.MoveID.
func (a *Control) moveClaim(ctx context.Context, in controlapi.ClaimMoveInput, change func(c *model.PersistentVolumeClaim) bool) (*model.PersistentVolumeClaim, bool, error) {
	changed := false
	c, err := a.Store.Claims().Modify(ctx, in.Target.Claim.Namespace, in.Target.Claim.Name, func(c *model.PersistentVolumeClaim) bool {
		if c.Metadata.UID != in.Target.UID || c.Status.Move == nil || c.Status.Move.ID != in.MoveID {
			return false
		}
		changed = change(c)
		return changed
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	return c, changed, err
}

// MoveClaimPods ends the pre-copy: the claim is Switching, and its pods
// on the node it leaves are told to leave it (they wait Pending for the
// claim on its new node). It returns how many were told.
func (a *Control) MoveClaimPods(ctx context.Context, in controlapi.ClaimMoveInput) (int, error) {
	c, _, err := a.moveClaim(ctx, in, func(c *model.PersistentVolumeClaim) bool {
		if c.Status.Move.Phase != model.MoveCopying {
			return false
		}
		c.Status.Move.Phase = model.MoveSwitching
		return true
	})
	if err != nil || c == nil || c.Status.Move == nil || c.Status.Move.ID != in.MoveID {
		return 0, err
	}
	m := *c.Status.Move
	pods, err := PodsOnNode(ctx, a.Store, m.From)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		if !slices.Contains(p.Spec.ClaimNames(), in.Target.Claim.Name) || p.Metadata.Namespace != in.Target.Claim.Namespace {
			continue
		}
		sig := podcontract.EvictSignal{Node: m.From, Reason: podcontract.ReasonEvicted,
			Message: fmt.Sprintf("node %s is drained: persistentvolumeclaim %q moves to node %s with its pods", m.From, in.Target.Claim.Name, m.To)}
		if a.Lifecycles != nil {
			if err := a.Lifecycles.Signal(ctx, p.Metadata.Namespace, p.Metadata.Name, podcontract.SignalEvict, sig); err != nil && !errors.Is(err, podcontract.ErrNoLifecycle) {
				return n, fmt.Errorf("tell pod %s/%s to leave node %s: %w", p.Metadata.Namespace, p.Metadata.Name, m.From, err)
			}
		}
		n++
	}
	return n, nil
}

// SwitchClaimNode makes the destination the claim's node, once its copy
// is complete and no pod uses the source's (or, for a clone copied from
// another node's snapshot, once the copy is there): the claim's pods wait
// no more (internal/roomfeed wakes them).
func (a *Control) SwitchClaimNode(ctx context.Context, in controlapi.ClaimMoveInput) error {
	cloned := false
	c, changed, err := a.moveClaim(ctx, in, func(c *model.PersistentVolumeClaim) bool {
		if c.Status.Move.Phase == model.MoveCleaning {
			return false
		}
		cloned = c.Status.Move.Phase == model.MoveCloning
		c.Status.NodeName, c.Status.Phase = c.Status.Move.To, model.ClaimBound
		c.Status.Move.Phase, c.Status.Move.Message = model.MoveCleaning, ""
		return true
	})
	if err != nil || !changed {
		return err
	}
	reason, msg := "ClaimMoved", fmt.Sprintf("The claim's data moved from node %s to node %s", c.Status.Move.From, c.Status.Move.To)
	if cloned {
		reason, msg = "ClaimCloned", fmt.Sprintf("The claim's volumesnapshot was copied from node %s to node %s", c.Status.Move.From, c.Status.Move.To)
	}
	a.event(ctx, model.ObjectReference{Kind: model.KindPersistentVolumeClaim, Namespace: c.Metadata.Namespace, Name: c.Metadata.Name, UID: c.Metadata.UID},
		model.EventNormal, reason, msg)
	return nil
}

// EndClaimMove removes the move's streams from the relay and its mark
// from the claim: the source's copy is gone.
func (a *Control) EndClaimMove(ctx context.Context, in controlapi.ClaimMoveInput) error {
	if a.Transfers != nil {
		for step := 1; step <= 2; step++ {
			if err := a.Transfers.Remove(TransferID(in.Target.UID, in.MoveID, step)); err != nil {
				return fmt.Errorf("remove the streams of claim %s's move: %w", in.Target.Claim, err)
			}
		}
	}
	_, _, err := a.moveClaim(ctx, in, func(c *model.PersistentVolumeClaim) bool {
		c.Status.Move = nil
		return true
	})
	return err
}

// wakeMovingClaims wakes the workflows of the pod's claims that move:
// a pod leaving their old node may be the last they wait for.
func (a *Control) wakeMovingClaims(ctx context.Context, ns string, claims []string) {
	if a.Volumes == nil {
		return
	}
	for _, name := range claims {
		c, err := a.Store.Claims().Get(ctx, ns, name)
		if err != nil || c.Status.Move == nil {
			continue
		}
		if err := a.Volumes.SyncClaim(ctx, ns, name); err != nil {
			slog.Warn("wake the workflow of a moving claim", "claim", ns+"/"+name, "err", err)
		}
	}
}
