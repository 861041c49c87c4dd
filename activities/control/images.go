package control

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/imagestore"
)

// Images holds the control-plane activities of the image catalog. Every
// exported method is an activity, registered by its name, with the
// arguments and results of the controlops.Images method of the same name.
type Images struct {
	Ops *controlops.Images
}

// Error types of the control-plane image activities (DigestMismatch and
// Invalid are the host activities' types too).
const (
	ErrTypeDigestMismatch = "DigestMismatch"
	ErrTypeInvalid        = "Invalid"
	ErrTypeSourceFailed   = "SourceFailed"
	ErrTypeStalled        = "Stalled"
	ErrTypeImageGone      = "ImageGone"
)

// importError classifies a failed fetch or decompress: a digest mismatch
// and what can never succeed (a source that says no for good, a corrupt
// download, an image deleted meanwhile) are not retried; a stall and the
// rest are.
func importError(err error) error {
	var gone *controlops.ImageGoneError
	if errors.As(err, &gone) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeImageGone, nil)
	}
	var ie *controlops.ImportError
	if !errors.As(err, &ie) {
		return err
	}
	name, src, err := ie.Image, ie.Source, ie.Err
	var mismatch *imagestore.DigestMismatchError
	switch {
	case errors.As(err, &mismatch):
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("image %s: sha256 of %s is %s, the catalog expects %s", name, src, mismatch.Got, mismatch.Want),
			ErrTypeDigestMismatch, err, mismatch.Want, mismatch.Got)
	case imagestore.Permanent(err):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("image %s: %v", name, err), ErrTypeSourceFailed, err)
	case errors.Is(err, imagestore.ErrStalled):
		return temporal.NewApplicationErrorWithCause(fmt.Sprintf("image %s: %v", name, err), ErrTypeStalled, err)
	}
	return fmt.Errorf("image %s: %w", name, err)
}

// BeginImageImport marks the image Importing and returns its spec.
func (a *Images) BeginImageImport(ctx context.Context, ref controlops.ImageRef) (controlops.ImagePlan, error) {
	return a.Ops.BeginImageImport(ctx, ref)
}

// FetchImage downloads the image's source into the image store,
// heartbeating bytes done and total.
func (a *Images) FetchImage(ctx context.Context, ref controlops.ImageRef) (controlops.ImageFetched, error) {
	res, err := a.Ops.FetchImage(heartbeats(ctx), ref)
	return res, importError(err)
}

// DecompressImage turns the download into the artefact nodes pull,
// heartbeating its progress.
func (a *Images) DecompressImage(ctx context.Context, ref controlops.ImageRef) (controlops.ImageArtefact, error) {
	art, err := a.Ops.DecompressImage(heartbeats(ctx), ref)
	return art, importError(err)
}

// MarkImageReady registers the imported image and returns the nodes it
// goes to.
func (a *Images) MarkImageReady(ctx context.Context, in controlops.ImageReadyInput) (controlops.ImageTargets, error) {
	return a.Ops.MarkImageReady(ctx, in)
}

// MarkImageFailed fails the image with a reason.
func (a *Images) MarkImageFailed(ctx context.Context, in controlops.ImageFailure) error {
	return a.Ops.MarkImageFailed(ctx, in)
}

// RemoveImageArtefact removes the image's files from the store.
func (a *Images) RemoveImageArtefact(ctx context.Context, name string) error {
	return a.Ops.RemoveImageArtefact(ctx, name)
}

// ImagePullPlan says whether and how to pull an image to a node.
func (a *Images) ImagePullPlan(ctx context.Context, in controlops.ImageNodeInput) (controlops.NodePull, error) {
	return a.Ops.ImagePullPlan(ctx, in)
}

// SetImageNodeStatus records the image's state on one node.
func (a *Images) SetImageNodeStatus(ctx context.Context, u controlops.ImageNodeUpdate) error {
	return a.Ops.SetImageNodeStatus(ctx, u)
}

// ImageNodeNames lists the nodes where files of the image may be.
func (a *Images) ImageNodeNames(ctx context.Context, ref controlops.ImageRef) ([]string, error) {
	return a.Ops.ImageNodeNames(ctx, ref)
}

// DeleteImageRow removes the image from the catalog.
func (a *Images) DeleteImageRow(ctx context.Context, ref controlops.ImageRef) error {
	return a.Ops.DeleteImageRow(ctx, ref)
}

// ResolvePodImage tells the pod lifecycle what its image is on its node.
func (a *Images) ResolvePodImage(ctx context.Context, in controlops.ImageNodeInput) (controlops.ResolvedImage, error) {
	return a.Ops.ResolvePodImage(ctx, in)
}

// RequestImagePull starts the pull of an image to a node; a control plane
// without pulls is a non-retryable "Invalid".
func (a *Images) RequestImagePull(ctx context.Context, in controlops.ImageNodeInput) error {
	err := a.Ops.RequestImagePull(ctx, in)
	if errors.Is(err, controlops.ErrNoPulls) {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalid, nil)
	}
	return err
}

// SyncNodeImages starts a pull for every Ready image a fitting Ready node
// lacks.
func (a *Images) SyncNodeImages(ctx context.Context) (int, error) {
	return a.Ops.SyncNodeImages(ctx)
}
