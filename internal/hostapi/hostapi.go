// Package hostapi is the contract between the control plane and the work
// done on a node: the types host activities take and return, the host
// inventory and drift a node reports, and the event reasons both sides
// write about them. Types only: the implementation (internal/hostops) and
// its callers (the workflows, the control plane, the agent) share this,
// not each other's code. JSON field names are part of recorded workflow
// histories: they never change.
package hostapi

// Event reasons of host reconciliation, written on the node: by the
// control plane's reconciler, and by the agent's startup cleanup.
const (
	ReasonOrphanFound   = "OrphanFound"
	ReasonOrphanRemoved = "OrphanRemoved"
)
