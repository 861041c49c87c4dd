package hostapi

import (
	"strconv"

	"github.com/zonewright/zonewright/internal/transfer"
)

// ClaimVolume is a PersistentVolumeClaim's dataset on this node,
// <VolumesDataset>/<UID>, with Bytes as its quota. It outlives the pods
// that mount it.
type ClaimVolume struct {
	Name  string // the claim's name, in the pod's namespace
	UID   string
	Bytes int64
	// FromSnapshot, when set, makes a new dataset a clone of it.
	FromSnapshot *ClaimSnapshot `json:",omitempty"`
	// Block makes the claim a volume (zvol) of Bytes, rounded up to whole
	// blocks, attached to bhyve pods as a disk, rather than a filesystem.
	Block bool `json:",omitempty"`
}

// ClaimProps are the user properties naming claim c of namespace ns on
// its dataset.
func ClaimProps(ns string, c ClaimVolume) map[string]string {
	return map[string]string{PropClaim: ns + "/" + c.Name, PropClaimUID: c.UID}
}

// ClaimDatasetProps are the properties a copy of a claim's data gets as
// it is received as claim c of namespace ns (a clone copied from another
// node): its own names and size, not those of the claim sent.
func ClaimDatasetProps(ns string, c ClaimVolume) map[string]string {
	props := ClaimProps(ns, c)
	if !c.Block {
		props["quota"] = strconv.FormatInt(c.Bytes, 10)
	}
	return props
}

// ClaimSnapshot is a VolumeSnapshot on its claim's node:
// <VolumesDataset>/<ClaimUID>@<UID>.
type ClaimSnapshot struct {
	UID      string
	ClaimUID string
}

// PodVolume is one volume of a pod: a claim's dataset, or (Claim nil) an
// emptyDir, a child dataset of the zone's own that goes with it.
type PodVolume struct {
	Name      string
	Claim     *ClaimVolume `json:",omitempty"`
	SizeLimit int64        `json:",omitempty"` // an emptyDir's quota; 0: none
}

// PodMount puts a volume at Path inside the zone (zonecfg fs, type lofs).
type PodMount struct {
	Volume   string
	Path     string
	ReadOnly bool `json:",omitempty"`
}

// User properties naming a claim's dataset: what inventories and
// operators read to know whose data it is.
const (
	PropClaim    = "zonewright:claim" // namespace/name
	PropClaimUID = "zonewright:claim-uid"
)

// ClaimTransfer is one stream of a claim's move: snapshot Snapshot of the
// claim's dataset, whole or (From set) what changed since snapshot From,
// through the control plane's relay.
type ClaimTransfer struct {
	Claim    ClaimVolume
	Snapshot string
	From     string `json:",omitempty"`
	Ticket   transfer.Ticket
	// Props are set on what a full stream makes (ClaimDatasetProps, for a
	// clone copied from another node's snapshot).
	Props map[string]string `json:",omitempty"`
}

// ClaimTransferResult says how much moved; Skipped: it was there already.
type ClaimTransferResult struct {
	Bytes   int64
	Skipped bool `json:",omitempty"`
}

// ClaimTransferProgress is what the transfers report as progress.
type ClaimTransferProgress struct {
	Transfer string
	Bytes    int64
}
