package controlops

import (
	"context"
	"slices"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// wakeAddressWaiters wakes the pods bound to node that wait for an address
// there, as one was just freed: unfinished, not running and holding none.
// They are chosen by what they lack, not by the reason their status shows,
// which a pod may not have written yet. The oldest first and a bounded
// number, as a freed address fits one. It is best effort (a pod not woken
// looks again after its back-off) and returns how many it woke.
func (a *Control) wakeAddressWaiters(ctx context.Context, node string) int {
	if a.Lifecycles == nil || node == "" {
		return 0
	}
	pods, err := PodsWaitingOnNode(ctx, a.Store, node)
	if err != nil || len(pods) == 0 {
		return 0
	}
	holders, err := a.IPAM.Holders(ctx, node)
	if err != nil {
		return 0
	}
	waiting := slices.DeleteFunc(pods, func(p model.Pod) bool { return holders[p.Metadata.UID] })
	oldestFirst(waiting)
	n := 0
	for _, p := range waiting[:min(len(waiting), maxWoken)] {
		if a.Lifecycles.Signal(ctx, p.Metadata.Namespace, p.Metadata.Name, podcontract.SignalWake, struct{}{}) == nil {
			n++
		}
	}
	return n
}

// oldestFirst sorts pods by creation, the oldest first: waiters woken in
// this order get what was freed in the order they asked.
func oldestFirst(pods []model.Pod) {
	created := func(p model.Pod) time.Time {
		if t := p.Metadata.CreationTimestamp; t != nil {
			return *t
		}
		return time.Time{}
	}
	slices.SortStableFunc(pods, func(a, b model.Pod) int { return created(a).Compare(created(b)) })
}
