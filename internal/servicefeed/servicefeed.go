// Package servicefeed keeps a servicenet.Holder current from the store:
// it builds the service network snapshot from committed Services and
// Endpoints and builds it again whenever the change feed reports that
// either changed.
//
// A snapshot's generation is the store's resource version at which it
// was read (one repeatable-read transaction): the version sequence never
// goes back, across restarts too, so neither do generations, and two
// control-plane replicas that built the same generation built it from the
// same state.
package servicefeed

import (
	"context"
	"log/slog"
	"slices"

	"github.com/zonewright/zonewright/internal/informer"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/store"
)

// Follower builds snapshots into Holder.
type Follower struct {
	Store  *store.Store
	Holder *servicenet.Holder
	Log    *slog.Logger
}

// Run keeps Holder current until ctx ends, starting over (with a fresh
// read) whenever a watch ends.
func (f *Follower) Run(ctx context.Context) {
	// gen is the version the held snapshot was read at; newest, that of
	// the newest change seen. A read covers every change up to its
	// version, so only a change above it asks for another.
	var gen, newest int64
	(&informer.Informer{Name: "service network snapshot", Log: f.Log,
		Sources: []informer.Source{
			informer.Kind(f.Store.Services(), newestVersion[model.Service](&newest)),
			informer.Kind(f.Store.Endpoints(), newestVersion[model.Endpoints](&newest)),
		},
		// Services and Endpoints are read together, in one snapshot, so
		// that a generation names one state of the service network.
		Start: func(ctx context.Context) (int64, error) {
			var err error
			gen, err = f.rebuild(ctx)
			return gen, err
		},
		Flush: func(ctx context.Context) (bool, error) {
			if newest <= gen {
				return false, nil
			}
			var err error
			gen, err = f.rebuild(ctx)
			return false, err
		},
	}).Run(ctx)
}

// newestVersion keeps in newest the version of the newest change to T.
func newestVersion[T any](newest *int64) informer.Handlers[T] {
	return informer.Handlers[T]{Changed: func(_ context.Context, ev informer.Event[T]) error {
		*newest = max(*newest, ev.ResourceVersion)
		return nil
	}}
}

// rebuild reads the service network and makes it the held snapshot.
func (f *Follower) rebuild(ctx context.Context) (int64, error) {
	gen, svcs, eps, err := f.Store.ServiceNetwork(ctx)
	if err != nil {
		return 0, err
	}
	f.Holder.Store(Build(gen, svcs, eps))
	return gen, nil
}

// Build is the snapshot of services and their Endpoints at gen. Each
// service lists the addresses of its Endpoints (the ready pods, or every
// pod when it publishes not-ready ones), with the pod's port for each
// service port (0 where the pod does not serve it).
func Build(gen int64, svcs []model.Service, eps []model.Endpoints) *servicenet.Snapshot {
	byKey := make(map[string]*model.Endpoints, len(eps))
	for i := range eps {
		byKey[eps[i].Metadata.Namespace+"/"+eps[i].Metadata.Name] = &eps[i]
	}
	snap := &servicenet.Snapshot{Generation: gen, Services: make([]servicenet.Service, 0, len(svcs))}
	for i := range svcs {
		svc := &svcs[i]
		out := servicenet.Service{Namespace: svc.Metadata.Namespace, Name: svc.Metadata.Name,
			SessionAffinity: svc.Spec.SessionAffinity}
		if !svc.Headless() {
			out.ClusterIP = svc.Spec.ClusterIP
		}
		for _, p := range svc.Spec.Ports {
			out.Ports = append(out.Ports, servicenet.Port{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
		}
		if ep := byKey[svc.Metadata.Namespace+"/"+svc.Metadata.Name]; ep != nil {
			for _, sub := range ep.Subsets {
				targets := make([]int32, len(svc.Spec.Ports))
				for j, sp := range svc.Spec.Ports {
					for _, epp := range sub.Ports {
						if epp.Name == sp.Name && epp.Protocol == sp.Protocol {
							targets[j] = epp.Port
						}
					}
				}
				for _, a := range sub.Addresses {
					e := servicenet.Endpoint{IP: a.IP, Node: a.NodeName, Hostname: a.Hostname, TargetPorts: targets}
					if a.TargetRef != nil {
						e.Pod = a.TargetRef.Name
					}
					out.Endpoints = append(out.Endpoints, e)
				}
			}
			slices.SortFunc(out.Endpoints, func(a, b servicenet.Endpoint) int {
				if c := compareIP(a.IP, b.IP); c != 0 {
					return c
				}
				return compareStrings(a.Pod, b.Pod)
			})
		}
		snap.Services = append(snap.Services, out)
	}
	return snap
}
