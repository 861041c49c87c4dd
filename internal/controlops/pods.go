package controlops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/ipam"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// PodRef names one pod incarnation: a pod deleted and created again under
// the same name has another UID, and activities of the old one leave it alone.
type PodRef struct {
	Namespace string
	Name      string
	UID       string
}

func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// PodSnapshot is what the lifecycle needs to know of the pod's row.
type PodSnapshot struct {
	Found    bool
	Spec     model.PodSpec
	Phase    string
	Reason   string
	Deleting bool
	// GracePeriodSeconds is the grace a pending deletion asked for.
	GracePeriodSeconds int64
	// ProcessLimits are what the pod's annotations ask of its zone.
	ProcessLimits model.ZoneProcessLimits `json:",omitempty"`
}

// ScheduleResult is the scheduler's decision: a node, or why none fits.
type ScheduleResult struct {
	Node    string
	Message string
	// Reason is why the pod waits when it is not the nodes' doing
	// (CapacityExceeded); empty: Unschedulable.
	Reason string `json:",omitempty"`
	// Claims are the pod's claims, bound to Node.
	Claims []hostapi.ClaimVolume `json:",omitempty"`
}

// AllocateInput asks for the pod's address on its node.
type AllocateInput struct {
	Pod  PodRef
	Node string
}

// AllocateResult is the pod's address, or why there is none.
type AllocateResult struct {
	IP        string
	PrefixLen int
	Gateway   string
	HostIP    string
	Exhausted string // non-empty: the node's pod CIDR is full
}

// StatusUpdate is one change to a pod's observed state, with the event
// that tells a person what happened.
type StatusUpdate struct {
	Pod     PodRef
	Phase   string // empty keeps the phase
	Reason  string
	Message string
	// Conditions replace those of the same type.
	Conditions        []model.PodCondition
	PodIP, HostIP     string
	ContainerStatuses []model.ContainerStatus
	StartTime         *time.Time
	// Event, when Reason is set, is recorded for the pod.
	EventType, EventReason, EventMessage string
	// EventOnly records the event and leaves the status as it is.
	EventOnly bool `json:",omitempty"`
	// Startup, on the update meant to make the pod Ready for the first
	// time, is measured when this write is the one that does.
	Startup *PodStartup `json:",omitempty"`
}

// LoadPod reads the pod's row; Found is false if it is gone or belongs to
// another incarnation.
func (a *Control) LoadPod(ctx context.Context, ref PodRef) (PodSnapshot, error) {
	p, err := a.Store.Pods().Get(ctx, ref.Namespace, ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		return PodSnapshot{}, nil
	}
	if err != nil {
		return PodSnapshot{}, err
	}
	if p.Metadata.UID != ref.UID {
		return PodSnapshot{}, nil
	}
	snap := PodSnapshot{Found: true, Spec: p.Spec, Phase: p.Status.Phase, Reason: p.Status.Reason, Deleting: p.Metadata.DeletionTimestamp != nil,
		ProcessLimits: model.PodZoneProcessLimits(&p.Metadata)}
	if g := p.Metadata.DeletionGracePeriodSeconds; g != nil {
		snap.GracePeriodSeconds = *g
	}
	return snap, nil
}

// SchedulePod binds the pod to a node, or says why no node fits.
func (a *Control) SchedulePod(ctx context.Context, ref PodRef) (ScheduleResult, error) {
	start := time.Now()
	d, err := a.Scheduler.Schedule(ctx, ref.Namespace, ref.Name)
	switch {
	case err != nil:
		a.Metrics.ScheduleAttempt(metrics.ScheduleError, time.Since(start))
		return ScheduleResult{}, err
	case d.Node == "":
		a.Metrics.ScheduleAttempt(metrics.ScheduleUnschedulable, time.Since(start))
	default:
		a.Metrics.ScheduleAttempt(metrics.ScheduleScheduled, time.Since(start))
	}
	res := ScheduleResult{Node: d.Node, Message: d.Message, Reason: d.Reason}
	for _, name := range d.Cloning {
		// The copy is the claim's workflow's to make; the pod is woken
		// when it is there.
		if a.Volumes == nil {
			continue
		}
		if err := a.Volumes.SyncClaim(ctx, ref.Namespace, name); err != nil {
			return ScheduleResult{}, fmt.Errorf("start the copy of claim %s/%s's snapshot: %w", ref.Namespace, name, err)
		}
	}
	for _, c := range d.Claims {
		v := hostapi.ClaimVolume{Name: c.Name, UID: c.UID, Bytes: c.Bytes, Block: c.Block}
		if c.SourceSnapshotUID != "" {
			v.FromSnapshot = &hostapi.ClaimSnapshot{UID: c.SourceSnapshotUID, ClaimUID: c.SourceClaimUID}
		}
		res.Claims = append(res.Claims, v)
	}
	return res, nil
}

// AllocatePodIP gives the pod an address from its node's pod CIDR.
func (a *Control) AllocatePodIP(ctx context.Context, in AllocateInput) (AllocateResult, error) {
	node, err := a.Store.Nodes().Get(ctx, "", in.Node)
	if err != nil {
		return AllocateResult{}, err
	}
	if node.Spec.PodCIDR == "" {
		return AllocateResult{Exhausted: fmt.Sprintf("node %s has no pod CIDR", in.Node)}, nil
	}
	alloc, err := a.IPAM.Allocate(ctx, in.Node, node.Spec.PodCIDR, in.Pod.UID)
	if errors.Is(err, ipam.ErrExhausted) {
		return AllocateResult{Exhausted: err.Error()}, nil
	}
	if err != nil {
		return AllocateResult{}, err
	}
	// Allocated first, then the pod looked for: a removal of the row that
	// releases the address after it (a forced delete, removeWithoutLifecycle
	// in the API) either comes later and frees it, or came first and is
	// seen here. A late call of a lifecycle that was terminated meanwhile
	// thus never keeps an address for a pod that is gone.
	p, err := a.Store.Pods().Get(ctx, in.Pod.Namespace, in.Pod.Name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.Metadata.UID != in.Pod.UID) {
		if node, err := a.IPAM.Release(ctx, in.Pod.UID); err != nil {
			return AllocateResult{}, fmt.Errorf("release the address of %s/%s, which is gone: %w", in.Pod.Namespace, in.Pod.Name, err)
		} else {
			a.WakeAddressWaiters(ctx, node)
		}
		return AllocateResult{}, fmt.Errorf("%w: %s/%s (uid %s); its address was released", ErrPodGone, in.Pod.Namespace, in.Pod.Name, in.Pod.UID)
	}
	if err != nil {
		return AllocateResult{}, err
	}
	a.WakeAddressWaiters(ctx, alloc.GaveUp) // the pod moved: one is free there
	res := AllocateResult{IP: alloc.Addr.String(), PrefixLen: alloc.Prefix, Gateway: alloc.Gateway.String()}
	for _, addr := range node.Status.Addresses {
		if addr.Type == "InternalIP" {
			res.HostIP = addr.Address
		}
	}
	return res, nil
}

// ReleasePodIP frees the pod's address. Its status stops showing the
// address first: a released address goes to the next pod, and two pods
// must never show the same podIP (Kubernetes keeps a terminated pod's
// podIP; its addresses are not reused so soon). The pods waiting for an
// address on that node are woken.
func (a *Control) ReleasePodIP(ctx context.Context, ref PodRef) error {
	_, err := a.Store.Pods().Modify(ctx, ref.Namespace, ref.Name, func(p *model.Pod) bool {
		if p.Metadata.UID != ref.UID || p.Status.PodIP == "" {
			return false
		}
		p.Status.PodIP = ""
		return true
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("clear podIP of %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	node, err := a.IPAM.Release(ctx, ref.UID)
	if err != nil {
		return fmt.Errorf("release the address of %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	a.WakeAddressWaiters(ctx, node)
	return nil
}

// UpdatePodStatus writes a status change, retrying on concurrent writes
// (the API may be changing labels at the same time).
//
// The write that first makes a pod Ready, given u.Startup, measures its
// start: once, in the process that made the write. A retry finds the pod
// Ready already and measures nothing.
func (a *Control) UpdatePodStatus(ctx context.Context, u StatusUpdate) error {
	if !u.EventOnly {
		var created, becameReady time.Time
		found, err := a.modifyPod(ctx, u.Pod, func(p *model.Pod) {
			wasReady := !podReadySince(&p.Status).IsZero()
			applyStatus(&p.Status, u)
			created, becameReady = time.Time{}, time.Time{}
			if p.Metadata.CreationTimestamp != nil && !wasReady {
				created, becameReady = *p.Metadata.CreationTimestamp, podReadySince(&p.Status)
			}
		})
		if err != nil || !found {
			return err
		}
		if u.Startup != nil && !becameReady.IsZero() {
			a.Metrics.PodStarted(u.Startup.Phases(created, becameReady))
		}
		if u.Phase == model.PodFailed || u.Phase == model.PodSucceeded {
			WakeUnschedulable(ctx, a.Store, a.Lifecycles) // its requests count no more
		}
	}
	if u.EventReason == "" {
		return nil
	}
	typ := u.EventType
	if typ == "" {
		typ = model.EventNormal
	}
	ref := model.ObjectReference{Kind: model.KindPod, Namespace: u.Pod.Namespace, Name: u.Pod.Name, UID: u.Pod.UID}
	return a.Store.RecordEvent(ctx, ref, typ, u.EventReason, u.EventMessage, "zonewright-lifecycle")
}

// modifyPod applies change to the pod and writes it, reading it again after
// a concurrent write. It reports false, changing nothing, when the pod is
// gone or is another incarnation of the name.
func (a *Control) modifyPod(ctx context.Context, ref PodRef, change func(*model.Pod)) (bool, error) {
	found := false
	_, err := a.Store.Pods().Modify(ctx, ref.Namespace, ref.Name, func(p *model.Pod) bool {
		if found = p.Metadata.UID == ref.UID; found {
			change(p)
		}
		return found
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return found && err == nil, err
}

func applyStatus(s *model.PodStatus, u StatusUpdate) {
	if u.Phase != "" {
		s.Phase = u.Phase
	}
	s.Reason, s.Message = model.ShortMessage(u.Reason, model.MaxReasonBytes), model.ShortMessage(u.Message, model.MaxMessageBytes)
	for _, c := range u.Conditions {
		at := time.Now().UTC()
		if c.LastTransitionTime != nil {
			at = *c.LastTransitionTime
		}
		model.SetCondition(&s.Conditions, c, at)
	}
	if u.PodIP != "" {
		s.PodIP = u.PodIP
	}
	if u.HostIP != "" {
		s.HostIP = u.HostIP
	}
	if u.ContainerStatuses != nil {
		s.ContainerStatuses = u.ContainerStatuses
	}
	if u.StartTime != nil {
		s.StartTime = u.StartTime
	}
}

// ErrPodChanged: the pod changed while RemovePod removed it; trying again
// reads it again.
var ErrPodChanged = errors.New("pod changed while being removed")

// ErrPodGone: the pod's row was removed (or holds another incarnation)
// while its lifecycle still acted for it.
var ErrPodGone = errors.New("the pod is gone")

// RemovePod deletes the pod's row once its zone is gone; watchers see
// DELETED. A concurrent write to the row is ErrPodChanged.
func (a *Control) RemovePod(ctx context.Context, ref PodRef) error {
	p, err := a.Store.Pods().Get(ctx, ref.Namespace, ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.Metadata.UID != ref.UID {
		return nil
	}
	_, err = a.Store.Pods().Delete(ctx, ref.Namespace, ref.Name, p.Metadata.ResourceVersion)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if errors.Is(err, store.ErrConflict) {
		// Changed since we read it; a retry reads it again.
		return ErrPodChanged
	}
	if err == nil && p.Spec.NodeName != "" {
		WakeUnschedulable(ctx, a.Store, a.Lifecycles)
	}
	if err == nil {
		a.wakeClaims(ctx, p)
	}
	return err
}
