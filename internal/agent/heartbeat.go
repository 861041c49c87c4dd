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
	var known *model.Node
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, a.cfg.HeartbeatInterval+10*time.Second)
		var err error
		if known, err = a.beat(hctx, h, sup, known); err != nil && ctx.Err() == nil {
			a.log.Warn("node heartbeat failed", "err", err)
		}
		cancel()
	}
}

// beat is one heartbeat. Knowing the Node as the control plane last
// answered it (known), it is one request: renew the lease while the Node
// is still that one, then write the status if it changed. Otherwise (the
// Node changed since, a control plane that does not check, a first beat
// or one after a failure) it goes the long way: read the Node, clean a
// node come back from being lost, write the status if it changed, renew
// the lease. It answers the Node to check at the next beat; nil for the
// long way.
func (a *Agent) beat(ctx context.Context, h *hostops.Host, sup *supervisor.Supervisor, known *model.Node) (*model.Node, error) {
	if known != nil {
		l, err := a.api.RenewLease(ctx, a.cfg.Node, leaseDurations*a.cfg.HeartbeatInterval, known.Metadata.ResourceVersion)
		switch {
		case err == nil && l.NodeVersion() == known.Metadata.ResourceVersion:
			return a.writeStatus(ctx, known, a.latestSummary(ctx))
		case err != nil && !nodeapi.IsConflict(err) && !nodeapi.IsNotFound(err):
			return nil, err
		}
		// The Node changed (a 409, or 404: deleted), or a control plane
		// that does not check renewed the lease regardless: read it now.
	}
	cur, err := a.api.GetNode(ctx)
	missing := nodeapi.IsNotFound(err)
	if err != nil && !missing {
		return nil, err
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
		cur, err = a.register(ctx)
	} else {
		cur, err = a.writeStatus(ctx, cur, a.latestSummary(ctx))
	}
	if err != nil {
		return nil, err
	}
	// Renewed whatever the Node's version now: it was just checked.
	l, err := a.api.RenewLease(ctx, a.cfg.Node, leaseDurations*a.cfg.HeartbeatInterval, "")
	if err != nil || l.NodeVersion() != cur.Metadata.ResourceVersion {
		return nil, err
	}
	return cur, nil
}

// declaredLost reports whether the Node's Ready condition is other than
// True: only the control plane's node health sets it so.
func declaredLost(n *model.Node) bool {
	c := n.Condition(model.NodeReady)
	return c != nil && c.Status != model.ConditionTrue
}
