package control

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/imagestore"
)

// Images holds the control-plane activities of the image catalog. Every
// exported method is an activity, registered by its name, with the
// arguments and results of the controlops.Images method of the same name.
type Images struct {
	Ops *controlops.Images
}

// importError classifies a failed fetch or decompress: a digest mismatch
// and what can never succeed (a source refused or that says no for good,
// a corrupt or oversized download, an image deleted meanwhile) are not
// retried; a stall and the rest are. What reaches Temporal's history (and
// from there the image's status) is imagestore.Reason's client-safe class
// only, with no cause attached; the full error goes to the log.
func importError(log log.Logger, err error) error {
	var gone *controlops.ImageGoneError
	if errors.As(err, &gone) {
		return temporal.NewNonRetryableApplicationError(err.Error(), controlapi.ErrTypeImageGone, nil)
	}
	var ie *controlops.ImportError
	if !errors.As(err, &ie) {
		return err
	}
	log.Warn("image import failed", "image", ie.Image, "err", ie.Err)
	msg := fmt.Sprintf("image %s: %s", ie.Image, imagestore.Reason(ie.Err))
	var mismatch *imagestore.DigestMismatchError
	var refused *controlops.RegistryError
	switch {
	case errors.As(ie.Err, &refused):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("image %s: %s", ie.Image, refused.Reason), controlapi.ErrTypeSourceFailed, nil)
	case errors.As(ie.Err, &mismatch):
		return temporal.NewNonRetryableApplicationError(msg, controlapi.ErrTypeDigestMismatch, nil)
	case imagestore.Permanent(ie.Err):
		return temporal.NewNonRetryableApplicationError(msg, controlapi.ErrTypeSourceFailed, nil)
	case errors.Is(ie.Err, imagestore.ErrStalled):
		return temporal.NewApplicationError(msg, controlapi.ErrTypeStalled)
	}
	return temporal.NewApplicationError(msg, controlapi.ErrTypeFetchFailed)
}

// BeginImageImport marks the image Importing and returns its spec.
func (a *Images) BeginImageImport(ctx context.Context, ref controlapi.ImageRef) (controlapi.ImagePlan, error) {
	return a.Ops.BeginImageImport(ctx, ref)
}

// FetchImage downloads the image's source into the image store,
// heartbeating bytes done and total.
func (a *Images) FetchImage(ctx context.Context, ref controlapi.ImageRef) (controlapi.ImageFetched, error) {
	res, err := a.Ops.FetchImage(heartbeats(ctx), ref)
	return res, importError(activity.GetLogger(ctx), err)
}

// DecompressImage turns the download into the artefact nodes pull,
// heartbeating its progress.
func (a *Images) DecompressImage(ctx context.Context, ref controlapi.ImageRef) (controlapi.ImageArtefact, error) {
	art, err := a.Ops.DecompressImage(heartbeats(ctx), ref)
	return art, importError(activity.GetLogger(ctx), err)
}

// MarkImageReady registers the imported image and returns the nodes it
// goes to.
func (a *Images) MarkImageReady(ctx context.Context, in controlapi.ImageReadyInput) (controlapi.ImageTargets, error) {
	return a.Ops.MarkImageReady(ctx, in)
}

// MarkImageFailed fails the image with a reason.
func (a *Images) MarkImageFailed(ctx context.Context, in controlapi.ImageFailure) error {
	return a.Ops.MarkImageFailed(ctx, in)
}

// RemoveImageArtefact removes the image's files from the store.
func (a *Images) RemoveImageArtefact(ctx context.Context, name string) error {
	return a.Ops.RemoveImageArtefact(ctx, name)
}

// ImagePullPlan says whether and how to pull an image to a node.
func (a *Images) ImagePullPlan(ctx context.Context, in controlapi.ImageNodeInput) (controlapi.NodePull, error) {
	return a.Ops.ImagePullPlan(ctx, in)
}

// SetImageNodeStatus records the image's state on one node.
func (a *Images) SetImageNodeStatus(ctx context.Context, u controlapi.ImageNodeUpdate) error {
	return a.Ops.SetImageNodeStatus(ctx, u)
}

// ImageNodeNames lists the nodes where files of the image may be.
func (a *Images) ImageNodeNames(ctx context.Context, ref controlapi.ImageRef) ([]string, error) {
	return a.Ops.ImageNodeNames(ctx, ref)
}

// DeleteImageRow removes the image from the catalog.
func (a *Images) DeleteImageRow(ctx context.Context, ref controlapi.ImageRef) error {
	return a.Ops.DeleteImageRow(ctx, ref)
}

// ResolvePodImage tells the pod lifecycle what its image is on its node.
func (a *Images) ResolvePodImage(ctx context.Context, in controlapi.ImageNodeInput) (controlapi.ResolvedImage, error) {
	return a.Ops.ResolvePodImage(ctx, in)
}

// RequestImagePull starts the pull of an image to a node; a control plane
// without pulls is a non-retryable "Invalid".
func (a *Images) RequestImagePull(ctx context.Context, in controlapi.ImageNodeInput) error {
	err := a.Ops.RequestImagePull(ctx, in)
	if errors.Is(err, controlops.ErrNoPulls) {
		return temporal.NewNonRetryableApplicationError(err.Error(), controlapi.ErrTypeInvalid, nil)
	}
	return err
}

// SyncNodeImages starts a pull for every Ready image a fitting Ready node
// lacks.
func (a *Images) SyncNodeImages(ctx context.Context) (int, error) {
	return a.Ops.SyncNodeImages(ctx)
}

// PlanImageGC says which unused images to remove from which node.
func (a *Images) PlanImageGC(ctx context.Context) (controlapi.ImageGCPlan, error) {
	return a.Ops.PlanImageGC(ctx)
}

// ReleaseImageNode forgets that the node holds the image before its
// removal, unless it is in use there.
func (a *Images) ReleaseImageNode(ctx context.Context, in controlapi.ImageNodeInput) (controlapi.ImageRelease, error) {
	return a.Ops.ReleaseImageNode(ctx, in)
}

// RecordImageGC records a node's collection in events on the Node.
func (a *Images) RecordImageGC(ctx context.Context, r controlapi.ImageGCReport) error {
	return a.Ops.RecordImageGC(ctx, r)
}
