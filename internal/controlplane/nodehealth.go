package controlplane

import (
	"context"

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
