package controlapi

import (
	"time"
)

// NodeObservation is what NodeHealth needs to know of the node's row.
type NodeObservation struct {
	Found bool
	// HeartbeatAge is how long ago the agent last renewed its lease (by
	// the database's clock), or wrote its Ready condition (an agent of an
	// older release, by this process's clock), whichever is newer; -1
	// when it never did either.
	HeartbeatAge time.Duration
	// Tainted: the node carries the unreachable taint.
	Tainted bool
	// GracePeriod and EvictionTimeout are the timings configured now;
	// zero keeps the workflow's own.
	GracePeriod, EvictionTimeout time.Duration
	// NodesNotReady and Nodes count the cluster's nodes whose Ready
	// condition is not True, and all of them; counted only while this
	// node's is not True itself (zero otherwise).
	NodesNotReady, Nodes int `json:",omitempty"`
}

// UnhealthyThreshold is the share of nodes NotReady at once from which the
// cluster counts as disrupted: Kubernetes' --unhealthy-zone-threshold.
const UnhealthyThreshold = 0.55

// Disrupted tells whether so many nodes are NotReady at once that the
// control plane is the likely cause (its own overload or network), not
// the nodes: none is Ready, or more than two and at least
// UnhealthyThreshold of them are not, as Kubernetes' node lifecycle
// controller judges a zone's full and partial disruption. Pods are not
// evicted meanwhile: moving every pod of most nodes would add to the
// overload and replace pods that still run.
func (o NodeObservation) Disrupted() bool {
	notReady := o.NodesNotReady
	return notReady > 0 && (notReady == o.Nodes || notReady > 2 && float64(notReady) >= UnhealthyThreshold*float64(o.Nodes))
}

// HoldEvictionsInput says why a node's pods are not evicted yet.
type HoldEvictionsInput struct {
	Node                 string
	NodesNotReady, Nodes int
}

// MarkNotReadyInput says how stale a heartbeat must be to mark the node.
type MarkNotReadyInput struct {
	Node        string
	GracePeriod time.Duration
}

// MarkNotReadyResult tells whether the node was marked (a heartbeat may
// have arrived since it was observed) and whether anything changed.
type MarkNotReadyResult struct {
	Marked  bool
	Changed bool
}

// EvictInput names the node whose pods are evicted.
type EvictInput struct {
	Node string
	// Lost: the node is unreachable; its pods are marked Failed/NodeLost
	// at once and their lifecycles do no more work on it.
	Lost bool
	// Message tells the pods why; empty: the node stopped heartbeating.
	Message string
	// KeepClaims (namespace/name) move with their pods: those pods stay
	// until the claims' workflows have pre-copied the data elsewhere and
	// tell them to leave.
	KeepClaims []string `json:",omitempty"`
}

// UnbindInput names the pod to unbind and why.
type UnbindInput struct {
	Pod     PodRef
	Message string
}
