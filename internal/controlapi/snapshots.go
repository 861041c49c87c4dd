package controlapi

import (
	"github.com/zonewright/zonewright/internal/hostapi"
)

// SnapshotRef names a VolumeSnapshot.
type SnapshotRef struct {
	Namespace string
	Name      string
}

func (r SnapshotRef) String() string { return r.Namespace + "/" + r.Name }

// SnapshotState is what a snapshot's workflow acts on.
type SnapshotState struct {
	Found    bool
	Deleting bool
	Ready    bool
	// Node holds the snapshot (its claim's node); empty before it is
	// taken, when its claim is not bound.
	Node     string
	Snapshot hostapi.ClaimSnapshot
	// Clones are the claims restored from it that exist: ZFS keeps a
	// snapshot while clones of it do.
	Clones []string
	// Problem says why the snapshot cannot be taken (its claim missing,
	// unbound or Lost).
	Problem string `json:",omitempty"`
	// RestoreSize is its claim's size.
	RestoreSize string `json:",omitempty"`
}

// SnapshotTarget names one incarnation of a snapshot.
type SnapshotTarget struct {
	Snapshot SnapshotRef
	UID      string
	State    SnapshotState `json:",omitempty"`
}
