// Package workloadfeed wakes deployments' and jobs' workflows from the
// change feed: such a workflow waits for a signal and costs nothing while
// it waits, so something must tell it when its spec or one of its pods
// changed. The follower is that something. It signals only for changes
// the workflow can act on (a new generation, a deletion, a pod gone,
// terminating, Ready, finished or restarted, a new image in the catalog
// while the workflow cannot create its pods), never for the workflow's
// own status writes or pod creations.
package workloadfeed

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
	"github.com/zonewright/zonewright/internal/pglock"
	"github.com/zonewright/zonewright/internal/store"
)

// Workflows starts and wakes one kind's workflows
// (workflows.DeploymentClient, workflows.JobClient).
type Workflows interface {
	// Wake signals the workflow, starting it if it does not run.
	Wake(ctx context.Context, ns, name string) error
	// Ensure starts the workflow if it does not run; a running one is
	// left alone.
	Ensure(ctx context.Context, ns, name string) error
}

// DefaultResync is how often every deployment and job is checked for its
// workflow, as a safety net under the feed; it costs a running workflow
// nothing.
const DefaultResync = 5 * time.Minute

// Follower follows deployments, jobs and pods and wakes the workflows
// concerned.
type Follower struct {
	Store       *store.Store
	Deployments Workflows
	Jobs        Workflows
	Log         *slog.Logger
	// Resync: zero: DefaultResync.
	Resync time.Duration
	// Gather and GatherWindow batch changes into one signal per workflow:
	// a batch ends after Gather without a change, or GatherWindow after it
	// began. Zero: DefaultGather, DefaultGatherWindow.
	Gather, GatherWindow time.Duration
}

// Batching of changes, see Follower.Gather.
const (
	DefaultGather       = 50 * time.Millisecond
	DefaultGatherWindow = 500 * time.Millisecond
)

// Run leads when it can and follows while it leads, until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	if f.Log == nil {
		f.Log = slog.Default()
	}
	leader := &endpoints.Leader{Pool: f.Store.Pool(), Key: pglock.WorkloadFeedLeader}
	for ctx.Err() == nil {
		err := leader.While(ctx, func(lctx context.Context) error {
			for lctx.Err() == nil {
				if err := f.follow(lctx); err != nil && lctx.Err() == nil {
					f.Log.Warn("workload feed: starting over", "err", err)
					sleep(lctx, time.Second)
				}
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			f.Log.Warn("workload feed: leadership", "err", err)
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

// podState is what of a pod its owner acts on; a change of it wakes the
// owner's workflow.
type podState struct {
	kind, owner        string
	ready, terminating bool
	phase              string
	restarts           int32
}

func stateOf(p *model.Pod) (podState, bool) {
	o := model.ControllerOf(&p.Metadata)
	if o == nil || (o.Kind != model.KindDeployment && o.Kind != model.KindJob) {
		return podState{}, false
	}
	st := podState{kind: o.Kind, owner: o.Name, terminating: p.Metadata.DeletionTimestamp != nil}
	if p.Status.Phase == model.PodFailed || p.Status.Phase == model.PodSucceeded {
		st.phase = p.Status.Phase
	}
	if o.Kind == model.KindJob {
		for _, c := range p.Status.ContainerStatuses {
			st.restarts += c.RestartCount
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == model.PodReady {
			st.ready = c.Status == model.ConditionTrue
		}
	}
	return st, true
}

func deploymentFailing(d *model.Deployment) bool {
	c := d.Status.Condition(model.ConditionReplicaFailure)
	return c != nil && c.Status == model.ConditionTrue
}

func jobFailing(j *model.Job) bool {
	c := j.Status.Condition(model.ConditionReplicaFailure)
	return c != nil && c.Status == model.ConditionTrue
}

// ownerState is what of a deployment or job wakes its workflow.
type ownerState struct {
	generation int64
	deleting   bool
}

// ref names a deployment or a job.
type ref struct{ kind, ns, name string }

func key(ns, name string) string { return ns + "/" + name }

// follow lists, wakes every deployment and job (changes may have been
// missed while nobody followed), then wakes those a change concerns,
// until a watch ends; every resync it checks that each has its workflow,
// which costs the running ones nothing.
func (f *Follower) follow(ctx context.Context) error {
	deps, err := f.Store.Deployments().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	jobs, err := f.Store.Jobs().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := f.Store.Pods().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	images, err := f.Store.Images().List(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	seen := map[ref]ownerState{}
	seenPods := map[string]podState{}
	dirty := map[ref]bool{}
	// failing: the owners that could not create their pods (a
	// ReplicaFailure condition); a new image may be the one they lack.
	failing := map[ref]bool{}
	for _, d := range deps.Items {
		r := ref{model.KindDeployment, d.Metadata.Namespace, d.Metadata.Name}
		seen[r] = ownerState{d.Metadata.Generation, d.Metadata.DeletionTimestamp != nil}
		dirty[r] = true
		failing[r] = deploymentFailing(&d)
	}
	for _, j := range jobs.Items {
		r := ref{model.KindJob, j.Metadata.Namespace, j.Metadata.Name}
		seen[r] = ownerState{j.Metadata.Generation, j.Metadata.DeletionTimestamp != nil}
		dirty[r] = true
		failing[r] = jobFailing(&j)
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
	jobW, err := f.Store.Jobs().Watch(ctx, store.WatchOptions{ResourceVersion: rv(jobs.Metadata.ResourceVersion)})
	if err != nil {
		return err
	}
	defer jobW.Stop()
	podW, err := f.Store.Pods().Watch(ctx, store.WatchOptions{ResourceVersion: rv(pods.Metadata.ResourceVersion)})
	if err != nil {
		return err
	}
	defer podW.Stop()
	imgW, err := f.Store.Images().Watch(ctx, store.WatchOptions{ResourceVersion: rv(images.Metadata.ResourceVersion)})
	if err != nil {
		return err
	}
	defer imgW.Stop()
	resync := f.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	timer := time.NewTimer(resync)
	defer timer.Stop()
	owner := func(typ string, r ref, m *model.ObjectMeta, failed bool) {
		now := ownerState{m.Generation, m.DeletionTimestamp != nil}
		if old, ok := seen[r]; typ == "DELETED" || !ok || old != now {
			dirty[r] = true
		}
		if typ == "DELETED" {
			delete(seen, r)
			delete(failing, r)
		} else {
			seen[r] = now
			failing[r] = failed
		}
	}
	// take applies one change from the watches; it reports false when
	// retry, quiet or window fired first.
	take := func(retry, quiet, window <-chan time.Time) (bool, error) {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-retry:
			return false, nil
		case <-quiet:
			return false, nil
		case <-window:
			return false, nil
		case <-timer.C:
			f.ensureAll(ctx)
			timer.Reset(resync)
		case ev, ok := <-depW.Events:
			if !ok {
				return false, ended("deployments", depW)
			}
			var d model.Deployment
			if json.Unmarshal(ev.Object, &d) == nil {
				owner(ev.Type, ref{model.KindDeployment, d.Metadata.Namespace, d.Metadata.Name}, &d.Metadata, deploymentFailing(&d))
			}
		case ev, ok := <-jobW.Events:
			if !ok {
				return false, ended("jobs", jobW)
			}
			var j model.Job
			if json.Unmarshal(ev.Object, &j) == nil {
				owner(ev.Type, ref{model.KindJob, j.Metadata.Namespace, j.Metadata.Name}, &j.Metadata, jobFailing(&j))
			}
		case ev, ok := <-imgW.Events:
			if !ok {
				return false, ended("images", imgW)
			}
			// Only a new image can end a failure to create pods: one
			// being deleted stays so until it is gone.
			if ev.Type == "ADDED" {
				for r, failed := range failing {
					if failed {
						dirty[r] = true
					}
				}
			}
		case ev, ok := <-podW.Events:
			if !ok {
				return false, ended("pods", podW)
			}
			var p model.Pod
			if json.Unmarshal(ev.Object, &p) != nil {
				return true, nil
			}
			st, owned := stateOf(&p)
			if !owned {
				return true, nil
			}
			k := key(p.Metadata.Namespace, p.Metadata.Name)
			// A pod's creation is the workflow's own doing: it knows.
			if old, ok := seenPods[k]; ev.Type == "DELETED" || (ok && old != st) || (!ok && st != podState{kind: st.kind, owner: st.owner}) {
				dirty[ref{st.kind, p.Metadata.Namespace, st.owner}] = true
			}
			if ev.Type == "DELETED" {
				delete(seenPods, k)
			} else {
				seenPods[k] = st
			}
		}
		return true, nil
	}
	gather, window := f.gather()
	for {
		for r := range dirty {
			if err := f.workflows(r.kind).Wake(ctx, r.ns, r.name); err != nil {
				f.Log.Warn("workload feed: could not wake a workflow; will retry", "kind", r.kind, "name", key(r.ns, r.name), "err", err)
				continue
			}
			delete(dirty, r)
		}
		var retry <-chan time.Time
		if len(dirty) > 0 {
			retry = time.After(time.Second)
		}
		// Wait for a change, then take those that follow it closely
		// (pods of a rollout step turn Ready within moments of each
		// other), so one signal covers them: each costs the workflow a
		// sync.
		got, err := take(retry, nil, nil)
		end := time.After(window)
		for err == nil && got {
			got, err = take(nil, time.After(gather), end)
		}
		if err != nil {
			return err
		}
	}
}

// gather is how long a quiet spell ends a batch of changes, and how long a
// batch may last at most.
func (f *Follower) gather() (quiet, window time.Duration) {
	quiet, window = f.Gather, f.GatherWindow
	if quiet <= 0 {
		quiet = DefaultGather
	}
	if window <= 0 {
		window = DefaultGatherWindow
	}
	return quiet, window
}

func (f *Follower) workflows(kind string) Workflows {
	if kind == model.KindJob {
		return f.Jobs
	}
	return f.Deployments
}

// ensureAll starts the workflow of every deployment and job that has none.
func (f *Follower) ensureAll(ctx context.Context) {
	deps, err := f.Store.Deployments().ListAll(ctx, store.ListOptions{})
	if err != nil {
		f.Log.Warn("workload feed: resync", "err", err)
		return
	}
	for _, d := range deps {
		if err := f.Deployments.Ensure(ctx, d.Metadata.Namespace, d.Metadata.Name); err != nil {
			f.Log.Warn("workload feed: could not start a deployment's workflow", "deployment", key(d.Metadata.Namespace, d.Metadata.Name), "err", err)
		}
	}
	jobs, err := f.Store.Jobs().ListAll(ctx, store.ListOptions{})
	if err != nil {
		f.Log.Warn("workload feed: resync", "err", err)
		return
	}
	for _, j := range jobs {
		if err := f.Jobs.Ensure(ctx, j.Metadata.Namespace, j.Metadata.Name); err != nil {
			f.Log.Warn("workload feed: could not start a job's workflow", "job", key(j.Metadata.Namespace, j.Metadata.Name), "err", err)
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
