package controlapi

import (
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// Error types of the control-plane image activities (DigestMismatch and
// Invalid are the host activities' types too).
const (
	ErrTypeDigestMismatch = "DigestMismatch"
	ErrTypeInvalid        = "Invalid"
	ErrTypeSourceFailed   = "SourceFailed"
	ErrTypeStalled        = "Stalled"
	ErrTypeImageGone      = "ImageGone"
	// ErrTypeFetchFailed: a failure a retry may get past.
	ErrTypeFetchFailed = "FetchFailed"
)

// ImageRef names one image incarnation: an image deleted and created again
// has another UID, and work for the old one leaves it alone.
type ImageRef struct {
	Name string
	UID  string
}

// ImagePlan is what the import needs to know of the image.
type ImagePlan struct {
	Found bool
	Spec  model.ImageSpec
}

// ImageFetched reports the fetch.
type ImageFetched struct {
	Bytes      int64
	Downloaded int64
	Resumed    bool
}

// ImageArtefact is the decompressed file nodes pull.
type ImageArtefact struct {
	SHA256      string
	Size        int64
	Compression string
}

// ImageReadyInput registers an imported image.
type ImageReadyInput struct {
	Image    ImageRef
	Artefact ImageArtefact
}

// ImageFailure fails an image with a reason.
type ImageFailure struct {
	Image   ImageRef
	Reason  string
	Message string
}

// ImageTargets are the nodes an image goes to, and how they fetch it.
type ImageTargets struct {
	Nodes []string
	Image hostapi.NodeImage
}

// ImageNodeInput names an image on a node.
type ImageNodeInput struct {
	Image string
	Node  string
	// NeverPull: the pod's imagePullPolicy is Never.
	NeverPull bool `json:",omitempty"`
	// Refresh: the pod's imagePullPolicy is Always; an oci image's tag is
	// resolved again, and imported again if it moved.
	Refresh bool `json:",omitempty"`
}

// NodePull is what a pull of one image to one node needs; Skip when the
// image needs no pull there (gone, not Ready, a zone template, no brand fits).
type NodePull struct {
	Skip  bool
	Why   string
	Image hostapi.NodeImage
}

// ImageNodeUpdate is one node's image status.
type ImageNodeUpdate struct {
	Image   string
	Node    string
	Phase   string
	Reason  string
	Message string
}

// ResolvedImage is a pod's image as its node sees it.
type ResolvedImage struct {
	// Found is false for an image not in the catalog (a pod created
	// before the catalog); the pod then installs as it always did.
	Found bool
	Kind  string
	// Present: the node holds the image (or needs none).
	Present bool
	// Pull: nobody is bringing the image to the node (it lacks it, or its
	// last pull failed); the pod should start a pull.
	Pull bool
	// Failed: the last pull to this node failed, or the image's import
	// did; Message says why.
	Failed  bool
	Message string
	// Reason replaces ImagePullBackOff as the reason of a Failed wait.
	Reason string `json:",omitempty"`
	// Digest is an oci image's manifest digest (hex): the one its zone
	// clones.
	Digest string `json:",omitempty"`
	// Config is an oci image's configuration: what its containers run
	// when the pod does not say.
	Config *model.OCIConfig `json:",omitempty"`
}

// ImageGCPlan lists the nodes whose pool is at or above the high
// threshold and what to remove from each.
type ImageGCPlan struct {
	Nodes []NodeImageGC
}

// NodeImageGC is one node's collection: the images to remove, least
// recently used first, and the pool's usage in bytes.
type NodeImageGC struct {
	Node   string
	Remove []ImageGCCandidate
	// Used and Size are the pool's; Left the usage estimated after the
	// removals; LowThreshold the percent it must fall below.
	Used, Size, Left int64
	LowThreshold     int
	// Short: the unused images are not enough to get below LowThreshold.
	Short bool
}

// ImageGCCandidate is one image chosen for removal from a node.
type ImageGCCandidate struct {
	Image    string
	Bytes    int64
	LastUsed time.Time
}

// ImageGCReport is what a node's collection did: Removed names the
// images removed, in Plan's order.
type ImageGCReport struct {
	Plan    NodeImageGC
	Removed []string
}

// ImageRelease says whether the node's hold of the image was released
// for its removal, and if not, why.
type ImageRelease struct {
	Released bool
	Why      string `json:",omitempty"`
}
