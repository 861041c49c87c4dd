package controlops

import (
	"context"
	"fmt"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// Lifecycles starts pod workflows, tells whether one runs and signals
// them; the workflows package provides it (PodClient).
type Lifecycles interface {
	Start(ctx context.Context, ref PodRef) error
	Running(ctx context.Context, namespace, name string) (bool, error)
	Signal(ctx context.Context, namespace, name, signal string, arg any) error
}

// EnsurePodWorkflows repairs the invariant "every pod row has its
// workflow": a crash between the API's two writes leaves a row without
// one. Rows younger than settle are left alone, as their creator may still
// be starting it. It returns how many it started.
func (a *Control) EnsurePodWorkflows(ctx context.Context, settle time.Duration) (int, error) {
	if a.Lifecycles == nil {
		return 0, nil
	}
	started := 0
	opts := store.ListOptions{Limit: 500}
	for {
		page, err := a.Store.Pods().List(ctx, opts)
		if err != nil {
			return started, err
		}
		for _, p := range page.Items {
			if p.Metadata.CreationTimestamp != nil && time.Since(*p.Metadata.CreationTimestamp) < settle {
				continue
			}
			running, err := a.Lifecycles.Running(ctx, p.Metadata.Namespace, p.Metadata.Name)
			if err != nil {
				return started, err
			}
			if running {
				continue
			}
			ref := PodRef{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}
			if err := a.Lifecycles.Start(ctx, ref); err != nil {
				return started, fmt.Errorf("start the lifecycle of %s: %w", ref, err)
			}
			started++
			_ = a.Store.RecordEvent(ctx, model.ObjectReference{Kind: model.KindPod, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID},
				model.EventWarning, "LifecycleRestored", "The pod had no running lifecycle workflow; the reconciler started one", "zonewright-reconciler")
		}
		if page.Metadata.Continue == "" {
			return started, nil
		}
		opts.Continue = page.Metadata.Continue
	}
}
