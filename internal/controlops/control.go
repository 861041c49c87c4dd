// Package controlops is the control plane's work on its state: pods as
// their lifecycles see them (load, schedule, address, status, unbind,
// remove), node health (observe, mark NotReady and Ready, evict), the
// host reconciliation's bookkeeping (orphans, drift), repairs of the
// one-workflow-per-row invariants, and the image catalog (imports, pulls,
// per-node status). It works on PostgreSQL (internal/store), the
// scheduler, IPAM and the image store.
//
// It knows nothing of Temporal: the control-plane activities
// (activities/control) are thin wrappers over it, and the API calls it
// directly (Pods to create and delete pods, EvictNodePods, ReconcileHost
// for the agents, …). What
// the activities take and return are internal/controlapi's types.
// Starting and signalling workflows goes through small interfaces the
// workflows package implements (Lifecycles, NodeHealthStarter,
// ImagePulls); long work reports progress through the caller's callback
// (internal/progress).
package controlops

import (
	"context"
	"time"

	"github.com/zonewright/zonewright/internal/ipam"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/scheduler"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/store"
)

// Control is the control plane's work on pods and nodes, with its
// dependencies.
type Control struct {
	Store      *store.Store
	Scheduler  *scheduler.Scheduler
	IPAM       *ipam.IPAM
	Lifecycles Lifecycles
	// NodeHealth starts nodes' health workflows; nil leaves them alone.
	NodeHealth NodeHealthStarter
	// NodeGracePeriod and NodeEvictionTimeout are the node health timings
	// configured now; ObserveNode hands them to every NodeHealth, so a
	// changed flag reaches the nodes' running workflows. Zero: theirs.
	NodeGracePeriod, NodeEvictionTimeout time.Duration
	// HearingSince is when this control plane began to hear the nodes'
	// heartbeats (its start): a node's silence counts from then at the
	// most, so a control plane down longer than the grace period gives
	// every node a fresh one instead of marking them all NotReady, as
	// Kubernetes' node lifecycle controller does after its restart.
	// Zero: silence counts in full.
	HearingSince time.Time
	// ServiceNet is the control plane's service network snapshot; nil:
	// terminating pods do not wait to leave the nodes' rules.
	ServiceNet *servicenet.Holder
	// Volumes wakes the workflows of claims and snapshots being deleted
	// when what held them back goes; nil leaves them to their own looks.
	Volumes VolumeSyncer
	// Transfers relays claims' streams between nodes when a claim moves
	// with its pods, at AdvertiseURL (the API's base URL as nodes reach
	// it); nil: claims do not move.
	Transfers    TransferRelay
	AdvertiseURL string
	// Metrics measures pods' starts and scheduling; nil measures nothing.
	Metrics *metrics.Serve
}

// NewControl wires a Control over one store.
func NewControl(st *store.Store, lc Lifecycles) *Control {
	return &Control{Store: st, Scheduler: &scheduler.Scheduler{Store: st}, IPAM: ipam.New(st.Pool()), Lifecycles: lc}
}

// CompactChanges drops watch history older than retention.
func (a *Control) CompactChanges(ctx context.Context, retention time.Duration) (int64, error) {
	return a.Store.Compact(ctx, retention)
}

// ExpireEvents deletes events older than retention.
func (a *Control) ExpireEvents(ctx context.Context, retention time.Duration) (int64, error) {
	return a.Store.ExpireEvents(ctx, retention)
}
