package controlops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/ipam"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// LoadPod reads the pod's row; Found is false if it is gone or belongs to
// another incarnation.
func (a *Control) LoadPod(ctx context.Context, ref controlapi.PodRef) (controlapi.PodSnapshot, error) {
	p, err := a.Store.Pods().Get(ctx, ref.Namespace, ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		return controlapi.PodSnapshot{}, nil
	}
	if err != nil {
		return controlapi.PodSnapshot{}, err
	}
	if p.Metadata.UID != ref.UID {
		return controlapi.PodSnapshot{}, nil
	}
	snap := controlapi.PodSnapshot{Found: true, Spec: p.Spec, Phase: p.Status.Phase, Reason: p.Status.Reason, Deleting: p.Metadata.DeletionTimestamp != nil,
		ProcessLimits: model.PodZoneProcessLimits(&p.Metadata)}
	if g := p.Metadata.DeletionGracePeriodSeconds; g != nil {
		snap.GracePeriodSeconds = *g
	}
	return snap, nil
}

// SchedulePod binds the pod to a node, or says why no node fits.
func (a *Control) SchedulePod(ctx context.Context, ref controlapi.PodRef) (controlapi.ScheduleResult, error) {
	start := time.Now()
	d, err := a.Scheduler.Schedule(ctx, ref.Namespace, ref.Name)
	switch {
	case err != nil:
		a.Metrics.ScheduleAttempt(metrics.ScheduleError, time.Since(start))
		return controlapi.ScheduleResult{}, err
	case d.Node == "":
		a.Metrics.ScheduleAttempt(metrics.ScheduleUnschedulable, time.Since(start))
	default:
		a.Metrics.ScheduleAttempt(metrics.ScheduleScheduled, time.Since(start))
	}
	res := controlapi.ScheduleResult{Node: d.Node, Message: d.Message, Reason: d.Reason}
	for _, name := range d.Cloning {
		// The copy is the claim's workflow's to make; the pod is woken
		// when it is there.
		if a.Volumes == nil {
			continue
		}
		if err := a.Volumes.SyncClaim(ctx, ref.Namespace, name); err != nil {
			return controlapi.ScheduleResult{}, fmt.Errorf("start the copy of claim %s/%s's snapshot: %w", ref.Namespace, name, err)
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
func (a *Control) AllocatePodIP(ctx context.Context, in controlapi.AllocateInput) (controlapi.AllocateResult, error) {
	node, err := a.Store.Nodes().Get(ctx, "", in.Node)
	if err != nil {
		return controlapi.AllocateResult{}, err
	}
	if node.Spec.PodCIDR == "" {
		return controlapi.AllocateResult{Exhausted: fmt.Sprintf("node %s has no pod CIDR", in.Node)}, nil
	}
	alloc, err := a.IPAM.Allocate(ctx, in.Node, node.Spec.PodCIDR, in.Pod.UID)
	if errors.Is(err, ipam.ErrExhausted) {
		return controlapi.AllocateResult{Exhausted: err.Error()}, nil
	}
	if err != nil {
		return controlapi.AllocateResult{}, err
	}
	// Allocated first, then the pod looked for: a removal of the row that
	// releases the address after it (a forced delete, removeWithoutLifecycle
	// in the API) either comes later and frees it, or came first and is
	// seen here. A late call of a lifecycle that was terminated meanwhile
	// thus never keeps an address for a pod that is gone.
	p, err := a.Store.Pods().Get(ctx, in.Pod.Namespace, in.Pod.Name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && p.Metadata.UID != in.Pod.UID) {
		if node, err := a.IPAM.Release(ctx, in.Pod.UID); err != nil {
			return controlapi.AllocateResult{}, fmt.Errorf("release the address of %s/%s, which is gone: %w", in.Pod.Namespace, in.Pod.Name, err)
		} else {
			a.wakeAddressWaiters(ctx, node)
		}
		return controlapi.AllocateResult{}, fmt.Errorf("%w: %s/%s (uid %s); its address was released", ErrPodGone, in.Pod.Namespace, in.Pod.Name, in.Pod.UID)
	}
	if err != nil {
		return controlapi.AllocateResult{}, err
	}
	a.wakeAddressWaiters(ctx, alloc.GaveUp) // the pod moved: one is free there
	res := controlapi.AllocateResult{IP: alloc.Addr.String(), PrefixLen: alloc.Prefix, Gateway: alloc.Gateway.String()}
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
func (a *Control) ReleasePodIP(ctx context.Context, ref controlapi.PodRef) error {
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
	a.wakeAddressWaiters(ctx, node)
	return nil
}

// UpdatePodStatus writes a status change, retrying on concurrent writes
// (the API may be changing labels at the same time).
//
// The write that first makes a pod Ready, given u.Startup, measures its
// start: once, in the process that made the write. A retry finds the pod
// Ready already and measures nothing.
func (a *Control) UpdatePodStatus(ctx context.Context, u controlapi.StatusUpdate) error {
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
func (a *Control) modifyPod(ctx context.Context, ref controlapi.PodRef, change func(*model.Pod)) (bool, error) {
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

func applyStatus(s *model.PodStatus, u controlapi.StatusUpdate) {
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
func (a *Control) RemovePod(ctx context.Context, ref controlapi.PodRef) error {
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
	if err == nil {
		a.wakeClaims(ctx, p)
		touchImages(ctx, a.Store, p) // the pod's last use of its images
	}
	return err
}
