package controlops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// LoadSnapshot reads the snapshot, where its claim's data is, and the
// claims cloned from it.
func (a *Control) LoadSnapshot(ctx context.Context, ref controlapi.SnapshotRef) (controlapi.SnapshotState, error) {
	s, err := a.Store.Snapshots().Get(ctx, ref.Namespace, ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		return controlapi.SnapshotState{}, nil
	}
	if err != nil {
		return controlapi.SnapshotState{}, err
	}
	st := controlapi.SnapshotState{Found: true, Deleting: s.Metadata.DeletionTimestamp != nil, Ready: s.Ready(), Node: s.Status.NodeName,
		Snapshot: hostapi.ClaimSnapshot{UID: s.Metadata.UID, ClaimUID: s.Status.SourceClaimUID}}
	if st.Clones, err = a.Store.ClaimsFromSnapshot(ctx, ref.Namespace, ref.Name); err != nil {
		return controlapi.SnapshotState{}, err
	}
	if st.Node != "" {
		return st, nil // taken, or being taken, on its claim's node
	}
	claim := ""
	if s.Spec.Source.PersistentVolumeClaimName != nil {
		claim = *s.Spec.Source.PersistentVolumeClaimName
	}
	c, err := a.Store.Claims().Get(ctx, ref.Namespace, claim)
	switch {
	case errors.Is(err, store.ErrNotFound):
		st.Problem = fmt.Sprintf("persistentvolumeclaim %q not found", claim)
	case err != nil:
		return controlapi.SnapshotState{}, err
	case c.Status.NodeName == "":
		st.Problem = fmt.Sprintf("persistentvolumeclaim %q holds no data yet: no pod has used it", claim)
	case c.Status.Phase == model.ClaimLost:
		st.Problem = fmt.Sprintf("persistentvolumeclaim %q is Lost: node %s holding its data is unreachable", claim, c.Status.NodeName)
	default:
		st.Node, st.Snapshot.ClaimUID, st.RestoreSize = c.Status.NodeName, c.Metadata.UID, c.Spec.Resources.Requests[model.ResourceStorage]
	}
	return st, nil
}

// PlaceSnapshot records where the snapshot is being taken (its claim's
// node and dataset), or why it cannot be; it reports false when the
// snapshot is gone: then nothing may be taken.
func (a *Control) PlaceSnapshot(ctx context.Context, t controlapi.SnapshotTarget) (bool, error) {
	placed := false
	_, err := a.Store.Snapshots().Modify(ctx, t.Snapshot.Namespace, t.Snapshot.Name, func(s *model.VolumeSnapshot) bool {
		if s.Metadata.UID != t.UID || s.Metadata.DeletionTimestamp != nil {
			return false
		}
		notReady := false
		if t.State.Problem != "" {
			if s.Status.Error != nil && s.Status.Error.Message == t.State.Problem {
				return false
			}
			now := time.Now().UTC()
			s.Status.ReadyToUse, s.Status.Error = &notReady, &model.VolumeSnapshotError{Message: t.State.Problem, Time: &now}
			return true
		}
		placed = true
		s.Status = model.VolumeSnapshotStatus{ReadyToUse: &notReady, RestoreSize: t.State.RestoreSize,
			NodeName: t.State.Node, SourceClaimUID: t.State.Snapshot.ClaimUID}
		return true
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return placed && err == nil, err
}

// SnapshotTaken records the snapshot taken on its node: ready to restore.
func (a *Control) SnapshotTaken(ctx context.Context, t controlapi.SnapshotTarget) error {
	_, err := a.Store.Snapshots().Modify(ctx, t.Snapshot.Namespace, t.Snapshot.Name, func(s *model.VolumeSnapshot) bool {
		if s.Metadata.UID != t.UID || s.Ready() {
			return false
		}
		now, ready := time.Now().UTC(), true
		s.Status.ReadyToUse, s.Status.CreationTime, s.Status.Error = &ready, &now, nil
		return true
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// RemoveSnapshot deletes the snapshot's row once its node destroyed it,
// and wakes its claim's workflow if that claim is waiting to go.
func (a *Control) RemoveSnapshot(ctx context.Context, t controlapi.SnapshotTarget) error {
	s, err := a.Store.Snapshots().Get(ctx, t.Snapshot.Namespace, t.Snapshot.Name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Metadata.UID != t.UID {
		return nil
	}
	if _, err := a.Store.Snapshots().Delete(ctx, t.Snapshot.Namespace, t.Snapshot.Name, s.Metadata.ResourceVersion); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("remove snapshot %s: %w", t.Snapshot, err)
	}
	if a.Volumes != nil && s.Spec.Source.PersistentVolumeClaimName != nil {
		if c, err := a.Store.Claims().Get(ctx, t.Snapshot.Namespace, *s.Spec.Source.PersistentVolumeClaimName); err == nil && c.Metadata.DeletionTimestamp != nil {
			if err := a.Volumes.SyncClaim(ctx, c.Metadata.Namespace, c.Metadata.Name); err != nil {
				slog.Warn("wake the workflow of a claim being deleted", "claim", c.Metadata.Namespace+"/"+c.Metadata.Name, "err", err)
			}
		}
	}
	return nil
}

// wakeSnapshot tells the workflow of the snapshot a claim was cloned
// from, if it is being deleted, that a clone is gone.
func (a *Control) wakeSnapshot(ctx context.Context, ns string, ds *model.TypedLocalObjectReference) {
	if a.Volumes == nil || ds == nil {
		return
	}
	s, err := a.Store.Snapshots().Get(ctx, ns, ds.Name)
	if err != nil || s.Metadata.DeletionTimestamp == nil {
		return
	}
	if err := a.Volumes.SyncSnapshot(ctx, ns, ds.Name); err != nil {
		slog.Warn("wake the workflow of a snapshot being deleted", "snapshot", ns+"/"+ds.Name, "err", err)
	}
}
