package controlops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// Lifecycles starts pod workflows, tells whether one runs and signals
// them; the workflows package provides it (PodClient).
type Lifecycles interface {
	Start(ctx context.Context, ref controlapi.PodRef) error
	Running(ctx context.Context, namespace, name string) (bool, error)
	// RunningPods lists the pods whose lifecycle runs, as Temporal's
	// visibility store sees them: it lags, so a lifecycle started a moment
	// ago may be missing (Running answers for one pod from its history).
	RunningPods(ctx context.Context) (map[controlapi.PodName]bool, error)
	Signal(ctx context.Context, namespace, name, signal string, arg any) error
	// FailingTasks tells whether the pod's lifecycle fails its workflow
	// tasks (it takes no signal then), Terminate ends it: a forced delete
	// of such a pod removes it without its lifecycle.
	FailingTasks(ctx context.Context, namespace, name string) (bool, error)
	Terminate(ctx context.Context, namespace, name, reason string) error
}

// EnsurePodWorkflows repairs the invariants "every pod row has its
// workflow" and "a pod stamped deleted has told its workflow": a crash
// between the API's two writes leaves a row without one, or a deletion
// its lifecycle never heard of, which kept the pod running, Terminating
// for ever. Rows younger than settle are left alone, as their creator may still
// be starting it. The rows are compared with one listing of the running
// lifecycles; only a pod missing from it (the listing lags a little) is
// asked about on its own. A pod that cannot be repaired does not keep the
// others from it: the errors come back together. It returns how many it
// started.
func (a *Control) EnsurePodWorkflows(ctx context.Context, settle time.Duration) (int, error) {
	if a.Lifecycles == nil {
		return 0, nil
	}
	running, err := a.Lifecycles.RunningPods(ctx)
	if err != nil {
		// A visibility store that cannot answer (Temporal's standard
		// visibility on Cassandra) leaves every pod to be asked about.
		slog.Warn("listing the running pod lifecycles failed; looking at each pod's", "err", err)
		running = nil
	}
	started := 0
	var errs []error
	opts := store.ListOptions{Limit: 500}
	for {
		page, err := a.Store.Pods().List(ctx, opts)
		if err != nil {
			return started, errors.Join(append(errs, err)...)
		}
		for _, p := range page.Items {
			ref := controlapi.PodRef{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}
			if deletionUnheard(&p, settle) {
				// A lifecycle started now reads the deletion from the row.
				if err := a.redeliverDeletion(ctx, ref, p.Metadata.DeletionGracePeriodSeconds); err != nil {
					errs = append(errs, err)
				}
			}
			if running[controlapi.PodName{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name}] ||
				p.Metadata.CreationTimestamp != nil && time.Since(*p.Metadata.CreationTimestamp) < settle {
				continue
			}
			ok, err := a.ensurePodWorkflow(ctx, ref)
			if ok {
				started++
			}
			if err != nil {
				errs = append(errs, err)
			}
			if ctx.Err() != nil {
				return started, errors.Join(append(errs, ctx.Err())...)
			}
		}
		if page.Metadata.Continue == "" {
			return started, errors.Join(errs...)
		}
		opts.Continue = page.Metadata.Continue
	}
}

// ensurePodWorkflow starts the pod's lifecycle unless it runs; started
// says whether it did.
func (a *Control) ensurePodWorkflow(ctx context.Context, ref controlapi.PodRef) (started bool, err error) {
	running, err := a.Lifecycles.Running(ctx, ref.Namespace, ref.Name)
	if err != nil || running {
		if err != nil {
			err = fmt.Errorf("is the lifecycle of %s running: %w", ref, err)
		}
		return false, err
	}
	if err := a.Pods().StartLifecycle(ctx, ref); err != nil {
		return false, fmt.Errorf("start the lifecycle of %s: %w", ref, err)
	}
	// Recorded here, not by the lifecycle, which did not exist: an event
	// row of the reconciler's own, which no other writer touches (see
	// event in reconcile_hosts.go).
	err = a.Store.RecordEvent(ctx, model.ObjectReference{Kind: model.KindPod, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID},
		model.EventWarning, "LifecycleRestored", "The pod had no running lifecycle workflow; the reconciler started one", "zonewright-reconciler")
	if err != nil {
		err = fmt.Errorf("record the restored lifecycle of %s: %w", ref, err)
	}
	return true, err
}

// deletionUnheard tells whether p was stamped deleted at least settle ago
// and its lifecycle has not shown it began to stop the pod: it writes the
// reason Terminating when it does (a pod that has finished is removed
// without, so a redelivery reaches it at most once a reconciliation, and
// changes nothing).
func deletionUnheard(p *model.Pod, settle time.Duration) bool {
	ts := p.Metadata.DeletionTimestamp
	return ts != nil && time.Since(*ts) >= settle && p.Status.Reason != model.ReasonTerminating
}

// redeliverDeletion signals the pod's lifecycle to terminate, as the
// deletion did (Pods.terminate): a lifecycle that has the signal already
// keeps the shorter grace period of the two, so a redelivery is harmless.
func (a *Control) redeliverDeletion(ctx context.Context, ref controlapi.PodRef, grace *int64) error {
	err := a.Lifecycles.Signal(ctx, ref.Namespace, ref.Name, podcontract.SignalTerminate, podcontract.TerminateSignal{GracePeriodSeconds: grace})
	if errors.Is(err, podcontract.ErrNoLifecycle) {
		return nil // the reconciler starts one, which reads the deletion
	}
	if err != nil {
		return fmt.Errorf("redeliver the deletion of %s: %w", ref, err)
	}
	err = a.Store.RecordEvent(ctx, model.ObjectReference{Kind: model.KindPod, Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID},
		model.EventWarning, "DeletionRedelivered", "The pod's deletion had not reached its lifecycle workflow; the reconciler delivered it", "zonewright-reconciler")
	if err != nil {
		err = fmt.Errorf("record the redelivered deletion of %s: %w", ref, err)
	}
	return err
}
