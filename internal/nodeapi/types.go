// Package nodeapi is the node-facing part of the control plane's API as
// its agent sees it: the wire types of the routes under
// /api/v1/nodes/{name}/… and /api/v1/namespaces/{ns}/pods/{name}/report,
// shared with the api package that serves them, and Client, the agent's
// typed client of those routes. The agent reaches the control plane only
// through it, never through the database.
package nodeapi

import (
	"github.com/zonewright/zonewright/internal/hostapi"
)

// ReconcileRequest is a node's host inventory, to compare with the pods
// bound to it (POST /api/v1/nodes/{name}/reconcile).
type ReconcileRequest struct {
	Inventory hostapi.HostInventory `json:"inventory"`
	// OrphanGraceSeconds is how long an orphan must have been seen before
	// it is to be removed; at most MaxOrphanGraceSeconds.
	OrphanGraceSeconds int64 `json:"orphanGraceSeconds"`
}

// MaxOrphanGraceSeconds bounds ReconcileRequest.OrphanGraceSeconds (a day).
const MaxOrphanGraceSeconds = 24 * 60 * 60

// ReconcileResponse is the drift the control plane found, and the orphans
// the node is to remove now.
type ReconcileResponse struct {
	Adopted           int              `json:"adopted"`
	Orphans           int              `json:"orphans"`
	NewOrphans        int              `json:"newOrphans"`
	ZoneMissing       int              `json:"zoneMissing"`
	ZoneNotRunning    int              `json:"zoneNotRunning"`
	LifecyclesStarted int              `json:"lifecyclesStarted"`
	Remove            []hostapi.Orphan `json:"remove"`
}

// OrphanRemoval reports one orphan the node removed
// (POST /api/v1/nodes/{name}/orphanremovals).
type OrphanRemoval struct {
	Orphan hostapi.Orphan `json:"orphan"`
}
