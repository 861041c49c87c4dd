package agent

import (
	"context"
	"time"

	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// heartbeat updates the Node every interval until ctx ends. A node the
// control plane declared lost while this agent kept running (a network
// partition, a frozen process) is cleaned before it reports Ready again:
// its evicted pods may run elsewhere by now.
func (a *Agent) heartbeat(ctx context.Context, h *hostops.Host, sup *supervisor.Supervisor) {
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if a.declaredLost(ctx) {
			if _, err := a.cleanHost(ctx, h, "on the node's return"); err != nil && ctx.Err() == nil {
				a.log.Warn("cleaning the host on the node's return failed; the reconciler will remove what is left", "err", err)
			}
			if err := a.superviseBound(ctx, sup, true); err != nil && ctx.Err() == nil {
				a.log.Warn("list the pods bound to this node", "err", err)
			}
		}
		hctx, cancel := context.WithTimeout(ctx, a.cfg.HeartbeatInterval+10*time.Second)
		if _, err := a.sync(hctx, a.summary(hctx)); err != nil && ctx.Err() == nil {
			a.log.Warn("node heartbeat failed", "err", err)
		}
		cancel()
	}
}

// declaredLost reports whether the Node's Ready condition is other than
// True: only the control plane's node health sets it so.
func (a *Agent) declaredLost(ctx context.Context) bool {
	n, err := a.st.Nodes().Get(ctx, "", a.cfg.Node)
	if err != nil {
		return false // the heartbeat reports the trouble
	}
	c := n.Condition(model.NodeReady)
	return c != nil && c.Status != model.ConditionTrue
}
