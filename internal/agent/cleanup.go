package agent

import (
	"context"
	"fmt"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/retry"
)

// Event reasons of the startup cleanup (a removed orphan's is
// hostapi.ReasonOrphanRemoved, as the control plane's reconciler writes).
const (
	ReasonZoneAdopted  = "ZoneAdopted"
	ReasonOrphanFailed = "OrphanRemovalFailed"
)

// CleanupResult is what the startup cleanup did.
type CleanupResult struct {
	Adopted []string // zones kept
	Removed []string // orphans removed
	Failed  []string // orphans that could not be removed (the reconciler retries)
}

// cleanHost runs before the node reports Ready: at start, before the
// worker polls, and when the agent finds its node declared lost (it was
// cut off, not stopped). It removes the
// zonewright zones, VNICs and datasets whose pod is no longer bound to
// this node (deleted while the agent was away, or evicted and now running
// elsewhere under the same name and UID) and adopts the rest untouched:
// nothing is rebooted or reinstalled, the pods' lifecycles reconcile them.
// Nothing zonewright did not create is looked at (see Host.Inventory).
//
// The inventory is read before the pods: a zone is made only after its
// pod is bound, so a zone seen has its binding visible by then. The same
// holds for the containers' kept logs, which it removes for pods no
// longer bound here.
//
// when says which ("at agent start", "on the node's return"), for events.
func (a *Agent) cleanHost(ctx context.Context, h *hostops.Host, when string) (CleanupResult, error) {
	var res CleanupResult
	inv, err := retryHost(ctx, a.log, "list the host's zonewright resources", func() (hostapi.HostInventory, error) {
		return h.Inventory(ctx)
	})
	if err != nil {
		return res, fmt.Errorf("inventory of the host: %w", err)
	}
	kept := a.keptLogPods()
	var list []model.Pod
	err = retry.Do(ctx, apiRetry, func(context.Context) error {
		var err error
		list, err = a.api.BoundPods(ctx)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("list the pods bound to node %s: %w", a.cfg.Node, err)
	}
	pods := hostops.BoundPodsOf(list)
	a.removeKeptLogs(kept, list)
	plan := hostops.PlanHost(inv, pods)
	node := model.ObjectReference{Kind: model.KindNode, Name: a.cfg.Node}

	for _, z := range plan.Adopted {
		res.Adopted = append(res.Adopted, z.Name)
		a.log.Info("adopted a zone of a pod bound to this node; left as it is", "zone", z.Name, "pod", z.Pod, "uid", z.UID, "state", z.State)
		// The node's own note on the pod (the lifecycle cannot see an
		// adoption, which happens before the node's worker polls): an
		// event row of the agent's source, changing nothing the pod's
		// lifecycle writes (docs/reconciliation.md, "Who writes a pod").
		a.event(ctx, model.ObjectReference{Kind: model.KindPod, Namespace: z.Namespace(), Name: z.PodName(), UID: z.UID},
			model.EventNormal, ReasonZoneAdopted,
			fmt.Sprintf("The agent of node %s kept zone %s (%s) as it is %s", a.cfg.Node, z.Name, z.State, when))
	}
	for _, o := range plan.Orphans {
		if err := h.RemoveOrphan(ctx, o); err != nil {
			res.Failed = append(res.Failed, o.String())
			a.log.Warn("could not remove an orphan; the reconciler will try again", "orphan", o.String(), "err", err)
			a.event(ctx, node, model.EventWarning, ReasonOrphanFailed, fmt.Sprintf("Could not remove %s: %v", o, err))
			continue
		}
		res.Removed = append(res.Removed, o.String())
		a.log.Info("removed the resources of a pod no longer bound to this node", "orphan", o.String())
		a.event(ctx, node, model.EventNormal, hostapi.ReasonOrphanRemoved,
			fmt.Sprintf("Removed %s %s: no pod bound to node %s owns it", o, when, a.cfg.Node))
	}
	a.log.Info("host cleanup done", "when", when, "adopted", len(res.Adopted), "removed", len(res.Removed), "failed", len(res.Failed))
	return res, nil
}

func (a *Agent) event(ctx context.Context, obj model.ObjectReference, typ, reason, msg string) {
	if err := a.api.RecordEvent(ctx, obj, typ, reason, msg); err != nil {
		a.log.Warn("record event", "reason", reason, "err", err)
	}
}

// KeptLogsDir is where, under the state directory, the containers' logs
// are kept once their zones halted or went (containerlog.Kept).
const KeptLogsDir = "logs"

// keptLogPods are the pods whose logs are kept, listed before the pods
// bound here are: a log is kept only for a pod already bound, so one
// listed has its binding visible by then.
func (a *Agent) keptLogPods() []string {
	if a.keptLogs == nil {
		return nil
	}
	uids, err := a.keptLogs.Pods()
	if err != nil {
		a.log.Warn("list the kept container logs", "err", err)
	}
	return uids
}

// removeKeptLogs removes the kept logs among kept of the pods not in
// bound: their pods were deleted (or now run elsewhere).
func (a *Agent) removeKeptLogs(kept []string, bound []model.Pod) {
	if len(kept) == 0 {
		return
	}
	uids := make(map[string]bool, len(bound))
	for _, p := range bound {
		uids[p.Metadata.UID] = true
	}
	for _, uid := range kept {
		if uids[uid] {
			continue
		}
		if err := a.keptLogs.Remove(uid); err != nil {
			a.log.Warn("the logs of a pod no longer bound here were not removed; the next reconciliation tries again", "uid", uid, "err", err)
			continue
		}
		a.log.Info("removed the kept logs of a pod no longer bound here", "uid", uid)
	}
}
