package controlplane

import (
	"context"
	"time"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/informer"
	"github.com/zonewright/zonewright/internal/model"
)

// watchNodes starts the health workflow of every node as soon as it is
// registered (whichever API replica a node registered through), so a node
// never runs unwatched until the next reconcile. It starts those of the
// nodes already there first, and again after each start over.
func (cp *ControlPlane) watchNodes(ctx context.Context) {
	defer cp.bg.Done()
	nodes := informer.Handlers[model.Node]{
		Listed: func(ctx context.Context, nodes []model.Node) error {
			for _, n := range nodes {
				if err := cp.nodes.Ensure(ctx, n.Metadata.Name); err != nil {
					return err
				}
			}
			return nil
		},
		Changed: func(ctx context.Context, ev informer.Event[model.Node]) error {
			if ev.Type != informer.Added {
				return nil
			}
			return cp.nodes.Ensure(ctx, ev.Object.Metadata.Name)
		},
	}
	(&informer.Informer{Name: "node watch", Log: cp.log, Sources: []informer.Source{informer.Kind(cp.Store.Nodes(), nodes)}}).Run(ctx)
}

// nodeSweepEvery is how often the nodes' heartbeats are checked against
// their recorded readiness (Kubernetes' node monitor period): how late
// after its grace period a silent node is marked NotReady at most.
const nodeSweepEvery = 5 * time.Second

// sweepNodes tells the health workflows of nodes whose heartbeat went
// stale, or came back, to look (controlops' NodeSweep): they sleep
// while their node is Ready. Every replica sweeps; a check told twice is
// looked at once.
func (cp *ControlPlane) sweepNodes(ctx context.Context, ctl *controlops.Control) {
	defer cp.bg.Done()
	every := time.NewTicker(max(min(nodeSweepEvery, ctl.NodeGracePeriod/4), 100*time.Millisecond))
	defer every.Stop()
	sweep := &controlops.NodeSweep{Control: ctl}
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-every.C:
		}
		_, err := sweep.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			cp.log.Warn("the node sweep failed; lost nodes are noticed late until it works again", "err", err)
		case err == nil && failing:
			cp.log.Info("the node sweep works again")
		}
		failing = err != nil
	}
}
