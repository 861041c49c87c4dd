package controlops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/scheduler"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// Node health's names: the taint that keeps new pods off a node whose
// agent went silent, and the reasons written on the node and its pods.
const (
	TaintUnreachable        = "node.zonewright.io/unreachable"
	ReasonNodeStatusUnknown = "NodeStatusUnknown"
	ReasonEvictionHeld      = "EvictionHeld"
	nodeHealthSource        = "zonewright-node-health"
)

// NodeHealthStarter starts a node's NodeHealth workflow unless one runs,
// and makes it look at its node now; the workflows package provides it
// (NodeClient).
type NodeHealthStarter interface {
	Ensure(ctx context.Context, node string) error
	Check(ctx context.Context, node string) error
}

// nodesToCheck are the nodes whose recorded readiness no longer matches
// their heartbeats, judged as ObserveNode judges them: silent for the
// grace period yet not marked NotReady, or heard again yet still tainted
// unreachable. Two queries whatever the number of nodes.
func (a *Control) nodesToCheck(ctx context.Context) ([]string, error) {
	grace := a.NodeGracePeriod
	if grace <= 0 {
		return nil, errors.New("no node grace period configured")
	}
	list, err := a.Store.Nodes().List(ctx, store.ListOptions{AnyVersion: true}) // no watch follows: no need to wait for writers to settle
	if err != nil {
		return nil, err
	}
	ages, err := a.Store.NodeLeaseAges(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var due []string
	for i := range list.Items {
		n := &list.Items[i]
		age, ok := ages[n.Metadata.Name]
		if !ok {
			age = -1
		}
		obs := observe(n, age, now, a.HearingSince)
		fresh := obs.HeartbeatAge >= 0 && obs.HeartbeatAge < grace
		c := n.Condition(model.NodeReady)
		marked := obs.Tainted && c != nil && c.Status == model.ConditionUnknown
		if (fresh && obs.Tainted) || (!fresh && !marked) {
			due = append(due, n.Metadata.Name)
		}
	}
	return due, nil
}

// NodeRetell is how long a node that nodesToCheck still finds waits
// before its workflow is told again: told once, a workflow looks within a
// second, but one held back (an overloaded control plane) would otherwise
// collect a signal every sweep, more load when there is most.
const NodeRetell = 30 * time.Second

// NodeSweep tells the health workflow of each node nodesToCheck finds to
// look now, once per NodeRetell. A Ready node's workflow sleeps until
// told, so what a healthy node costs is its share of the sweep's queries.
type NodeSweep struct {
	Control *Control
	told    map[string]time.Time // nodes told, and when, while they stay due
}

// Sweep runs one sweep; it returns how many workflows it told.
func (s *NodeSweep) Sweep(ctx context.Context) (int, error) {
	if s.Control.NodeHealth == nil {
		return 0, nil
	}
	due, err := s.Control.nodesToCheck(ctx)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	told := make(map[string]time.Time, len(due))
	// One node's failed signal does not hold back the others'.
	var errs []error
	n := 0
	for _, node := range due {
		if at, ok := s.told[node]; ok && now.Sub(at) < NodeRetell {
			told[node] = at
			continue
		}
		if err := s.Control.NodeHealth.Check(ctx, node); err != nil {
			errs = append(errs, fmt.Errorf("tell the health workflow of node %s to look: %w", node, err))
			continue
		}
		told[node] = now
		n++
	}
	s.told = told
	return n, errors.Join(errs...)
}

// ObserveNode reads the node's last heartbeat: its lease.
func (a *Control) ObserveNode(ctx context.Context, node string) (controlapi.NodeObservation, error) {
	n, err := a.Store.Nodes().Get(ctx, "", node)
	if errors.Is(err, store.ErrNotFound) {
		return controlapi.NodeObservation{}, nil
	}
	if err != nil {
		return controlapi.NodeObservation{}, err
	}
	leaseAge, err := a.leaseAge(ctx, node)
	if err != nil {
		return controlapi.NodeObservation{}, err
	}
	obs := observe(n, leaseAge, time.Now(), a.HearingSince)
	obs.GracePeriod, obs.EvictionTimeout = a.NodeGracePeriod, a.NodeEvictionTimeout
	if !n.Ready() {
		// Whether its pods may be evicted: how many nodes are lost with it.
		byReady, err := a.Store.NodesByReady(ctx)
		if err != nil {
			return controlapi.NodeObservation{}, err
		}
		for status, count := range byReady {
			obs.Nodes += count
			if status != string(model.ConditionTrue) {
				obs.NodesNotReady += count
			}
		}
	}
	return obs, nil
}

// HoldNodeEvictions records, on the node, that its pods are not evicted
// while most nodes are NotReady.
func (a *Control) HoldNodeEvictions(ctx context.Context, in controlapi.HoldEvictionsInput) error {
	n, err := a.Store.Nodes().Get(ctx, "", in.Node)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return a.nodeEvent(ctx, in.Node, n.Metadata.UID, model.EventWarning, ReasonEvictionHeld, fmt.Sprintf(
		"%d of %d nodes are NotReady: the control plane is the likely cause, not node %s; its pods are not evicted until fewer than %.0f%% are",
		in.NodesNotReady, in.Nodes, in.Node, controlapi.UnhealthyThreshold*100))
}

// leaseAge is how long ago the node's lease was renewed; -1 without one.
func (a *Control) leaseAge(ctx context.Context, node string) (time.Duration, error) {
	_, age, err := a.Store.NodeLease(ctx, node)
	if errors.Is(err, store.ErrNotFound) {
		return -1, nil
	}
	return age, err
}

// observe is the node's silence as the control plane can judge it: since
// its last heartbeat, but no longer than the control plane has been
// hearing (hearingSince; zero: always).
func observe(n *model.Node, leaseAge time.Duration, now, hearingSince time.Time) controlapi.NodeObservation {
	obs := controlapi.NodeObservation{Found: true, HeartbeatAge: leaseAge, Tainted: hasTaint(n, TaintUnreachable)}
	if c := n.Condition(model.NodeReady); c != nil && c.LastHeartbeatTime != nil {
		if age := max(now.Sub(*c.LastHeartbeatTime), 0); obs.HeartbeatAge < 0 || age < obs.HeartbeatAge {
			obs.HeartbeatAge = age
		}
	}
	if !hearingSince.IsZero() && obs.HeartbeatAge >= 0 {
		obs.HeartbeatAge = min(obs.HeartbeatAge, max(now.Sub(hearingSince), 0))
	}
	return obs
}

func hasTaint(n *model.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t model.Taint) bool { return t.Key == key })
}

// MarkNodeNotReady sets the Ready condition to Unknown and adds the
// unreachable taint, if the lease is still older than the grace period.
// The agent writes the same row when its status changes: a conflicting
// write is read again.
func (a *Control) MarkNodeNotReady(ctx context.Context, in controlapi.MarkNotReadyInput) (controlapi.MarkNotReadyResult, error) {
	var res controlapi.MarkNotReadyResult
	var uid string
	var leaseErr error
	err := a.updateNode(ctx, in.Node, func(n *model.Node, now time.Time) bool {
		uid = n.Metadata.UID
		// Read at each try: a renewal may have arrived since the look.
		leaseAge, err := a.leaseAge(ctx, in.Node)
		if err != nil {
			leaseErr = err
			return false
		}
		obs := observe(n, leaseAge, now, a.HearingSince)
		res = controlapi.MarkNotReadyResult{}
		if obs.HeartbeatAge >= 0 && obs.HeartbeatAge < in.GracePeriod {
			return false
		}
		res.Marked = true
		msg := fmt.Sprintf("zonewright agent stopped posting heartbeats: none for %s", in.GracePeriod)
		if obs.HeartbeatAge >= 0 {
			msg = fmt.Sprintf("zonewright agent stopped posting heartbeats: the last was %s ago", obs.HeartbeatAge.Round(time.Second))
		}
		if c := n.Condition(model.NodeReady); c == nil || c.Status != model.ConditionUnknown {
			next := model.NodeCondition{Type: model.NodeReady, Status: model.ConditionUnknown, Reason: ReasonNodeStatusUnknown, Message: msg}
			if c != nil {
				next.LastHeartbeatTime = c.LastHeartbeatTime
			}
			res.Changed = model.SetCondition(&n.Status.Conditions, next, now)
		}
		if !hasTaint(n, TaintUnreachable) {
			n.Spec.Taints = append(n.Spec.Taints, model.Taint{Key: TaintUnreachable, Effect: model.TaintNoSchedule, TimeAdded: &now})
			res.Changed = true
		}
		return res.Changed
	})
	if err == nil {
		err = leaseErr
	}
	if err != nil || !res.Changed {
		return res, err
	}
	if err := a.nodeEvent(ctx, in.Node, uid, model.EventWarning, "NodeNotReady",
		fmt.Sprintf("Node %s is NotReady: no heartbeat for %s; tainted %s:NoSchedule", in.Node, in.GracePeriod, TaintUnreachable)); err != nil {
		return res, err
	}
	return res, a.setClaimsPhase(ctx, in.Node, model.ClaimLost)
}

// MarkNodeReady removes the unreachable taint once the agent posts
// heartbeats again (it writes Ready=True itself). It reports whether the
// taint was there.
func (a *Control) MarkNodeReady(ctx context.Context, node string) (bool, error) {
	removed := false
	var uid string
	err := a.updateNode(ctx, node, func(n *model.Node, _ time.Time) bool {
		uid = n.Metadata.UID
		before := len(n.Spec.Taints)
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t model.Taint) bool { return t.Key == TaintUnreachable })
		removed = len(n.Spec.Taints) != before
		return removed
	})
	if err != nil || !removed {
		return removed, err
	}
	if err := a.setClaimsPhase(ctx, node, model.ClaimBound); err != nil {
		return true, err
	}
	return true, a.nodeEvent(ctx, node, uid, model.EventNormal, "NodeReady",
		fmt.Sprintf("Node %s is Ready: heartbeats resumed; taint %s removed", node, TaintUnreachable))
}

// updateNode reads the node, lets change edit it, and writes it back if
// change says so, reading again when another writer got in between. A
// node that is gone is not an error: there is nothing left to mark.
func (a *Control) updateNode(ctx context.Context, node string, change func(n *model.Node, now time.Time) bool) error {
	return UpdateNode(ctx, a.Store, node, change)
}

// UpdateNode is a read-modify-write of one node that retries on
// conflicting writes (the agent heartbeats into the same row).
func UpdateNode(ctx context.Context, st *store.Store, node string, change func(n *model.Node, now time.Time) bool) error {
	_, err := st.Nodes().Modify(ctx, "", node, func(n *model.Node) bool { return change(n, time.Now().UTC()) })
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update node %s: %w", node, err)
	}
	return nil
}

func (a *Control) nodeEvent(ctx context.Context, node, uid, typ, reason, msg string) error {
	return a.Store.RecordEvent(ctx, model.ObjectReference{Kind: model.KindNode, Name: node, UID: uid}, typ, reason, msg, nodeHealthSource)
}

// EvictNodePods tells every unfinished pod bound to the node to leave it
// (lost nodes: their pods are Failed/NodeLost first): node health, the
// API's drain and forced node delete. It tells each pod's lifecycle; the
// lifecycle alone writes the pod's status. It returns how many.
func (a *Control) EvictNodePods(ctx context.Context, in controlapi.EvictInput) (int, error) {
	pods, err := PodsOnNode(ctx, a.Store, in.Node)
	if err != nil {
		return 0, err
	}
	sig := podcontract.EvictSignal{Node: in.Node, Lost: in.Lost, Reason: podcontract.ReasonEvicted, Message: in.Message}
	if in.Lost {
		sig.Reason = podcontract.ReasonNodeLost
	}
	var (
		mu    sync.Mutex
		told  int
		first error
		fails int
		wg    sync.WaitGroup
	)
	slots := make(chan struct{}, evictInFlight)
	for _, p := range pods {
		if keptForMove(&p, in.KeepClaims) {
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := a.tellToLeave(ctx, &p, sig)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				told++
			} else if fails++; first == nil {
				first = err
			}
		})
	}
	wg.Wait()
	if first != nil {
		return told, fmt.Errorf("%d pod(s) on node %s told to leave, %d could not be (%w)", told, in.Node, fails, first)
	}
	return told, nil
}

// evictInFlight bounds the lifecycles a node's eviction signals at once:
// one after another, a node of 130 pods took minutes on a loaded Temporal.
const evictInFlight = 16

// tellToLeave signals a pod's lifecycle to leave its node. A pod without
// a running lifecycle has nothing to tell; the reconciler starts one,
// which finds the pod's node gone.
func (a *Control) tellToLeave(ctx context.Context, p *model.Pod, sig podcontract.EvictSignal) error {
	if a.Lifecycles == nil {
		return nil
	}
	err := a.Lifecycles.Signal(ctx, p.Metadata.Namespace, p.Metadata.Name, podcontract.SignalEvict, sig)
	if err != nil && !errors.Is(err, podcontract.ErrNoLifecycle) {
		return fmt.Errorf("tell pod %s/%s to leave node %s: %w", p.Metadata.Namespace, p.Metadata.Name, sig.Node, err)
	}
	return nil
}

// ListNodePods names the unfinished pods bound to a node.
func (a *Control) ListNodePods(ctx context.Context, node string) ([]controlapi.PodRef, error) {
	pods, err := PodsOnNode(ctx, a.Store, node)
	if err != nil {
		return nil, err
	}
	refs := make([]controlapi.PodRef, len(pods))
	for i, p := range pods {
		refs[i] = controlapi.PodRef{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}
	}
	return refs, nil
}

// PodsOnNode lists the unfinished pods bound to a node.
func PodsOnNode(ctx context.Context, st *store.Store, node string) ([]model.Pod, error) {
	return podsOnNodeExcept(ctx, st, node, model.PodFailed, model.PodSucceeded)
}

// PodsWaitingOnNode lists the pods bound to a node that are not running
// yet (unfinished and not Running): the few a freed address or a pulled
// image may be for, so a node's mass termination (one release a pod) does
// not read every pod on the node each time.
func PodsWaitingOnNode(ctx context.Context, st *store.Store, node string) ([]model.Pod, error) {
	return podsOnNodeExcept(ctx, st, node, model.PodRunning, model.PodFailed, model.PodSucceeded)
}

// podsOnNodeExcept lists the pods bound to a node in none of the phases;
// the database picks them (a pod with no phase yet is in none).
func podsOnNodeExcept(ctx context.Context, st *store.Store, node string, phases ...string) ([]model.Pod, error) {
	sel := "spec.nodeName=" + node
	for _, phase := range phases {
		sel += ",status.phase!=" + phase
	}
	pods, err := st.Pods().ListAll(ctx, store.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	return pods, nil
}

// WakeImageWaiters wakes the pods bound to the node that wait for the
// image (a pull there just ended): those not running yet whose zone is
// made from it. They are chosen by what they wait for, not by the reason
// their status shows: a pod that found the image missing may not have
// written ImagePulling yet when the pull ends, and its lifecycle keeps a
// wake that arrives before it waits. It returns how many it woke.
func (a *Control) WakeImageWaiters(ctx context.Context, in controlapi.ImageNodeInput) (int, error) {
	pods, err := PodsWaitingOnNode(ctx, a.Store, in.Node)
	if err != nil || a.Lifecycles == nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		if len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Image != in.Image {
			continue
		}
		if err := a.Lifecycles.Signal(ctx, p.Metadata.Namespace, p.Metadata.Name, podcontract.SignalWake, struct{}{}); err != nil && !errors.Is(err, podcontract.ErrNoLifecycle) {
			return n, fmt.Errorf("wake pod %s/%s: %w", p.Metadata.Namespace, p.Metadata.Name, err)
		}
		n++
	}
	return n, nil
}

// ReasonCapacityExceeded is the reason of a pending pod the capacity map
// holds back (the oldest are woken first, so slots go in FIFO order).
const ReasonCapacityExceeded = scheduler.ReasonCapacityExceeded

// WakeUnschedulable wakes the pods waiting because no node fitted them,
// as room was just made (a pod ended or went, a node became Ready or
// schedulable: internal/roomfeed sees it): they look again now instead of
// after their back-off. It is best effort (a pod not woken still looks
// again after its back-off) and returns how many it woke.
func WakeUnschedulable(ctx context.Context, st *store.Store, lc Lifecycles) int {
	if lc == nil {
		return 0
	}
	pending, err := st.Pods().List(ctx, store.ListOptions{FieldSelector: "status.phase=" + model.PodPending})
	if err != nil {
		return 0
	}
	waiting := slices.DeleteFunc(pending.Items, func(p model.Pod) bool {
		return p.Status.Reason != podcontract.ReasonUnschedulable && p.Status.Reason != ReasonCapacityExceeded
	})
	// The oldest first, and a bounded number: one freed pod's room fits
	// few, and a burst of deletions must not signal every waiter each time.
	oldestFirst(waiting)
	n := 0
	for _, p := range waiting[:min(len(waiting), maxWoken)] {
		if lc.Signal(ctx, p.Metadata.Namespace, p.Metadata.Name, podcontract.SignalWake, struct{}{}) == nil {
			n++
		}
	}
	return n
}

// maxWoken bounds the pods WakeUnschedulable wakes at once; the others
// look again after their back-off or at the next room made.
const maxWoken = 20

// EnsureNodeWorkflows repairs the invariant "every node has its NodeHealth
// workflow". It returns how many nodes it checked.
func (a *Control) EnsureNodeWorkflows(ctx context.Context) (int, error) {
	if a.NodeHealth == nil {
		return 0, nil
	}
	list, err := a.Store.Nodes().List(ctx, store.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, n := range list.Items {
		if err := a.NodeHealth.Ensure(ctx, n.Metadata.Name); err != nil {
			return 0, fmt.Errorf("ensure the health workflow of node %s: %w", n.Metadata.Name, err)
		}
	}
	return len(list.Items), nil
}

// UnbindPod readies a pod that left its node for scheduling again: unbound,
// Pending, its address and container statuses cleared. Same name, same UID.
func (a *Control) UnbindPod(ctx context.Context, in controlapi.UnbindInput) error {
	var claims []string
	found, err := a.modifyPod(ctx, in.Pod, func(p *model.Pod) {
		now := time.Now().UTC()
		claims = p.Spec.ClaimNames()
		p.Spec.NodeName = ""
		p.Status.Phase, p.Status.Reason, p.Status.Message = model.PodPending, "Rescheduling", in.Message
		p.Status.PodIP, p.Status.HostIP, p.Status.ContainerStatuses, p.Status.StartTime = "", "", nil, nil
		for _, typ := range []string{model.PodScheduled, model.PodReady} {
			model.SetCondition(&p.Status.Conditions, model.PodCondition{Type: typ, Status: model.ConditionFalse, Reason: "Rescheduling"}, now)
		}
	})
	if err != nil || !found {
		return err
	}
	a.wakeMovingClaims(ctx, in.Pod.Namespace, claims)
	ref := model.ObjectReference{Kind: model.KindPod, Namespace: in.Pod.Namespace, Name: in.Pod.Name, UID: in.Pod.UID}
	return a.Store.RecordEvent(ctx, ref, model.EventWarning, "Rescheduling", in.Message, "zonewright-lifecycle")
}
