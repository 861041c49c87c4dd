package activities

import (
	"context"
	"errors"
)

// NodeImage is one catalog image as a node pulls it: the decompressed
// artefact, served by the control plane over HTTP.
type NodeImage struct {
	Name   string // catalog name (a DNS-1123 label)
	Kind   string // model.ImageLXTarball, ImageZFSStream, ImageBhyveDisk, ImageZoneTemplate
	URL    string // control-plane download URL of the decompressed artefact
	Token  string // bearer token the download endpoint wants
	SHA256 string // hex sha256 of the decompressed artefact
	Size   int64  // bytes of the decompressed artefact
}

// NodeImageResult says where the image now is on the node.
type NodeImageResult struct {
	// Artefact is what installs use: a snapshot (pool/…/images/<name>@base)
	// or a file path (<image-dir>/<name>.tar).
	Artefact string
	Bytes    int64
}

// PullImage downloads the image from the control plane and installs it
// where its kind needs it. Contract only; implemented in the image layer.
func (h *Host) PullImage(ctx context.Context, in NodeImage) (NodeImageResult, error) {
	return NodeImageResult{}, errors.New("PullImage: not implemented yet")
}

// RemoveImage removes the image from the node; removing an absent image
// succeeds. Contract only; implemented in the image layer.
func (h *Host) RemoveImage(ctx context.Context, in NodeImage) error {
	return errors.New("RemoveImage: not implemented yet")
}
