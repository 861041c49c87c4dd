package controlops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// VolumeSyncer starts or wakes the workflow of a claim or a snapshot
// (workflows.VolumeClient): their nodes' work.
type VolumeSyncer interface {
	SyncClaim(ctx context.Context, namespace, name string) error
	SyncSnapshot(ctx context.Context, namespace, name string) error
}

// LoadClaim reads the claim and the pods using it.
func (a *Control) LoadClaim(ctx context.Context, ref controlapi.ClaimRef) (controlapi.ClaimState, error) {
	c, err := a.Store.Claims().Get(ctx, ref.Namespace, ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		return controlapi.ClaimState{}, nil
	}
	if err != nil {
		return controlapi.ClaimState{}, err
	}
	st := controlapi.ClaimState{Found: true, Deleting: c.Metadata.DeletionTimestamp != nil,
		Retain: c.Spec.PersistentVolumeReclaimPolicy == model.ReclaimRetain, Node: c.Status.NodeName,
		Volume: hostapi.ClaimVolume{Name: c.Metadata.Name, UID: c.Metadata.UID, Bytes: model.ClaimBytes(c), Block: c.Mode() == model.VolumeBlock}}
	st.CapacityBytes, _ = model.Bytes(c.Status.Capacity[model.ResourceStorage])
	if st.UsedBy, err = a.Store.PodsUsingClaim(ctx, ref.Namespace, ref.Name); err != nil {
		return controlapi.ClaimState{}, err
	}
	snaps, err := a.Store.Snapshots().ListAll(ctx, store.ListOptions{Namespace: ref.Namespace,
		FieldSelector: "spec.source.persistentVolumeClaimName=" + ref.Name})
	if err != nil {
		return controlapi.ClaimState{}, err
	}
	for _, s := range snaps {
		st.UsedBy = append(st.UsedBy, "volumesnapshot/"+s.Metadata.Name)
	}
	st.Volume.FromSnapshot = claimOrigin(c)
	if st.Move = c.Status.Move; st.Move != nil {
		pods, err := PodsOnNode(ctx, a.Store, st.Move.From)
		if err != nil {
			return controlapi.ClaimState{}, err
		}
		for _, p := range pods {
			if p.Metadata.Namespace == ref.Namespace && slices.Contains(p.Spec.ClaimNames(), ref.Name) {
				st.OnSource++
			}
		}
		if _, err := a.Store.Nodes().Get(ctx, "", st.Move.From); errors.Is(err, store.ErrNotFound) {
			st.SourceGone = true
		} else if err != nil {
			return controlapi.ClaimState{}, err
		}
	}
	if st.Node != "" {
		_, err := a.Store.Nodes().Get(ctx, "", st.Node)
		if errors.Is(err, store.ErrNotFound) {
			st.NodeGone = true
		} else if err != nil {
			return controlapi.ClaimState{}, err
		}
	}
	return st, nil
}

// ClaimResized records that the claim's node applied a size of bytes.
func (a *Control) ClaimResized(ctx context.Context, ref controlapi.ClaimRef, uid string, bytes int64) error {
	_, err := a.Store.Claims().Modify(ctx, ref.Namespace, ref.Name, func(c *model.PersistentVolumeClaim) bool {
		if c.Metadata.UID != uid || model.ClaimBytes(c) != bytes {
			return false // another claim of that name, or grown again since
		}
		c.Status.Capacity = model.ResourceList{model.ResourceStorage: c.Spec.Resources.Requests[model.ResourceStorage]}
		c.Status.Conditions = slices.DeleteFunc(c.Status.Conditions, func(cond model.PersistentVolumeClaimCondition) bool {
			return cond.Type == model.ClaimResizing
		})
		return true
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// RemoveClaim deletes the claim's row once its node released it.
func (a *Control) RemoveClaim(ctx context.Context, ref controlapi.ClaimRef, uid string) error {
	c, err := a.Store.Claims().Get(ctx, ref.Namespace, ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.Metadata.UID != uid {
		return nil
	}
	if _, err := a.Store.Claims().Delete(ctx, ref.Namespace, ref.Name, c.Metadata.ResourceVersion); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("remove claim %s: %w", ref, err)
	}
	a.wakeSnapshot(ctx, ref.Namespace, c.Spec.DataSource)
	return nil
}

// wakeClaims tells the workflows of the pod's claims being deleted or
// moved that a user of theirs is gone. A wake lost here is caught by the claim
// workflow's own look every few minutes.
func (a *Control) wakeClaims(ctx context.Context, p *model.Pod) {
	if a.Volumes == nil {
		return
	}
	for _, name := range p.Spec.ClaimNames() {
		c, err := a.Store.Claims().Get(ctx, p.Metadata.Namespace, name)
		if err != nil || (c.Metadata.DeletionTimestamp == nil && c.Status.Move == nil) {
			continue
		}
		if err := a.Volumes.SyncClaim(ctx, p.Metadata.Namespace, name); err != nil {
			slog.Warn("wake the workflow of a claim being deleted", "claim", p.Metadata.Namespace+"/"+name, "err", err)
		}
	}
}

// setClaimsPhase marks the claims bound to node Lost (its node is
// unreachable or gone) or Bound again, with an event on each.
func (a *Control) setClaimsPhase(ctx context.Context, node, phase string) error {
	changed, err := a.Store.SetClaimsPhase(ctx, node, phase)
	for _, c := range changed {
		ns, name, _ := strings.Cut(c, "/")
		typ, reason, msg := model.EventWarning, "ClaimLost", fmt.Sprintf("Node %s holding the claim's data is unreachable; its pods wait for it", node)
		if phase == model.ClaimBound {
			typ, reason, msg = model.EventNormal, "ClaimBound", fmt.Sprintf("Node %s holding the claim's data is back", node)
		}
		a.event(ctx, model.ObjectReference{Kind: model.KindPersistentVolumeClaim, Namespace: ns, Name: name}, typ, reason, msg)
	}
	return err
}

// claimOrigin is the snapshot a claim was restored from, as its node
// names it; nil for a claim made empty.
func claimOrigin(c *model.PersistentVolumeClaim) *hostapi.ClaimSnapshot {
	if c.Status.SourceSnapshotUID == "" {
		return nil
	}
	return &hostapi.ClaimSnapshot{UID: c.Status.SourceSnapshotUID, ClaimUID: c.Status.SourceClaimUID}
}
