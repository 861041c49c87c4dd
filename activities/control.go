// Package activities holds zonewright's Temporal activities: control-plane
// work against PostgreSQL, and host work through the illumos commands.
package activities

import (
	"context"
	"time"

	"github.com/zonewright/zonewright/internal/ipam"
	"github.com/zonewright/zonewright/internal/scheduler"
	"github.com/zonewright/zonewright/internal/store"
)

// Control holds the control-plane activities and their dependencies.
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
}

// NewControl wires the control-plane activities over one store.
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
