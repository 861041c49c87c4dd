package controlapi

import (
	"context"
	"time"
)

// stub is what a stand-in says if it is ever called: the worker runs the
// activities of activities/control under the same names.
const stub = "controlapi: a stand-in for a control-plane activity was called; the worker registers activities/control's"

// Activities stands in for activities/control.Control, the control-plane
// activities of pods, nodes, workloads and claims: a nil *Activities
// names them (var ctl *Activities; workflow.ExecuteActivity(ctx,
// ctl.SchedulePod, ref)).
type Activities struct{}

// ImageActivities stands in for activities/control.Images, the
// control-plane activities of the image catalog.
type ImageActivities struct{}

// CompactChanges drops watch history older than retention.
func (*Activities) CompactChanges(ctx context.Context, retention time.Duration) (int64, error) {
	panic(stub)
}

// ExpireEvents deletes events older than retention.
func (*Activities) ExpireEvents(ctx context.Context, retention time.Duration) (int64, error) {
	panic(stub)
}

// LoadPod reads the pod's row; Found is false if it is gone or belongs to
// another incarnation.
func (*Activities) LoadPod(ctx context.Context, ref PodRef) (PodSnapshot, error) { panic(stub) }

// SchedulePod binds the pod to a node, or says why no node fits.
func (*Activities) SchedulePod(ctx context.Context, ref PodRef) (ScheduleResult, error) { panic(stub) }

// AllocatePodIP gives the pod an address from its node's pod CIDR.
func (*Activities) AllocatePodIP(ctx context.Context, in AllocateInput) (AllocateResult, error) {
	panic(stub)
}

// ReleasePodIP frees the pod's address.
func (*Activities) ReleasePodIP(ctx context.Context, ref PodRef) error { panic(stub) }

// UpdatePodStatus writes a status change and its event.
func (*Activities) UpdatePodStatus(ctx context.Context, u StatusUpdate) error { panic(stub) }

// RemovePod deletes the pod's row; a concurrent write is a retryable
// "Conflict".
func (*Activities) RemovePod(ctx context.Context, ref PodRef) error { panic(stub) }

// EnsurePodWorkflows starts the lifecycle of every pod row without one.
func (*Activities) EnsurePodWorkflows(ctx context.Context, settle time.Duration) (int, error) {
	panic(stub)
}

// ReconcileHost compares a node's inventory with the pods bound to it.
func (*Activities) ReconcileHost(ctx context.Context, in ReconcileHostInput) (ReconcileHostResult, error) {
	panic(stub)
}

// OrphanRemoved forgets a removed orphan and records its event.
func (*Activities) OrphanRemoved(ctx context.Context, in OrphanRemovedInput) error { panic(stub) }

// ObserveNode reads the node's last heartbeat.
func (*Activities) ObserveNode(ctx context.Context, node string) (NodeObservation, error) {
	panic(stub)
}

// MarkNodeNotReady marks a node whose heartbeat is older than the grace
// period NotReady and taints it.
func (*Activities) MarkNodeNotReady(ctx context.Context, in MarkNotReadyInput) (MarkNotReadyResult, error) {
	panic(stub)
}

// MarkNodeReady removes the unreachable taint.
func (*Activities) MarkNodeReady(ctx context.Context, node string) (bool, error) { panic(stub) }

// HoldNodeEvictions records that the node's pods are not evicted while
// the cluster is disrupted.
func (*Activities) HoldNodeEvictions(ctx context.Context, in HoldEvictionsInput) error { panic(stub) }

// EvictNodePods tells every unfinished pod bound to the node to leave it.
func (*Activities) EvictNodePods(ctx context.Context, in EvictInput) (int, error) { panic(stub) }

// ListNodePods names the unfinished pods bound to a node.
func (*Activities) ListNodePods(ctx context.Context, node string) ([]PodRef, error) { panic(stub) }

// WakeImageWaiters wakes the pods bound to the node that wait for the
// image.
func (*Activities) WakeImageWaiters(ctx context.Context, in ImageNodeInput) (int, error) { panic(stub) }

// EnsureNodeWorkflows starts the NodeHealth workflow of every node
// without one.
func (*Activities) EnsureNodeWorkflows(ctx context.Context) (int, error) { panic(stub) }

// UnbindPod readies a pod that left its node for scheduling again.
func (*Activities) UnbindPod(ctx context.Context, in UnbindInput) error { panic(stub) }

// WaitEndpointsLeft waits, within the pod's grace period, until no node
// sends the terminating pod traffic any more.
func (*Activities) WaitEndpointsLeft(ctx context.Context, in EndpointsLeftInput) (EndpointsLeftResult, error) {
	panic(stub)
}

// SyncDeployment brings a deployment one step closer to its spec
// (controlops.Control.SyncDeployment).
func (*Activities) SyncDeployment(ctx context.Context, ref DeploymentRef) (DeploymentSyncResult, error) {
	panic(stub)
}

// SyncJob brings a job one step further (controlops.Control.SyncJob).
func (*Activities) SyncJob(ctx context.Context, ref JobRef) (JobSyncResult, error) { panic(stub) }

// LoadClaim reads the claim and the pods using it.
func (*Activities) LoadClaim(ctx context.Context, ref ClaimRef) (ClaimState, error) { panic(stub) }

// ClaimResized records the size the claim's node applied.
func (*Activities) ClaimResized(ctx context.Context, in ClaimTarget) error { panic(stub) }

// RemoveClaim deletes the claim's row once its node released it.
func (*Activities) RemoveClaim(ctx context.Context, in ClaimTarget) error { panic(stub) }

// PlanClaimMove picks the node a claim whose node is drained moves to.
func (*Activities) PlanClaimMove(ctx context.Context, in ClaimTarget) (ClaimMovePlan, error) {
	panic(stub)
}

// ClaimTransfer mints the relay tickets of one stream of a claim's move.
func (*Activities) ClaimTransfer(ctx context.Context, in ClaimTransferInput) (ClaimTransferTickets, error) {
	panic(stub)
}

// MoveClaimPods tells a moving claim's pods to leave its old node, once
// the pre-copy is done.
func (*Activities) MoveClaimPods(ctx context.Context, in ClaimMoveInput) (int, error) { panic(stub) }

// SwitchClaimNode makes a moved claim's destination its node.
func (*Activities) SwitchClaimNode(ctx context.Context, in ClaimMoveInput) error { panic(stub) }

// EndClaimMove removes a finished move's streams and mark.
func (*Activities) EndClaimMove(ctx context.Context, in ClaimMoveInput) error { panic(stub) }

// LoadSnapshot reads the snapshot, where its claim's data is, and the
// claims cloned from it.
func (*Activities) LoadSnapshot(ctx context.Context, ref SnapshotRef) (SnapshotState, error) {
	panic(stub)
}

// PlaceSnapshot records where the snapshot is taken, or why it cannot be.
func (*Activities) PlaceSnapshot(ctx context.Context, t SnapshotTarget) (bool, error) { panic(stub) }

// SnapshotTaken marks the snapshot ready to restore.
func (*Activities) SnapshotTaken(ctx context.Context, t SnapshotTarget) error { panic(stub) }

// RemoveSnapshot deletes the snapshot's row once its node destroyed it.
func (*Activities) RemoveSnapshot(ctx context.Context, t SnapshotTarget) error { panic(stub) }

// BeginImageImport marks the image Importing and returns its spec.
func (*ImageActivities) BeginImageImport(ctx context.Context, ref ImageRef) (ImagePlan, error) {
	panic(stub)
}

// FetchImage downloads the image's source into the image store,
// heartbeating bytes done and total.
func (*ImageActivities) FetchImage(ctx context.Context, ref ImageRef) (ImageFetched, error) {
	panic(stub)
}

// DecompressImage turns the download into the artefact nodes pull,
// heartbeating its progress.
func (*ImageActivities) DecompressImage(ctx context.Context, ref ImageRef) (ImageArtefact, error) {
	panic(stub)
}

// MarkImageReady registers the imported image and returns the nodes it
// goes to.
func (*ImageActivities) MarkImageReady(ctx context.Context, in ImageReadyInput) (ImageTargets, error) {
	panic(stub)
}

// MarkImageFailed fails the image with a reason.
func (*ImageActivities) MarkImageFailed(ctx context.Context, in ImageFailure) error { panic(stub) }

// RemoveImageArtefact removes the image's files from the store.
func (*ImageActivities) RemoveImageArtefact(ctx context.Context, name string) error { panic(stub) }

// ImagePullPlan says whether and how to pull an image to a node.
func (*ImageActivities) ImagePullPlan(ctx context.Context, in ImageNodeInput) (NodePull, error) {
	panic(stub)
}

// SetImageNodeStatus records the image's state on one node.
func (*ImageActivities) SetImageNodeStatus(ctx context.Context, u ImageNodeUpdate) error { panic(stub) }

// ImageNodeNames lists the nodes where files of the image may be.
func (*ImageActivities) ImageNodeNames(ctx context.Context, ref ImageRef) ([]string, error) {
	panic(stub)
}

// DeleteImageRow removes the image from the catalog.
func (*ImageActivities) DeleteImageRow(ctx context.Context, ref ImageRef) error { panic(stub) }

// ResolvePodImage tells the pod lifecycle what its image is on its node.
func (*ImageActivities) ResolvePodImage(ctx context.Context, in ImageNodeInput) (ResolvedImage, error) {
	panic(stub)
}

// RequestImagePull starts the pull of an image to a node; a control plane
// without pulls is a non-retryable "Invalid".
func (*ImageActivities) RequestImagePull(ctx context.Context, in ImageNodeInput) error { panic(stub) }

// SyncNodeImages starts a pull for every Ready image a fitting Ready node
// lacks.
func (*ImageActivities) SyncNodeImages(ctx context.Context) (int, error) { panic(stub) }

// PlanImageGC says, for each node whose pool is at or above the image GC
// high threshold, which unused images to remove.
func (*ImageActivities) PlanImageGC(ctx context.Context) (ImageGCPlan, error) { panic(stub) }

// ReleaseImageNode forgets that the node holds the image, unless a pod
// assigned there uses it or a pull of it runs, before its removal.
func (*ImageActivities) ReleaseImageNode(ctx context.Context, in ImageNodeInput) (ImageRelease, error) {
	panic(stub)
}

// RecordImageGC records a node's collection in events on the Node.
func (*ImageActivities) RecordImageGC(ctx context.Context, r ImageGCReport) error { panic(stub) }
