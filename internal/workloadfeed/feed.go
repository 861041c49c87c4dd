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
	"log/slog"
	"maps"
	"time"

	"github.com/zonewright/zonewright/internal/endpoints"
	"github.com/zonewright/zonewright/internal/informer"
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
	leader.Lead(ctx, f.Log, "workload feed", func(lctx context.Context) { f.newInformer().Run(lctx) })
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

// feed is what the follower knows, from the lists and the watches, and
// the workflows it has yet to wake.
type feed struct {
	seen     map[ref]ownerState
	seenPods map[string]podState
	dirty    map[ref]bool
	// failing: the owners that could not create their pods (a
	// ReplicaFailure condition); a new image may be the one they lack.
	failing map[ref]bool
}

// newInformer lists, wakes every deployment and job (changes may have been
// missed while nobody followed), then wakes those a change concerns; every
// resync it checks that each has its workflow, which costs the running
// ones nothing.
func (f *Follower) newInformer() *informer.Informer {
	fd := &feed{seen: map[ref]ownerState{}, seenPods: map[string]podState{}, dirty: map[ref]bool{}, failing: map[ref]bool{}}
	resync := f.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	// Changes that follow closely (pods of a rollout step turn Ready
	// within moments of each other) are woken for together: each wake
	// costs the workflow a sync.
	quiet, window := f.gather()
	return &informer.Informer{Name: "workload feed", Log: f.Log,
		Sources: []informer.Source{
			informer.Kind(f.Store.Deployments(), owners(fd, model.KindDeployment, deploymentFailing)),
			informer.Kind(f.Store.Jobs(), owners(fd, model.KindJob, jobFailing)),
			informer.Kind(f.Store.Pods(), informer.Handlers[model.Pod]{Listed: fd.listPods, Changed: fd.changePod}),
			informer.Kind(f.Store.Images(), informer.Handlers[model.Image]{Changed: fd.changeImage}),
		},
		Flush: func(ctx context.Context) (bool, error) {
			for r := range fd.dirty {
				if err := f.workflows(r.kind).Wake(ctx, r.ns, r.name); err != nil {
					f.Log.Warn("workload feed: could not wake a workflow; will retry", "kind", r.kind, "name", key(r.ns, r.name), "err", err)
					continue
				}
				delete(fd.dirty, r)
			}
			return len(fd.dirty) > 0, nil
		},
		Quiet: quiet, Window: window,
		Resync: resync, Resynced: f.ensureAll,
	}
}

// owners follows one kind of owner, deployments or jobs: a list replaces
// what the feed knew of the kind and wakes each; a change wakes the one
// changed if its workflow acts on it.
func owners[T any, PT store.ObjectPtr[T]](fd *feed, kind string, failing func(PT) bool) informer.Handlers[T] {
	return informer.Handlers[T]{
		Listed: func(_ context.Context, items []T) error {
			ofKind := func(r ref) bool { return r.kind == kind }
			maps.DeleteFunc(fd.seen, func(r ref, _ ownerState) bool { return ofKind(r) })
			maps.DeleteFunc(fd.failing, func(r ref, _ bool) bool { return ofKind(r) })
			maps.DeleteFunc(fd.dirty, func(r ref, _ bool) bool { return ofKind(r) })
			for i := range items {
				o := PT(&items[i])
				m := o.GetMeta()
				r := ref{kind, m.Namespace, m.Name}
				fd.seen[r] = ownerState{m.Generation, m.DeletionTimestamp != nil}
				fd.dirty[r] = true
				fd.failing[r] = failing(o)
			}
			return nil
		},
		Changed: func(_ context.Context, ev informer.Event[T]) error {
			o := PT(ev.Object)
			m := o.GetMeta()
			fd.owner(ev.Type, ref{kind, m.Namespace, m.Name}, m, failing(o))
			return nil
		},
	}
}

// owner notes a change to a deployment or a job: a new generation, a
// deletion begun or done.
func (fd *feed) owner(typ string, r ref, m *model.ObjectMeta, failed bool) {
	now := ownerState{m.Generation, m.DeletionTimestamp != nil}
	if old, ok := fd.seen[r]; typ == informer.Deleted || !ok || old != now {
		fd.dirty[r] = true
	}
	if typ == informer.Deleted {
		delete(fd.seen, r)
		delete(fd.failing, r)
	} else {
		fd.seen[r] = now
		fd.failing[r] = failed
	}
}

func (fd *feed) listPods(_ context.Context, pods []model.Pod) error {
	clear(fd.seenPods)
	for i := range pods {
		p := &pods[i]
		if st, ok := stateOf(p); ok {
			fd.seenPods[key(p.Metadata.Namespace, p.Metadata.Name)] = st
		}
	}
	return nil
}

func (fd *feed) changePod(_ context.Context, ev informer.Event[model.Pod]) error {
	p := ev.Object
	st, owned := stateOf(p)
	if !owned {
		return nil
	}
	k := key(p.Metadata.Namespace, p.Metadata.Name)
	// A pod's creation is the workflow's own doing: it knows.
	if old, ok := fd.seenPods[k]; ev.Type == informer.Deleted || (ok && old != st) || (!ok && st != podState{kind: st.kind, owner: st.owner}) {
		fd.dirty[ref{st.kind, p.Metadata.Namespace, st.owner}] = true
	}
	if ev.Type == informer.Deleted {
		delete(fd.seenPods, k)
	} else {
		fd.seenPods[k] = st
	}
	return nil
}

// changeImage wakes the owners that failed to create their pods when an
// image arrives. Only a new image can end such a failure: one being
// deleted stays so until it is gone.
func (fd *feed) changeImage(_ context.Context, ev informer.Event[model.Image]) error {
	if ev.Type != informer.Added {
		return nil
	}
	for r, failed := range fd.failing {
		if failed {
			fd.dirty[r] = true
		}
	}
	return nil
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
