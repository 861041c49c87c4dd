// Package control holds the control-plane activities, which run on the
// task queue zonewright-control: the Temporal face of internal/controlops.
// Each activity calls the library, turns its progress reports into
// heartbeats, and the errors the workflows tell apart into
// ApplicationErrors of their own types (internal/controlapi's ErrType…).
// The workflows name these activities by internal/controlapi's
// stand-ins, whose method sets a test here holds equal to these.
package control

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/progress"
)

// Control holds the control-plane activities of pods and nodes. Every
// exported method is an activity, registered by its name
// (RegisterActivity(a)), with the arguments and results of the
// controlops.Control method of the same name.
type Control struct {
	Ops *controlops.Control
}

// heartbeats has the library's progress reports recorded as the
// activity's heartbeats.
func heartbeats(ctx context.Context) context.Context {
	return progress.With(ctx, func(details any) { activity.RecordHeartbeat(ctx, details) })
}

// CompactChanges drops watch history older than retention.
func (a *Control) CompactChanges(ctx context.Context, retention time.Duration) (int64, error) {
	return a.Ops.CompactChanges(ctx, retention)
}

// ExpireEvents deletes events older than retention.
func (a *Control) ExpireEvents(ctx context.Context, retention time.Duration) (int64, error) {
	return a.Ops.ExpireEvents(ctx, retention)
}

// LoadPod reads the pod's row; Found is false if it is gone or belongs to
// another incarnation.
func (a *Control) LoadPod(ctx context.Context, ref controlapi.PodRef) (controlapi.PodSnapshot, error) {
	return a.Ops.LoadPod(ctx, ref)
}

// SchedulePod binds the pod to a node, or says why no node fits.
func (a *Control) SchedulePod(ctx context.Context, ref controlapi.PodRef) (controlapi.ScheduleResult, error) {
	return a.Ops.SchedulePod(ctx, ref)
}

// AllocatePodIP gives the pod an address from its node's pod CIDR.
func (a *Control) AllocatePodIP(ctx context.Context, in controlapi.AllocateInput) (controlapi.AllocateResult, error) {
	return a.Ops.AllocatePodIP(ctx, in)
}

// ReleasePodIP frees the pod's address.
func (a *Control) ReleasePodIP(ctx context.Context, ref controlapi.PodRef) error {
	return a.Ops.ReleasePodIP(ctx, ref)
}

// UpdatePodStatus writes a status change and its event.
func (a *Control) UpdatePodStatus(ctx context.Context, u controlapi.StatusUpdate) error {
	return a.Ops.UpdatePodStatus(ctx, u)
}

// RemovePod deletes the pod's row; a concurrent write is a retryable
// "Conflict".
func (a *Control) RemovePod(ctx context.Context, ref controlapi.PodRef) error {
	err := a.Ops.RemovePod(ctx, ref)
	if errors.Is(err, controlops.ErrPodChanged) {
		return temporal.NewApplicationError(err.Error(), "Conflict")
	}
	return err
}

// EnsurePodWorkflows starts the lifecycle of every pod row without one.
func (a *Control) EnsurePodWorkflows(ctx context.Context, settle time.Duration) (int, error) {
	return a.Ops.EnsurePodWorkflows(ctx, settle)
}

// ReconcileHost compares a node's inventory with the pods bound to it.
func (a *Control) ReconcileHost(ctx context.Context, in controlapi.ReconcileHostInput) (controlapi.ReconcileHostResult, error) {
	return a.Ops.ReconcileHost(ctx, in)
}

// OrphanRemoved forgets a removed orphan and records its event.
func (a *Control) OrphanRemoved(ctx context.Context, in controlapi.OrphanRemovedInput) error {
	return a.Ops.OrphanRemoved(ctx, in)
}

// ObserveNode reads the node's last heartbeat.
func (a *Control) ObserveNode(ctx context.Context, node string) (controlapi.NodeObservation, error) {
	return a.Ops.ObserveNode(ctx, node)
}

// MarkNodeNotReady marks a node whose heartbeat is older than the grace
// period NotReady and taints it.
func (a *Control) MarkNodeNotReady(ctx context.Context, in controlapi.MarkNotReadyInput) (controlapi.MarkNotReadyResult, error) {
	return a.Ops.MarkNodeNotReady(ctx, in)
}

// MarkNodeReady removes the unreachable taint.
func (a *Control) MarkNodeReady(ctx context.Context, node string) (bool, error) {
	return a.Ops.MarkNodeReady(ctx, node)
}

// HoldNodeEvictions records that the node's pods are not evicted while
// the cluster is disrupted.
func (a *Control) HoldNodeEvictions(ctx context.Context, in controlapi.HoldEvictionsInput) error {
	return a.Ops.HoldNodeEvictions(ctx, in)
}

// EvictNodePods tells every unfinished pod bound to the node to leave it.
func (a *Control) EvictNodePods(ctx context.Context, in controlapi.EvictInput) (int, error) {
	return a.Ops.EvictNodePods(ctx, in)
}

// ListNodePods names the unfinished pods bound to a node.
func (a *Control) ListNodePods(ctx context.Context, node string) ([]controlapi.PodRef, error) {
	return a.Ops.ListNodePods(ctx, node)
}

// WakeImageWaiters wakes the pods bound to the node that wait for the
// image.
func (a *Control) WakeImageWaiters(ctx context.Context, in controlapi.ImageNodeInput) (int, error) {
	return a.Ops.WakeImageWaiters(ctx, in)
}

// EnsureNodeWorkflows starts the NodeHealth workflow of every node
// without one.
func (a *Control) EnsureNodeWorkflows(ctx context.Context) (int, error) {
	return a.Ops.EnsureNodeWorkflows(ctx)
}

// UnbindPod readies a pod that left its node for scheduling again.
func (a *Control) UnbindPod(ctx context.Context, in controlapi.UnbindInput) error {
	return a.Ops.UnbindPod(ctx, in)
}

// WaitEndpointsLeft waits, within the pod's grace period, until no node
// sends the terminating pod traffic any more.
func (a *Control) WaitEndpointsLeft(ctx context.Context, in controlapi.EndpointsLeftInput) (controlapi.EndpointsLeftResult, error) {
	return a.Ops.WaitEndpointsLeft(heartbeats(ctx), in)
}

// SyncDeployment brings a deployment one step closer to its spec
// (controlops.Control.SyncDeployment).
func (a *Control) SyncDeployment(ctx context.Context, ref controlapi.DeploymentRef) (controlapi.DeploymentSyncResult, error) {
	return a.Ops.SyncDeployment(heartbeats(ctx), ref)
}

// SyncJob brings a job one step further (controlops.Control.SyncJob).
func (a *Control) SyncJob(ctx context.Context, ref controlapi.JobRef) (controlapi.JobSyncResult, error) {
	return a.Ops.SyncJob(heartbeats(ctx), ref)
}

// LoadClaim reads the claim and the pods using it.
func (a *Control) LoadClaim(ctx context.Context, ref controlapi.ClaimRef) (controlapi.ClaimState, error) {
	return a.Ops.LoadClaim(ctx, ref)
}

// ClaimResized records the size the claim's node applied.
func (a *Control) ClaimResized(ctx context.Context, in controlapi.ClaimTarget) error {
	return a.Ops.ClaimResized(ctx, in.Claim, in.UID, in.Bytes)
}

// RemoveClaim deletes the claim's row once its node released it.
func (a *Control) RemoveClaim(ctx context.Context, in controlapi.ClaimTarget) error {
	return a.Ops.RemoveClaim(ctx, in.Claim, in.UID)
}

// PlanClaimMove picks the node a claim whose node is drained moves to.
func (a *Control) PlanClaimMove(ctx context.Context, in controlapi.ClaimTarget) (controlapi.ClaimMovePlan, error) {
	return a.Ops.PlanClaimMove(ctx, in)
}

// ClaimTransfer mints the relay tickets of one stream of a claim's move.
func (a *Control) ClaimTransfer(ctx context.Context, in controlapi.ClaimTransferInput) (controlapi.ClaimTransferTickets, error) {
	return a.Ops.ClaimTransfer(ctx, in)
}

// MoveClaimPods tells a moving claim's pods to leave its old node, once
// the pre-copy is done.
func (a *Control) MoveClaimPods(ctx context.Context, in controlapi.ClaimMoveInput) (int, error) {
	return a.Ops.MoveClaimPods(ctx, in)
}

// SwitchClaimNode makes a moved claim's destination its node.
func (a *Control) SwitchClaimNode(ctx context.Context, in controlapi.ClaimMoveInput) error {
	return a.Ops.SwitchClaimNode(ctx, in)
}

// EndClaimMove removes a finished move's streams and mark.
func (a *Control) EndClaimMove(ctx context.Context, in controlapi.ClaimMoveInput) error {
	return a.Ops.EndClaimMove(ctx, in)
}

// LoadSnapshot reads the snapshot, where its claim's data is, and the
// claims cloned from it.
func (a *Control) LoadSnapshot(ctx context.Context, ref controlapi.SnapshotRef) (controlapi.SnapshotState, error) {
	return a.Ops.LoadSnapshot(ctx, ref)
}

// PlaceSnapshot records where the snapshot is taken, or why it cannot be.
func (a *Control) PlaceSnapshot(ctx context.Context, t controlapi.SnapshotTarget) (bool, error) {
	return a.Ops.PlaceSnapshot(ctx, t)
}

// SnapshotTaken marks the snapshot ready to restore.
func (a *Control) SnapshotTaken(ctx context.Context, t controlapi.SnapshotTarget) error {
	return a.Ops.SnapshotTaken(ctx, t)
}

// RemoveSnapshot deletes the snapshot's row once its node destroyed it.
func (a *Control) RemoveSnapshot(ctx context.Context, t controlapi.SnapshotTarget) error {
	return a.Ops.RemoveSnapshot(ctx, t)
}
