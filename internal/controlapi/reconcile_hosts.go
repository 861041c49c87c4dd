package controlapi

import (
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
)

// ReconcileHostInput is one node's inventory to compare with PostgreSQL.
type ReconcileHostInput struct {
	Node      string
	Inventory hostapi.HostInventory
	// OrphanGrace is how long an orphan must have been seen before it is
	// removed.
	OrphanGrace time.Duration
}

// ReconcileHostResult is the drift found on one node.
type ReconcileHostResult struct {
	Node           string
	Adopted        int // zones of pods bound to the node
	Orphans        int // orphans seen, removable or not
	NewOrphans     int // orphans seen for the first time
	ZoneMissing    int
	ZoneNotRunning int
	// LifecyclesStarted counts drifted pods that had no lifecycle running.
	LifecyclesStarted int
	// Remove are the orphans past their grace period.
	Remove []hostapi.Orphan
}

// OrphanRemovedInput reports one orphan removed from a node.
type OrphanRemovedInput struct {
	Node   string
	Orphan hostapi.Orphan
}
