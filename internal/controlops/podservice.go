package controlops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// Pods creates pods with their lifecycles and deletes them through
// those lifecycles: the one place of these rules, for the API,
// deployments and jobs alike. The reconciler repairs what a crash left
// half done with the same start (StartLifecycle). It is a view of a
// Control: its store, its lifecycles (nil: pods are recorded without
// running) and its removal of a pod's row and address.
type Pods struct{ ctl *Control }

// Pods is the pod service over a's store and lifecycles.
func (a *Control) Pods() Pods { return Pods{ctl: a} }

// LifecycleError is a failure of a pod's workflow (Temporal not
// answering, a lifecycle refusing), told apart from the store's errors.
type LifecycleError struct{ Err error }

func (e *LifecycleError) Error() string { return e.Err.Error() }
func (e *LifecycleError) Unwrap() error { return e.Err }

// PodCreate is how a pod is created.
type PodCreate struct {
	// Images are the registry images the create adds to the catalog
	// (store.CreatePodWithCatalogImages).
	Images store.PodImages
	// KeepWithoutLifecycle keeps the row when its lifecycle cannot start
	// now, for the reconciler to start (EnsurePodWorkflows): a
	// controller's pod, which removed would be replaced at the next sync
	// by another of a new name, a pod made twice. Otherwise the row goes
	// again and the caller hears why: nothing half-written.
	KeepWithoutLifecycle bool
}

// Create stores the pod and starts its lifecycle (not on a dry run, nor
// without lifecycles). It returns the images it added to the catalog,
// whose imports the caller starts, also when the lifecycle failed to.
func (s Pods) Create(ctx context.Context, p *model.Pod, how PodCreate) ([]*model.Image, error) {
	made, err := s.ctl.Store.CreatePodWithCatalogImages(ctx, p, how.Images)
	if err != nil {
		return nil, s.whyNotCreated(ctx, p, err)
	}
	if s.ctl.Lifecycles == nil || store.IsDryRun(ctx) {
		return made, nil
	}
	ref := controlapi.PodRef{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}
	err = s.StartLifecycle(ctx, ref)
	switch {
	case err == nil:
		return made, nil
	case how.KeepWithoutLifecycle:
		return made, fmt.Errorf("start the lifecycle of pod %s (the reconciler will): %w", ref, err)
	}
	// Without its workflow the pod must not stay. Should this delete
	// fail too, the reconciler starts the workflow later.
	_, _ = s.ctl.Store.Pods().Delete(context.WithoutCancel(ctx), ref.Namespace, ref.Name, p.Metadata.ResourceVersion)
	return made, &LifecycleError{Err: err}
}

// whyNotCreated names a pod of the same name that is still terminating,
// which a create may take for one that is gone.
func (s Pods) whyNotCreated(ctx context.Context, p *model.Pod, err error) error {
	if !errors.Is(err, store.ErrAlreadyExists) {
		return err
	}
	if cur, gerr := s.ctl.Store.Pods().Get(ctx, p.Metadata.Namespace, p.Metadata.Name); gerr == nil && cur.Metadata.DeletionTimestamp != nil {
		return fmt.Errorf("%w: pod %q is still terminating; create it again once it is gone", store.ErrAlreadyExists, p.Metadata.Name)
	}
	return err
}

// StartLifecycle starts the pod's lifecycle workflow: at its creation, or
// when the reconciler finds its row without one.
func (s Pods) StartLifecycle(ctx context.Context, ref controlapi.PodRef) error {
	return s.ctl.Lifecycles.Start(ctx, ref)
}

// PodDelete is how a pod is deleted.
type PodDelete struct {
	// GracePeriodSeconds replaces the pod's terminationGracePeriodSeconds
	// (nil: the pod's own); 0 forces.
	GracePeriodSeconds *int64
	// ResourceVersion and UID, when set, must be the pod's (a conflict
	// otherwise).
	ResourceVersion string
	UID             *string
}

// check is the delete's preconditions held against p.
func (how PodDelete) check(p *model.Pod) error {
	if how.UID != nil && *how.UID != p.Metadata.UID {
		return fmt.Errorf("%w: precondition failed: UID %s is not the pod's (%s)", store.ErrConflict, *how.UID, p.Metadata.UID)
	}
	if rv := how.ResourceVersion; rv != "" && rv != p.Metadata.ResourceVersion {
		return fmt.Errorf("%w: precondition failed: resourceVersion %s is stale (now %s)", store.ErrConflict, rv, p.Metadata.ResourceVersion)
	}
	return nil
}

// Delete asks for a pod's removal. Its lifecycle stops it within the
// grace period, then the row goes and watchers see DELETED; the deletion
// is stamped on the row first. A pod without a lifecycle has nothing on
// a host and goes at once. A forced delete (grace 0) of a pod whose
// lifecycle fails its workflow tasks removes it without (forceRemove).
// It returns the pod as the deletion left it.
func (s Pods) Delete(ctx context.Context, ns, name string, how PodDelete) (*model.Pod, error) {
	for {
		p, err := s.ctl.Store.Pods().Get(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		if err := how.check(p); err != nil {
			return nil, err
		}
		if s.ctl.Lifecycles == nil {
			return s.ctl.Store.Pods().Delete(ctx, ns, name, p.Metadata.ResourceVersion)
		}
		g, stamped := stampDeletion(p, how.GracePeriodSeconds)
		if stamped {
			if err := s.ctl.Store.Pods().Update(ctx, p); errors.Is(err, store.ErrConflict) {
				continue // written meanwhile: read it again
			} else if err != nil {
				return nil, err
			}
		}
		return s.terminate(ctx, p, g)
	}
}

// stampDeletion marks p deleted with grace (nil: its own), unless it was
// already with a grace period no longer; it returns the grace period and
// whether p changed.
func stampDeletion(p *model.Pod, grace *int64) (*int64, bool) {
	g := grace
	if g == nil {
		g = p.Spec.TerminationGracePeriodSeconds
	}
	if prev := p.Metadata.DeletionGracePeriodSeconds; prev != nil && (g == nil || *g >= *prev) {
		return g, false
	}
	if p.Metadata.DeletionTimestamp == nil {
		now := time.Now().UTC()
		p.Metadata.DeletionTimestamp = &now
	}
	p.Metadata.DeletionGracePeriodSeconds = g
	return g, true
}

// terminate tells the lifecycle of p, stamped deleted, to stop it within
// grace.
func (s Pods) terminate(ctx context.Context, p *model.Pod, grace *int64) (*model.Pod, error) {
	ns, name := p.Metadata.Namespace, p.Metadata.Name
	err := s.ctl.Lifecycles.Signal(ctx, ns, name, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: grace})
	if errors.Is(err, podcontract.ErrNoLifecycle) {
		gone, err := s.ctl.Store.Pods().Delete(ctx, ns, name, p.Metadata.ResourceVersion)
		if errors.Is(err, store.ErrConflict) {
			return p, nil // its lifecycle took it meanwhile, or one the reconciler starts will
		}
		return gone, err
	}
	if err != nil {
		return nil, &LifecycleError{Err: err}
	}
	if grace != nil && *grace == 0 {
		if failing, err := s.ctl.Lifecycles.FailingTasks(ctx, ns, name); err == nil && failing {
			return p, s.forceRemove(ctx, p)
		}
	}
	return p, nil
}

// forceRemove ends a pod whose lifecycle fails its workflow tasks, on a
// forced delete: such a lifecycle takes no signal, and a forced delete
// must end the pod all the same. The lifecycle is terminated, the row
// removed and the address released; what the node still holds is an
// orphan, which host reconciliation removes.
//
// This is the one place besides the lifecycle that writes a pod, and it
// writes only once the lifecycle is terminated: Temporal then completes no
// workflow task of that run, so the lifecycle issues nothing more. What it
// may still land is a step already running in a worker (a local activity
// of the task in flight). Each of those is fenced by the pod's UID
// (UpdatePodStatus, ReleasePodIP and RemovePod change nothing of a row
// that is gone or another incarnation's) except an allocation, which is
// why the row goes before the address: AllocatePodIP allocates, then looks
// for the row, and gives back an address whose pod is gone. A lifecycle
// the reconciler starts meanwhile (the row still there, no lifecycle
// running) reads the deletion timestamp and tears down and removes the
// same pod, by the same fenced, idempotent steps.
func (s Pods) forceRemove(ctx context.Context, p *model.Pod) error {
	ref := controlapi.PodRef{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}
	if err := s.ctl.Lifecycles.Terminate(ctx, ref.Namespace, ref.Name, "forced delete of a pod whose lifecycle fails its workflow tasks"); err != nil {
		return &LifecycleError{Err: err}
	}
	err := s.ctl.RemovePod(ctx, ref)
	for tries := 1; errors.Is(err, ErrPodChanged) && tries < 3; tries++ {
		err = s.ctl.RemovePod(ctx, ref) // a write raced ours: read it again
	}
	if err != nil {
		return err
	}
	if err := s.ctl.ReleasePodIP(ctx, ref); err != nil {
		return err
	}
	_ = s.ctl.Store.RecordEvent(ctx, model.ObjectReference{Kind: model.KindPod, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID},
		model.EventWarning, "ForceDeleted", "removed without its lifecycle, which fails its workflow tasks; the node's leftovers are orphans for host reconciliation", "zonewright-api")
	return nil
}
