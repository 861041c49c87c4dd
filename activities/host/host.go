// Package host holds the host activities: the Temporal face of
// internal/hostops on one node. Only that node's agent runs them, on its
// task queue node/<name>. Each activity calls the host library, turns its
// progress reports into heartbeats, and its errors into the
// ApplicationErrors the workflows match on.
package host

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/progress"
)

// Activities are the host activities of one node. Every exported method
// is an activity, registered by its name (RegisterActivity(a)), with the
// arguments and results of the hostops.Host operation of the same name;
// every one is idempotent, as those operations are.
//
// Errors are ApplicationErrors: a request that cannot succeed however
// often it is tried is a non-retryable "Invalid"; something on the host in
// the way that is not ours a non-retryable "Conflict"; a container SMF
// gave up on a retryable "ContainerMaintenance" whose detail is the
// container's name; the image errors are ErrTypeDigestMismatch and
// ErrTypeImageMissing (non-retryable), ErrTypeDownload and ErrTypeBusy
// (retryable). Everything else is retryable, typed by its illumos kind
// ("NotFound", "AlreadyExists", "WrongState", "Busy", "Transient",
// "Unknown"). Messages name the step, the pod and zone (or image, or
// orphan), the node, the attempt, and the failed command's argv and
// stderr.
type Activities struct {
	Ops *hostops.Host
}

// Error types of the ApplicationErrors host activities return.
const (
	ErrTypeInvalid              = "Invalid"
	ErrTypeConflict             = "Conflict"
	ErrTypeContainerMaintenance = "ContainerMaintenance"
	// ErrTypeDigestMismatch: the artefact's sha256 or size is not the
	// catalog's (non-retryable; nothing of it is left on the node).
	ErrTypeDigestMismatch = "DigestMismatch"
	// ErrTypeImageMissing: an install needs an image the node does not
	// have (non-retryable: the control plane pulls images first).
	ErrTypeImageMissing = "ImageMissing"
	// ErrTypeDownload: the download failed (retryable).
	ErrTypeDownload = "Download"
	// ErrTypeBusy: the image cannot be removed while zones use it
	// (retryable).
	ErrTypeBusy = "Busy"
	// ErrTypeCreateContainerConfig: a container's environment names a
	// secret or key that does not exist (retryable: it may appear).
	ErrTypeCreateContainerConfig = "CreateContainerConfigError"
	// ErrTypeInterrupted: the attempt's context ended before its work did
	// (retryable). The SDK ends it when a heartbeat does not get through
	// to an overloaded server: no fault of the pod's or of the node's.
	ErrTypeInterrupted = "Interrupted"
	// ErrTypeWrongState: the zone (or another object) is not in the state
	// the step needs, e.g. a zone that stopped under a step run in it.
	ErrTypeWrongState = "WrongState"
)

// kindErrType is the ApplicationError type of a retryable illumos failure.
var kindErrType = map[illumos.Kind]string{
	illumos.KindUnknown:       "Unknown",
	illumos.KindNotFound:      "NotFound",
	illumos.KindAlreadyExists: "AlreadyExists",
	illumos.KindWrongState:    ErrTypeWrongState,
	illumos.KindBusy:          "Busy",
	illumos.KindTransient:     "Transient",
}

// heartbeats has the host library's progress reports recorded as the
// activity's heartbeats: every activity passes it, so whatever long work
// an operation does (an install, an uninstall inside an orphan's removal)
// is seen to be alive.
func heartbeats(ctx context.Context) context.Context {
	return progress.With(ctx, func(details any) { activity.RecordHeartbeat(ctx, details) })
}

// fail turns a host library error into the activity's ApplicationError,
// the attempt number after what failed.
func fail(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	return classify(err, activity.GetInfo(ctx).Attempt)
}

// classify is fail for the given attempt.
func classify(err error, attempt int32) error {
	msg := err.Error()
	var he *hostops.Error
	if errors.As(err, &he) {
		msg = fmt.Sprintf("%s, attempt %d: %v", he.What, attempt, he.Err)
	}
	// The message carries the whole story (argv, stderr); a cause would
	// only repeat it in the error's text on the workflow side.
	var (
		conflict *hostops.ConflictError
		maint    *hostops.MaintenanceError
		missing  *hostops.ImageMissingError
		mismatch *hostops.DigestMismatchError
		download *hostops.DownloadError
		inUse    *hostops.ImageInUseError
		invalid  *hostops.InvalidError
		config   *hostops.ConfigError
	)
	switch {
	case errors.As(err, &conflict):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeConflict, nil)
	case errors.As(err, &maint):
		return temporal.NewApplicationError(msg, ErrTypeContainerMaintenance, maint.Container)
	case errors.As(err, &missing):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeImageMissing, nil)
	case errors.As(err, &mismatch):
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeDigestMismatch, nil)
	case errors.As(err, &download):
		return temporal.NewApplicationError(msg, ErrTypeDownload)
	case errors.As(err, &inUse):
		return temporal.NewApplicationError(msg, ErrTypeBusy)
	case errors.As(err, &config):
		return temporal.NewApplicationError(msg, ErrTypeCreateContainerConfig)
	case errors.As(err, &invalid), illumos.KindOf(err) == illumos.KindInvalid:
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeInvalid, nil)
	}
	return temporal.NewApplicationError(msg, kindErrType[illumos.KindOf(err)])
}

// CreateDatasets creates the pod's zone dataset (and a bhyve pod's boot
// volume).
func (a *Activities) CreateDatasets(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.CreateDatasets(heartbeats(ctx), s))
}

// DestroyDatasets destroys the pod's datasets; missing ones are fine.
func (a *Activities) DestroyDatasets(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.DestroyDatasets(heartbeats(ctx), s))
}

// CreateVNIC creates the pod's VNIC over the node's etherstub.
func (a *Activities) CreateVNIC(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.CreateVNIC(heartbeats(ctx), s))
}

// DeleteVNIC deletes the pod's VNIC; a missing one is fine.
func (a *Activities) DeleteVNIC(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.DeleteVNIC(heartbeats(ctx), s))
}

// ConfigureZone writes the zone configuration.
func (a *Activities) ConfigureZone(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.ConfigureZone(heartbeats(ctx), s))
}

// DeleteZoneConfig deletes the zone configuration; a missing one is fine.
func (a *Activities) DeleteZoneConfig(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.DeleteZoneConfig(heartbeats(ctx), s))
}

// InstallZone installs the zone, heartbeating while it runs (and while it
// waits for an install slot).
func (a *Activities) InstallZone(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.InstallZone(heartbeats(ctx), s))
}

// UninstallZone uninstalls the zone (halting it first if it runs),
// heartbeating while it runs.
func (a *Activities) UninstallZone(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.UninstallZone(heartbeats(ctx), s))
}

// BootZone boots the zone; a running zone is success.
func (a *Activities) BootZone(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.BootZone(heartbeats(ctx), s))
}

// HaltZone halts the zone at once; a zone not running is fine.
func (a *Activities) HaltZone(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.HaltZone(heartbeats(ctx), s))
}

// ShutdownZone shuts the zone down gracefully within the grace period,
// heartbeating while it waits; it reports whether the zone stopped.
func (a *Activities) ShutdownZone(ctx context.Context, in hostapi.ShutdownInput) (bool, error) {
	stopped, err := a.Ops.ShutdownZone(heartbeats(ctx), in)
	return stopped, fail(ctx, err)
}

// ConfigureNetwork gives the zone its address and default route.
func (a *Activities) ConfigureNetwork(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.ConfigureNetwork(heartbeats(ctx), s))
}

// StartContainers imports and enables one SMF service per container.
func (a *Activities) StartContainers(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.StartContainers(heartbeats(ctx), s))
}

// WaitContainersOnline waits until every container's service is online,
// heartbeating at each look; a container in maintenance is a
// ContainerMaintenance error naming it.
func (a *Activities) WaitContainersOnline(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.WaitContainersOnline(heartbeats(ctx), s))
}

// RestartContainer restarts one container's service and returns the
// supervisor's Seq from which reports describe the new incarnation.
func (a *Activities) RestartContainer(ctx context.Context, in hostapi.RestartInput) (uint64, error) {
	seq, err := a.Ops.RestartContainer(heartbeats(ctx), in)
	return seq, fail(ctx, err)
}

// StopContainer stops one container and waits until it has stopped.
func (a *Activities) StopContainer(ctx context.Context, in hostapi.RestartInput) error {
	return fail(ctx, a.Ops.StopContainer(heartbeats(ctx), in))
}

// StopContainers disables every container's service.
func (a *Activities) StopContainers(ctx context.Context, s hostapi.PodSandbox) error {
	return fail(ctx, a.Ops.StopContainers(heartbeats(ctx), s))
}

// SupervisePod hands a running pod to the node's supervisor and returns
// the Seq from which reports describe the pod as it is now.
func (a *Activities) SupervisePod(ctx context.Context, in hostapi.SuperviseInput) (uint64, error) {
	seq, err := a.Ops.SupervisePod(heartbeats(ctx), in)
	return seq, fail(ctx, err)
}

// BootPodAgain boots a pod's stopped zone, starts its containers and
// hands the pod to the supervisor in one activity, returning the Seq from
// which reports describe the pod.
func (a *Activities) BootPodAgain(ctx context.Context, in hostapi.SuperviseInput) (uint64, error) {
	seq, err := a.Ops.BootPodAgain(heartbeats(ctx), in)
	return seq, fail(ctx, err)
}

// PullImage downloads the image from the control plane and installs it
// where its kind needs it, heartbeating its progress
// (hostapi.ImagePullProgress).
func (a *Activities) PullImage(ctx context.Context, in hostapi.NodeImage) (hostapi.NodeImageResult, error) {
	res, err := a.Ops.PullImage(heartbeats(ctx), in)
	return res, fail(ctx, err)
}

// RemoveImage removes the image from the node; a Busy error while zones
// still use it.
func (a *Activities) RemoveImage(ctx context.Context, in hostapi.NodeImage) error {
	return fail(ctx, a.Ops.RemoveImage(heartbeats(ctx), in))
}

// Inventory lists what zonewright owns on the node.
func (a *Activities) Inventory(ctx context.Context) (hostapi.HostInventory, error) {
	inv, err := a.Ops.Inventory(heartbeats(ctx))
	return inv, fail(ctx, err)
}

// RemoveOrphan tears an orphan down completely.
func (a *Activities) RemoveOrphan(ctx context.Context, o hostapi.Orphan) error {
	return fail(ctx, a.Ops.RemoveOrphan(heartbeats(ctx), o))
}

// ResizeClaimVolume grows a claim's dataset's quota, online.
func (a *Activities) ResizeClaimVolume(ctx context.Context, c hostapi.ClaimVolume) error {
	return fail(ctx, a.Ops.ResizeClaimVolume(heartbeats(ctx), c))
}

// DestroyClaimVolume destroys a released claim's dataset.
func (a *Activities) DestroyClaimVolume(ctx context.Context, c hostapi.ClaimVolume) error {
	return fail(ctx, a.Ops.DestroyClaimVolume(heartbeats(ctx), c))
}

// SnapshotClaimVolume takes a VolumeSnapshot of a claim's dataset.
func (a *Activities) SnapshotClaimVolume(ctx context.Context, s hostapi.ClaimSnapshot) error {
	return fail(ctx, a.Ops.SnapshotClaimVolume(heartbeats(ctx), s))
}

// DestroyClaimSnapshot destroys a VolumeSnapshot's ZFS snapshot.
func (a *Activities) DestroyClaimSnapshot(ctx context.Context, s hostapi.ClaimSnapshot) error {
	return fail(ctx, a.Ops.DestroyClaimSnapshot(heartbeats(ctx), s))
}

// SendClaimVolume streams a snapshot of a moving claim's dataset to the
// control plane's relay, heartbeating the bytes sent.
func (a *Activities) SendClaimVolume(ctx context.Context, in hostapi.ClaimTransfer) (hostapi.ClaimTransferResult, error) {
	res, err := a.Ops.SendClaimVolume(heartbeats(ctx), in)
	return res, fail(ctx, err)
}

// ReceiveClaimVolume receives a moving claim's stream from the relay
// into its dataset on the destination, heartbeating the bytes received.
func (a *Activities) ReceiveClaimVolume(ctx context.Context, in hostapi.ClaimTransfer) (hostapi.ClaimTransferResult, error) {
	res, err := a.Ops.ReceiveClaimVolume(heartbeats(ctx), in)
	return res, fail(ctx, err)
}
