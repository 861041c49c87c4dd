package agent

import (
	"context"
	"time"

	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// Defaults of the host reconciliation.
const (
	DefaultReconcileInterval = 30 * time.Second
	DefaultOrphanGrace       = 2 * time.Minute
)

// reconcileHost compares, every interval, what the host holds with what
// the control plane says: zonewright zones, VNICs and datasets no pod bound
// here owns are reported (OrphanFound) and removed once the grace period
// has passed (OrphanRemoved); running pods whose zone vanished or stopped
// get an event (their lifecycle hears of it from the supervisor; one
// without a lifecycle gets one started). The containers' logs kept for
// pods no longer bound here (deleted) are removed. The node sends its inventory to
// the control plane's API, which compares (controlops.ReconcileHost) and
// answers what to remove: no workflow runs for it, and a node that is
// down reconciles nothing until it returns (and cleans itself then).
func (a *Agent) reconcileHost(ctx context.Context, h *hostops.Host, sup *supervisor.Supervisor) {
	t := time.NewTicker(a.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		kept := a.keptLogPods()
		if pods, err := a.superviseBound(ctx, sup, false); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("list the pods bound to this node", "err", err)
			}
		} else {
			a.removeKeptLogs(kept, pods)
		}
		inv, err := h.Inventory(ctx)
		if err != nil {
			a.log.Warn("host reconciliation: inventory", "err", err)
			continue
		}
		res, err := a.api.Reconcile(ctx, nodeapi.ReconcileRequest{Inventory: inv, OrphanGraceSeconds: int64(a.cfg.OrphanGrace / time.Second)})
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("host reconciliation: compare with the control plane", "err", err)
			}
			continue
		}
		for _, o := range res.Remove {
			if err := h.RemoveOrphan(ctx, o); err != nil {
				a.log.Warn("orphan not removed; the next reconciliation tries again", "orphan", o.String(), "err", err)
				continue
			}
			if err := a.api.OrphanRemoved(ctx, nodeapi.OrphanRemoval{Orphan: o}); err != nil {
				a.log.Warn("orphan removed but not recorded", "orphan", o.String(), "err", err)
			}
		}
		if res.Orphans > 0 || res.ZoneMissing > 0 || res.ZoneNotRunning > 0 {
			a.log.Info("host reconciled", "orphans", res.Orphans, "removed", len(res.Remove),
				"zoneMissing", res.ZoneMissing, "zoneNotRunning", res.ZoneNotRunning)
		}
	}
}
