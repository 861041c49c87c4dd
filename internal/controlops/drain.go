package controlops

import (
	"context"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/progress"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/store"
)

// nodesLookEvery is how soon the nodes' applied generations are read
// again while a pod waits to leave them, doubling up to a second.
const nodesLookEvery = 100 * time.Millisecond

// WaitEndpointsLeft waits until the service network no longer sends the
// pod traffic: no service lists its address, and every Ready node that
// programs service rules has applied a generation at least that new. Only
// then may its containers stop without dropping a request (Kubernetes'
// rolling-update loss comes from stopping first). It gives up at Until.
func (a *Control) WaitEndpointsLeft(ctx context.Context, in controlapi.EndpointsLeftInput) (controlapi.EndpointsLeftResult, error) {
	if a.ServiceNet == nil || in.IP == "" {
		return controlapi.EndpointsLeftResult{Left: true}, nil
	}
	ctx, cancel := context.WithDeadline(ctx, in.Until)
	defer cancel()
	var gen int64
	wait := nodesLookEvery
	for {
		snap := a.ServiceNet.Load()
		if snap != nil && !serves(snap, in.IP) {
			gen = snap.Generation
			caughtUp, err := a.nodesApplied(ctx, gen)
			if err != nil && ctx.Err() == nil {
				return controlapi.EndpointsLeftResult{}, err
			}
			if caughtUp {
				return controlapi.EndpointsLeftResult{Left: true, Generation: gen}, nil
			}
		}
		progress.Report(ctx, gen)
		t := time.NewTimer(wait)
		wait = min(2*wait, time.Second) // nodes usually apply within tens of milliseconds
		select {
		case <-ctx.Done():
			t.Stop()
			return controlapi.EndpointsLeftResult{Generation: gen}, nil // the grace period is up: stop anyway
		case <-t.C:
		}
	}
}

// serves reports whether any service sends traffic to ip.
func serves(snap *servicenet.Snapshot, ip string) bool {
	for _, s := range snap.Services {
		for _, e := range s.Endpoints {
			if e.IP == ip {
				return true
			}
		}
	}
	return false
}

// nodesApplied reports whether every Ready node that programs service
// rules has applied generation gen or a newer one.
func (a *Control) nodesApplied(ctx context.Context, gen int64) (bool, error) {
	nodes, err := a.Store.Nodes().List(ctx, store.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, n := range nodes.Items {
		sn := n.Status.ServiceNetwork
		if sn == nil || !n.Ready() {
			continue // programs no rules, or is down (its rules are the agent's to fix on return)
		}
		if sn.Generation < gen {
			return false, nil
		}
	}
	return true, nil
}
