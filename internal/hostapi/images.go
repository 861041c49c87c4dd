package hostapi

// NodeImage is one catalog image as a node pulls it: the decompressed
// artefact, served by the control plane over HTTP.
type NodeImage struct {
	Name   string // catalog name (a DNS-1123 label)
	Kind   string // model.ImageLXTarball, ImageZFSStream, ImageBhyveDisk, ImageZoneTemplate
	URL    string // control-plane download URL of the decompressed artefact
	SHA256 string // hex sha256 of the decompressed artefact
	Size   int64  // bytes of the decompressed artefact
	// Layers of an oci image (whose SHA256 is its manifest's digest and
	// URL empty), bottom first.
	Layers []NodeLayer `json:",omitempty"`
}

// NodeImageResult says where the image now is on the node.
type NodeImageResult struct {
	// Artefact is what installs use: a snapshot (pool/…/images/<name>@base)
	// or a file path (<image-dir>/<name>.tar); "" for a zone template.
	Artefact string
	Bytes    int64
}

// ImagePullProgress is what PullImage reports as its progress.
type ImagePullProgress struct {
	Image string
	Bytes int64 // received so far
	Total int64 // the artefact's size
}

// NodeLayer is one layer of an oci image as a node fetches it.
type NodeLayer struct {
	Digest    string // "sha256:…" of the blob as stored (compressed)
	DiffID    string // "sha256:…" of the uncompressed tar
	Size      int64
	MediaType string
	URL       string // control-plane download URL of the blob
}
