package controlapi

import (
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// ClaimRef names a claim.
type ClaimRef struct {
	Namespace string
	Name      string
}

func (r ClaimRef) String() string { return r.Namespace + "/" + r.Name }

// ClaimState is what a claim's workflow acts on.
type ClaimState struct {
	Found    bool
	Deleting bool
	Retain   bool
	// Node holds the claim's dataset; empty while it is unbound.
	Node   string
	Volume hostapi.ClaimVolume // the requested size in Bytes
	// CapacityBytes is the size the node has applied (status.capacity).
	CapacityBytes int64
	// UsedBy are the pods whose volumes name the claim, and the
	// snapshots of it: ZFS destroys a dataset's snapshots with it.
	UsedBy []string
	// NodeGone: Node was deleted; the claim's data went with it.
	NodeGone bool `json:",omitempty"`
	// Move is the claim's move to another node, if it moves.
	Move *model.ClaimMove `json:",omitempty"`
	// OnSource counts the unfinished pods using the claim still bound to
	// the node it moves from.
	OnSource int `json:",omitempty"`
	// SourceGone: the node the claim moves from was deleted.
	SourceGone bool `json:",omitempty"`
}

// ClaimTarget names one incarnation of a claim (and, for ClaimResized,
// the size applied): the activities' input.
type ClaimTarget struct {
	Claim ClaimRef
	UID   string
	Bytes int64 `json:",omitempty"`
}
