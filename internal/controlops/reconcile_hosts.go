package controlops

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// Event source of the host reconciler (its reasons are hostapi's).
const (
	EventSourceReconcile = "zonewright-reconciler"
)

// ReconcileHost compares a node's inventory with the pods bound to it:
// orphans are recorded (an OrphanFound event on the Node the first time)
// and returned for removal once past the grace period; orphans that are
// no longer reported are forgotten. Running pods whose zone vanished or
// stopped get a ZoneMissing or ZoneNotRunning event, and a lifecycle if
// they have none (the lifecycle's monitor then restarts or fails them per
// their restartPolicy).
//
// The inventory was read before ReconcileHost reads the pods, and zones
// are made only for pods already bound, so a zone in the inventory whose
// pod is bound here is never taken for an orphan.
func (a *Control) ReconcileHost(ctx context.Context, in controlapi.ReconcileHostInput) (controlapi.ReconcileHostResult, error) {
	res := controlapi.ReconcileHostResult{Node: in.Node}
	pods, err := BoundPods(ctx, a.Store, in.Node)
	if err != nil {
		return res, fmt.Errorf("list the pods bound to node %s: %w", in.Node, err)
	}
	plan := hostops.PlanHost(in.Inventory, pods)
	res.Adopted, res.Orphans = len(plan.Adopted), len(plan.Orphans)

	keys := make([]string, len(plan.Orphans))
	for i, o := range plan.Orphans {
		keys[i] = o.Key
	}
	seen, err := a.Store.TrackOrphans(ctx, in.Node, keys)
	if err != nil {
		return res, err
	}
	node := model.ObjectReference{Kind: model.KindNode, Name: in.Node}
	for _, o := range plan.Orphans {
		s := seen[o.Key]
		if s.New {
			res.NewOrphans++
			a.event(ctx, node, model.EventWarning, hostapi.ReasonOrphanFound, fmt.Sprintf(
				"Found %s on node %s with no pod bound there to own it; it is removed unless a pod claims it within %s", o, in.Node, in.OrphanGrace))
		}
		if s.Age >= in.OrphanGrace {
			res.Remove = append(res.Remove, o)
		}
	}

	for _, d := range plan.Drift {
		ref := model.ObjectReference{Kind: model.KindPod, Namespace: d.Pod.Namespace, Name: d.Pod.Name, UID: d.Pod.UID}
		msg := fmt.Sprintf("Zone %s of the running pod is missing from node %s", d.Zone, in.Node)
		if d.Reason == hostops.DriftZoneNotRunning {
			res.ZoneNotRunning++
			msg = fmt.Sprintf("Zone %s of the running pod is %s on node %s", d.Zone, d.State, in.Node)
		} else {
			res.ZoneMissing++
		}
		if a.Lifecycles != nil {
			// The drift is reported even when the node may not look at or
			// start lifecycles (Temporal's authorizer refuses it a node);
			// the control plane's reconciler then restores a missing one.
			running, err := a.Lifecycles.Running(ctx, d.Pod.Namespace, d.Pod.Name)
			if err != nil {
				a.event(ctx, ref, model.EventWarning, d.Reason, msg)
				return res, fmt.Errorf("is the lifecycle of %s/%s running: %w", d.Pod.Namespace, d.Pod.Name, err)
			}
			if !running {
				if err := a.Lifecycles.Start(ctx, controlapi.PodRef{Namespace: d.Pod.Namespace, Name: d.Pod.Name, UID: d.Pod.UID}); err != nil {
					a.event(ctx, ref, model.EventWarning, d.Reason, msg)
					return res, fmt.Errorf("start the lifecycle of %s/%s: %w", d.Pod.Namespace, d.Pod.Name, err)
				}
				res.LifecyclesStarted++
				msg += "; it had no lifecycle, one was started"
			} else {
				msg += "; its lifecycle restarts or fails it per its restartPolicy"
			}
		}
		a.event(ctx, ref, model.EventWarning, d.Reason, msg)
	}
	return res, nil
}

// OrphanRemoved forgets a removed orphan and records an OrphanRemoved
// event on its Node.
func (a *Control) OrphanRemoved(ctx context.Context, in controlapi.OrphanRemovedInput) error {
	if err := a.Store.ForgetOrphan(ctx, in.Node, in.Orphan.Key); err != nil {
		return err
	}
	a.event(ctx, model.ObjectReference{Kind: model.KindNode, Name: in.Node}, model.EventNormal, hostapi.ReasonOrphanRemoved,
		fmt.Sprintf("Removed %s from node %s: no pod owned it for the whole grace period", in.Orphan, in.Node))
	return nil
}

// event records an event; a failure to record one is logged, not fatal:
// the repair matters more than its note.
//
// Its pod events (ZoneMissing, ZoneNotRunning) are one of the exceptions
// to the pod's lifecycle being the pod's one writer (docs/reconciliation.md,
// "Who writes a pod"): they note what only the host's inventory shows,
// and change nothing the lifecycle owns. An event is a row of its own,
// named after its object (with the pod's UID), type, reason, source and
// message, counted by an atomic insert-or-count, so recorders never
// overwrite each other's events; nothing decides anything from events.
func (a *Control) event(ctx context.Context, obj model.ObjectReference, typ, reason, msg string) {
	if err := a.Store.RecordEvent(ctx, obj, typ, reason, msg, EventSourceReconcile); err != nil {
		slog.Default().Warn("record event", "reason", reason, "object", obj.Name, "err", err)
	}
}

// BoundPods lists the pods whose spec.nodeName is node.
func BoundPods(ctx context.Context, st *store.Store, node string) ([]hostops.BoundPod, error) {
	pods, err := st.Pods().ListAll(ctx, store.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	return hostops.BoundPodsOf(pods), nil
}
