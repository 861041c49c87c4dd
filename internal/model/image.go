package model

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// KindImage is the catalog's resource kind (cluster-scoped).
const KindImage = "Image"

// Image is an entry of the image catalog: where a zone's root comes from.
type Image struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta  `json:"metadata"`
	Spec     ImageSpec   `json:"spec"`
	Status   ImageStatus `json:"status"`
}

// ImageSpec is what an operator declares about an image.
type ImageSpec struct {
	// Kind says what the artefact is and how nodes install it.
	Kind string `json:"kind"`
	// Source is an http(s):// or file:// URL; an oci image's is a registry
	// reference (host[:port]/repository[:tag|@sha256:…]); zone-template
	// images have none.
	Source string `json:"source,omitempty"`
	// SHA256 is the hex digest of the file at Source, as downloaded.
	SHA256 string `json:"sha256,omitempty"`
	// Size is the download's size in bytes, when known (progress totals).
	Size int64 `json:"size,omitempty"`
	// Compression is none, gzip, zstd or xz; empty means detect it from
	// the file's magic bytes.
	Compression string `json:"compression,omitempty"`
	// Resources are what a pod of this image gets when it asks for none.
	Resources ResourceList `json:"resources,omitempty"`
	// Brands the image installs as; empty means the kind's natural brand.
	Brands []string `json:"brands,omitempty"`
	// PullSecrets are the kubernetes.io/dockerconfigjson secrets an oci
	// image's registry is asked with: the secrets of the pods that created
	// it, read by the import, never copied.
	PullSecrets []SecretReference `json:"pullSecrets,omitempty"`
}

// SecretReference names a secret of any namespace.
type SecretReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Image kinds.
const (
	ImageLXTarball    = "lx-tarball"    // a root file system tarball; lx zones install it with -t
	ImageZFSStream    = "zfs-stream"    // a zfs send stream; received once, zones clone its @base
	ImageBhyveDisk    = "bhyve-disk"    // a raw disk; written to a zvol, VMs clone its @base
	ImageZoneTemplate = "zone-template" // sparse/ipkg zones installed from the host's packages
	ImageOCI          = "oci"           // an image in an OCI registry; nodes keep its layers as datasets, zones clone the top one
)

// ImageKinds lists every kind.
var ImageKinds = []string{ImageLXTarball, ImageZFSStream, ImageBhyveDisk, ImageZoneTemplate, ImageOCI}

// ReservedImagePrefix begins the store names of oci layer blobs, which
// the image store keeps beside the catalog's images.
const ReservedImagePrefix = "blob-"

// Compressions an image source may use.
const (
	CompressionNone = "none"
	CompressionGzip = "gzip"
	CompressionZstd = "zstd"
	CompressionXZ   = "xz"
)

// Annotations and labels around images.
const (
	// AnnotationSize names a size preset of the image map (small, medium,
	// large) for a pod that sets no resources.
	AnnotationSize = "zonewright.io/size"
	// AnnotationRequestedImagePrefix + container name keeps the image a
	// container asked for when it was an alias or left to the default.
	AnnotationRequestedImagePrefix = "images.zonewright.io/"
	// LabelNodeBrandPrefix + brand marks a node that can install the brand.
	LabelNodeBrandPrefix = "zonewright.io/brand-"
	// LabelMadeForPods ("true") marks a registry image the control plane
	// added to the catalog because a pod named its reference: it counts
	// against the cap on such images and goes when no pod has used it
	// for a while. Only the control plane sets it.
	LabelMadeForPods = "zonewright.io/made-for-pods"
)

// IsRegistryReference reports whether a container's image names an image
// in a registry (host[:port]/repository[:tag|@digest], or Docker Hub's
// short forms) rather than a catalog image or alias: catalog names are
// DNS labels, so they hold no '/', ':' or '@'. A bare "alpine" is a
// catalog name; Docker Hub's is "alpine:3.20" or "docker.io/library/alpine".
func IsRegistryReference(image string) bool { return strings.ContainsAny(image, "/:@") }

// latestTag reports whether a registry reference names the tag latest,
// said or left out, and no digest: Kubernetes pulls such an image Always.
func latestTag(ref string) bool {
	if strings.Contains(ref, "@") {
		return false
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	return !ok || tag == "latest"
}

// NaturalBrands are the brands an image of a kind can install; its spec
// may narrow them.
func NaturalBrands(kind string) []string {
	switch kind {
	case ImageLXTarball:
		return []string{BrandLX}
	case ImageZFSStream, ImageOCI:
		return []string{BrandLX} // zones clone a golden snapshot
	case ImageBhyveDisk:
		return []string{BrandBhyve}
	case ImageZoneTemplate:
		return []string{BrandSparse, BrandIPKG}
	}
	return nil
}

// EffectiveBrands returns the brands the image installs as.
func (s *ImageSpec) EffectiveBrands() []string {
	if len(s.Brands) > 0 {
		return s.Brands
	}
	return NaturalBrands(s.Kind)
}

// Fits reports whether the image can install a zone of brand.
func (s *ImageSpec) Fits(brand string) bool { return slices.Contains(s.EffectiveBrands(), brand) }

// NeedsPull reports whether nodes must download the image before a zone
// installs from it: zone templates come from the host's own packages.
func (s ImageSpec) NeedsPull() bool { return s.Kind != ImageZoneTemplate }

// Node returns the image's status on node, if it has one.
func (s *ImageStatus) Node(node string) (ImageNodeStatus, bool) {
	for _, n := range s.Nodes {
		if n.Node == node {
			return n, true
		}
	}
	return ImageNodeStatus{}, false
}

// ImageStatus is the import's progress and where the image is present.
type ImageStatus struct {
	Phase   string `json:"phase,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Progress of the fetch: bytes downloaded and the total (0: unknown).
	BytesDone  int64 `json:"bytesDone,omitempty"`
	BytesTotal int64 `json:"bytesTotal,omitempty"`
	// Artefact is the decompressed file the nodes pull: its digest and size.
	ArtefactSHA256 string `json:"artefactSHA256,omitempty"`
	ArtefactSize   int64  `json:"artefactSize,omitempty"`
	// Nodes lists the image's presence per node, by node name. The store
	// keeps each node's state in a row of its own (one node's report
	// rewrites nothing else) and fills this in on every read.
	Nodes          []ImageNodeStatus `json:"nodes,omitempty"`
	LastTransition *time.Time        `json:"lastTransitionTime,omitempty"`
	// OCI is what the registry said of an oci image: set by its import.
	OCI *OCIImage `json:"oci,omitempty"`
}

// OCIImage is an oci image as resolved in its registry, for linux/amd64.
type OCIImage struct {
	// Digest is the manifest's ("sha256:…"): the image the nodes install.
	Digest string     `json:"digest"`
	Layers []OCILayer `json:"layers"`
	Config OCIConfig  `json:"config"`
}

// OCILayer is one layer, bottom first.
type OCILayer struct {
	Digest    string `json:"digest"` // of the blob as stored (compressed)
	DiffID    string `json:"diffID"` // of the uncompressed tar
	Size      int64  `json:"size"`
	MediaType string `json:"mediaType"`
}

// OCIConfig is the part of an image's configuration a pod runs with.
type OCIConfig struct {
	Entrypoint   []string `json:"entrypoint,omitempty"`
	Cmd          []string `json:"cmd,omitempty"`
	Env          []string `json:"env,omitempty"`
	WorkingDir   string   `json:"workingDir,omitempty"`
	User         string   `json:"user,omitempty"`
	ExposedPorts []string `json:"exposedPorts,omitempty"` // documentation only, as in Kubernetes
}

// Image phases (the catalog's), and per-node phases.
const (
	ImagePending   = "Pending"
	ImageImporting = "Importing"
	ImageReady     = "Ready"
	ImageFailed    = "Failed"
	ImagePulling   = "Pulling" // per node only
)

// Reasons of a Failed image.
const (
	ImageReasonCancelled      = "Cancelled"
	ImageReasonDigestMismatch = "DigestMismatch"
	ImageReasonFetchFailed    = "FetchFailed"
	ImageReasonPullFailed     = "PullFailed"
)

// ImageNodeStatus is the image on one node.
type ImageNodeStatus struct {
	Node    string `json:"node"`
	Phase   string `json:"phase"` // Pulling, Ready, Failed
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Progress of the node's download: bytes the control plane has sent
	// it and the total, recorded about once a second while it pulls;
	// complete (equal) once Ready, 0 when it downloaded nothing.
	BytesDone  int64      `json:"bytesDone,omitempty"`
	BytesTotal int64      `json:"bytesTotal,omitempty"`
	Updated    *time.Time `json:"updated,omitempty"`
	// LastUsed is when a pod on the node last started or ended with the
	// image, or the node pulled it: image garbage collection removes the
	// least recently used first.
	LastUsed *time.Time `json:"lastUsed,omitempty"`
}

func (i *Image) GetTypeMeta() *TypeMeta    { return &i.TypeMeta }
func (i *Image) GetMeta() *ObjectMeta      { return &i.Metadata }
func (i *Image) Parts() (spec, status any) { return &i.Spec, &i.Status }

// PodImageLimitError is a write refused because it would add one more
// image made for pods (LabelMadeForPods) to a catalog that holds as many
// as the control plane allows; Kubernetes refuses a create over a quota
// the same way (403).
type PodImageLimitError struct {
	Object string // `pods "web"`
	Field  string // spec.containers[0].image
	Image  string // the catalog name it would have had
	Source string // the registry reference
	Limit  int
}

func (e *PodImageLimitError) Error() string {
	return fmt.Sprintf("%s is forbidden: %s: %s", e.Object, e.Field, e.Detail())
}

// Detail is the refusal without the object and the field.
func (e *PodImageLimitError) Detail() string {
	return fmt.Sprintf("%q would add a registry image to the catalog, which holds the most images added for pods it may (limit %d); "+
		"delete the pods of images no longer needed (an image no pod uses leaves the catalog after a while, or at once with DELETE /api/v1/images/<name>), "+
		"or ask an operator to create image %q (POST /api/v1/images, kind oci, source %q)", e.Source, e.Limit, e.Image, e.Source)
}
