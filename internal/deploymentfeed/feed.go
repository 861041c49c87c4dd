// Package deploymentfeed wakes deployments' workflows from the change
// feed: a deployment's workflow waits for a signal and costs nothing
// while it waits, so something must tell it when its spec or one of its
// pods changed. The follower is that something. It signals only for
// changes a rollout can act on (a new generation, a deletion, a pod
// gone, terminating, Ready or finished), never for the workflow's
// own status writes or pod creations.
package deploymentfeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/zonewright/zonewright/internal/endpoints"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// Workflows starts and wakes deployments' workflows
// (workflows.DeploymentClient).
type Workflows interface {
	// Wake signals the workflow, starting it if it does not run.
	Wake(ctx context.Context, ns, name string) error
	// Ensure starts the workflow if it does not run; a running one is
	// left alone.
	Ensure(ctx context.Context, ns, name string) error
}

// DefaultResync is how often every deployment is checked for its
// workflow, as a safety net under the feed; it costs a running workflow
// nothing.
const DefaultResync = 5 * time.Minute

// leaderKey is the advisory lock only the leading follower holds.
const leaderKey = 0x7a77_0006

// Follower follows deployments and pods and wakes the workflows concerned.
type Follower struct {
	Store     *store.Store
	Workflows Workflows
	Log       *slog.Logger
	// Resync: zero: DefaultResync.
	Resync time.Duration
}

// Run leads when it can and follows while it leads, until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	if f.Log == nil {
		f.Log = slog.Default()
	}
	leader := &endpoints.Leader{Pool: f.Store.Pool(), Key: leaderKey}
	for ctx.Err() == nil {
		err := leader.While(ctx, func(lctx context.Context) error {
			for lctx.Err() == nil {
				if err := f.follow(lctx); err != nil && lctx.Err() == nil {
					f.Log.Warn("deployment feed: starting over", "err", err)
					sleep(lctx, time.Second)
				}
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			f.Log.Warn("deployment feed: leadership", "err", err)
		}
		sleep(ctx, time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// podState is what of a pod a rollout acts on; a change of it wakes the
// pod's deployment.
type podState struct {
	owner                      string
	ready, terminating, finish bool
}

func stateOf(p *model.Pod) (podState, bool) {
	o := model.ControllerOf(&p.Metadata)
	if o == nil || o.Kind != model.KindDeployment {
		return podState{}, false
	}
	st := podState{owner: o.Name, terminating: p.Metadata.DeletionTimestamp != nil,
		finish: p.Status.Phase == model.PodFailed || p.Status.Phase == model.PodSucceeded}
	for _, c := range p.Status.Conditions {
		if c.Type == model.PodReady {
			st.ready = c.Status == model.ConditionTrue
		}
	}
	return st, true
}

// deploymentState is what of a deployment wakes its workflow.
type deploymentState struct {
	generation int64
	deleting   bool
}

func key(ns, name string) string { return ns + "/" + name }

// follow lists, wakes every deployment (changes may have been missed
// while nobody followed), then wakes those a change concerns, until a
// watch ends; every resync it checks that each deployment has its
// workflow, which costs the running ones nothing.
func (f *Follower) follow(ctx context.Context) error {
	deps, err := f.Store.Deployments().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := f.Store.Pods().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	seenDeps := map[string]deploymentState{}
	seenPods := map[string]podState{}
	dirty := map[string][2]string{}
	for _, d := range deps.Items {
		k := key(d.Metadata.Namespace, d.Metadata.Name)
		seenDeps[k] = deploymentState{d.Metadata.Generation, d.Metadata.DeletionTimestamp != nil}
		dirty[k] = [2]string{d.Metadata.Namespace, d.Metadata.Name}
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if st, ok := stateOf(p); ok {
			seenPods[key(p.Metadata.Namespace, p.Metadata.Name)] = st
		}
	}
	depW, err := f.Store.Deployments().Watch(ctx, store.WatchOptions{ResourceVersion: rv(deps.Metadata.ResourceVersion)})
	if err != nil {
		return err
	}
	defer depW.Stop()
	podW, err := f.Store.Pods().Watch(ctx, store.WatchOptions{ResourceVersion: rv(pods.Metadata.ResourceVersion)})
	if err != nil {
		return err
	}
	defer podW.Stop()
	resync := f.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	timer := time.NewTimer(resync)
	defer timer.Stop()
	for {
		for k, ref := range dirty {
			if err := f.Workflows.Wake(ctx, ref[0], ref[1]); err != nil {
				f.Log.Warn("deployment feed: could not wake a deployment; will retry", "deployment", k, "err", err)
				continue
			}
			delete(dirty, k)
		}
		var retry <-chan time.Time
		if len(dirty) > 0 {
			retry = time.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-retry:
		case <-timer.C:
			f.ensureAll(ctx)
			timer.Reset(resync)
		case ev, ok := <-depW.Events:
			if !ok {
				return ended("deployments", depW)
			}
			var d model.Deployment
			if json.Unmarshal(ev.Object, &d) != nil {
				continue
			}
			k := key(d.Metadata.Namespace, d.Metadata.Name)
			now := deploymentState{d.Metadata.Generation, d.Metadata.DeletionTimestamp != nil}
			if old, ok := seenDeps[k]; ev.Type == "DELETED" || !ok || old != now {
				dirty[k] = [2]string{d.Metadata.Namespace, d.Metadata.Name}
			}
			if ev.Type == "DELETED" {
				delete(seenDeps, k)
			} else {
				seenDeps[k] = now
			}
		case ev, ok := <-podW.Events:
			if !ok {
				return ended("pods", podW)
			}
			var p model.Pod
			if json.Unmarshal(ev.Object, &p) != nil {
				continue
			}
			st, owned := stateOf(&p)
			if !owned {
				continue
			}
			k := key(p.Metadata.Namespace, p.Metadata.Name)
			// A pod's creation is the workflow's own doing: it knows.
			if old, ok := seenPods[k]; ev.Type == "DELETED" || (ok && old != st) || (!ok && st != podState{owner: st.owner}) {
				dirty[key(p.Metadata.Namespace, st.owner)] = [2]string{p.Metadata.Namespace, st.owner}
			}
			if ev.Type == "DELETED" {
				delete(seenPods, k)
			} else {
				seenPods[k] = st
			}
		}
	}
}

// ensureAll starts the workflow of every deployment that has none.
func (f *Follower) ensureAll(ctx context.Context) {
	deps, err := f.Store.Deployments().ListAll(ctx, store.ListOptions{})
	if err != nil {
		f.Log.Warn("deployment feed: resync", "err", err)
		return
	}
	for _, d := range deps {
		if err := f.Workflows.Ensure(ctx, d.Metadata.Namespace, d.Metadata.Name); err != nil {
			f.Log.Warn("deployment feed: could not start a deployment's workflow", "deployment", key(d.Metadata.Namespace, d.Metadata.Name), "err", err)
		}
	}
}

func rv(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }

func ended(what string, w *store.Watch) error {
	if err := w.Err(); err != nil {
		return fmt.Errorf("%s watch: %w", what, err)
	}
	return errors.New(what + " watch ended")
}
