package agent

import (
	"context"
	"time"

	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// leaseDurations is how many heartbeat intervals a lease is taken for.
const leaseDurations = 4

// heartbeat renews the node's lease every interval until ctx ends, and
// writes the Node's status when it changed (Kubernetes' node lease: the
// liveness is a tiny write outside the change feed; the full status is
// written on change, the host's part of it read every hostReadBeats
// beats). A node the control plane declared lost while this
// agent kept running (a network partition, a frozen process), or whose
// Node was deleted, is cleaned before it reports Ready again: its evicted
// pods may run elsewhere by now.
func (a *Agent) heartbeat(ctx context.Context, h *hostops.Host, sup *supervisor.Supervisor) {
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, a.cfg.HeartbeatInterval+10*time.Second)
		if err := a.beat(hctx, h, sup); err != nil && ctx.Err() == nil {
			a.log.Warn("node heartbeat failed", "err", err)
		}
		cancel()
	}
}

// beat is one heartbeat: read the Node, clean a node come back from
// being lost, write the status if it changed, renew the lease.
func (a *Agent) beat(ctx context.Context, h *hostops.Host, sup *supervisor.Supervisor) error {
	cur, err := a.api.GetNode(ctx)
	missing := nodeapi.IsNotFound(err)
	if err != nil && !missing {
		return err
	}
	if missing || declaredLost(cur) {
		if _, err := a.cleanHost(ctx, h, "on the node's return"); err != nil && ctx.Err() == nil {
			a.log.Warn("cleaning the host on the node's return failed; the reconciler will remove what is left", "err", err)
		}
		if _, err := a.superviseBound(ctx, sup, true); err != nil && ctx.Err() == nil {
			a.log.Warn("list the pods bound to this node", "err", err)
		}
	}
	if missing {
		if _, err := a.register(ctx); err != nil {
			return err
		}
	} else if _, err := a.writeStatus(ctx, cur, a.latestSummary(ctx)); err != nil {
		return err
	}
	_, err = a.api.RenewLease(ctx, a.cfg.Node, leaseDurations*a.cfg.HeartbeatInterval)
	return err
}

// declaredLost reports whether the Node's Ready condition is other than
// True: only the control plane's node health sets it so.
func declaredLost(n *model.Node) bool {
	c := n.Condition(model.NodeReady)
	return c != nil && c.Status != model.ConditionTrue
}
