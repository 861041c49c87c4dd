package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// errNotTerminating refuses a finalize update on a pod with no grace
// period under way.
var errNotTerminating = errors.New("the pod is not terminating: finalize ends a grace period that has begun (delete the pod first)")

// setup registers the query, the signals and their update twins. Every
// handler only records what was asked; the phase loop acts on it.
func (w *podWorkflow) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, podcontract.QueryStatus, w.status); err != nil {
		return err
	}
	receive(ctx, podcontract.SignalTerminate, w.onTerminate)
	receive(ctx, podcontract.SignalCancel, w.onCancel)
	receive(ctx, podcontract.SignalFinalize, func(ctx workflow.Context, _ struct{}) {
		if w.st.Terminate == nil {
			w.update(workflow.WithActivityOptions(ctx, controlOptions), controlapi.StatusUpdate{EventOnly: true,
				EventType: model.EventWarning, EventReason: "FinalizeIgnored", EventMessage: "Finalize ignored: " + errNotTerminating.Error()})
			return
		}
		w.st.Finalize = true
	})
	receive(ctx, podcontract.SignalEvict, func(_ workflow.Context, s podcontract.EvictSignal) {
		if w.st.Node != s.Node {
			return // the pod has left that node already
		}
		// A lost node outranks a drain of the same node.
		if w.st.Evict == nil || w.st.Evict.Node != s.Node || s.Lost {
			w.st.Evict = &s
		}
	})
	receive(ctx, podcontract.SignalNode, func(_ workflow.Context, s podcontract.NodeSignal) {
		if s.Node == w.st.Node {
			w.st.NodeNotReady = !s.Ready
			w.taken++
		}
	})
	receive(ctx, podcontract.SignalReport, func(ctx workflow.Context, r model.PodReport) {
		if r.UID != w.in.Pod.UID || r.Node != w.st.Node || (w.st.Report != nil && r.Seq <= w.st.Report.Seq) {
			return // another incarnation, another node, or older than one kept
		}
		if w.st.Phase != PhaseProvisioning && w.st.Phase != PhaseRunning {
			return
		}
		if run := w.st.Run; run != nil && r.Seq <= run.LastSeq &&
			workflow.GetVersion(ctx, versionReportHighWater, workflow.DefaultVersion, 1) >= 1 {
			return // older than one applied: it arrived late
		}
		w.st.Report = &r
		w.taken++
	})
	receive(ctx, podcontract.SignalWake, func(workflow.Context, struct{}) { w.woken = true })

	if err := workflow.SetUpdateHandlerWithOptions(ctx, podcontract.UpdateTerminate,
		func(ctx workflow.Context, s podcontract.TerminateSignal) (int64, error) {
			w.onTerminate(ctx, s)
			return grace(w.st.Terminate.GracePeriodSeconds, w.podGrace()), nil
		}, workflow.UpdateHandlerOptions{Validator: func(s podcontract.TerminateSignal) error {
			if s.GracePeriodSeconds != nil && (*s.GracePeriodSeconds < 0 || *s.GracePeriodSeconds > model.MaxGracePeriodSeconds) {
				return fmt.Errorf("gracePeriodSeconds must be between 0 and %d", model.MaxGracePeriodSeconds)
			}
			return nil
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, podcontract.UpdateFinalize,
		func(workflow.Context) error { w.st.Finalize = true; return nil },
		workflow.UpdateHandlerOptions{Validator: func() error {
			if w.st.Terminate == nil {
				return errNotTerminating
			}
			return nil
		}}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, podcontract.UpdateCancel,
		func(ctx workflow.Context, s podcontract.CancelSignal) error { w.onCancel(ctx, s); return nil },
		workflow.UpdateHandlerOptions{Validator: func(s podcontract.CancelSignal) error {
			if len(s.Reason) > model.MaxReasonBytes {
				return fmt.Errorf("the reason has %d bytes: at most %d are kept", len(s.Reason), model.MaxReasonBytes)
			}
			switch w.st.Phase {
			case PhaseTerminating, PhaseRemoving, PhaseFailed, PhaseSucceeded:
				return fmt.Errorf("the pod is %s: there is nothing to cancel", w.st.Phase)
			}
			return nil
		}})
}

// versionReportHighWater: a report numbered at or below the newest one
// applied (RunState.LastSeq) is ignored. Runs recorded before it applied
// such a late report; the version is asked only where the two rules
// differ, so their histories replay unchanged.
const versionReportHighWater = "report-high-water"

// receive runs handle for every signal of that name, in order. A signal
// stays in its channel until its handler takes it, so the continue-as-new
// guard (GetUnhandledSignalNames) sees it until then: a goroutine blocked
// in Receive is handed a signal as it is delivered, and when the phase loop
// runs first in that workflow task and continues as new, the signal is
// lost before its handler runs. The wait ignores a Temporal cancel
// request: the lifecycle goes on after one, and so do its signals.
func receive[T any](ctx workflow.Context, name string, handle func(workflow.Context, T)) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, name)
		waitCtx, _ := workflow.NewDisconnectedContext(ctx)
		for {
			_ = workflow.Await(waitCtx, func() bool { return ch.Len() > 0 })
			var v T
			if ch.ReceiveAsync(&v) {
				handle(ctx, v)
			}
		}
	})
}

func (w *podWorkflow) onTerminate(_ workflow.Context, s podcontract.TerminateSignal) {
	// A second, shorter grace period wins, as a second DELETE does; one
	// that arrives while the pod stops shortens the stop under way
	// (stopGracefully's graceClock).
	if w.st.Terminate == nil || grace(s.GracePeriodSeconds, 1<<31) < grace(w.st.Terminate.GracePeriodSeconds, 1<<31) {
		w.st.Terminate = &s
	}
}

func (w *podWorkflow) onCancel(_ workflow.Context, s podcontract.CancelSignal) {
	if s.Reason == "" {
		s.Reason = "cancelled by an operator"
	}
	// A signal has no validator: a reason too long for a status is cut.
	s.Reason = model.ShortMessage(s.Reason, model.MaxReasonBytes)
	w.st.Cancel = &s
}

// podGrace is the pod's own termination grace period.
func (w *podWorkflow) podGrace() int64 {
	if g := w.spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return model.DefaultTerminationGracePeriodSeconds
}

func (w *podWorkflow) status() (PodLifecycleStatus, error) {
	s := PodLifecycleStatus{Step: string(w.st.Phase), Phase: w.apiPhase(), Node: w.st.Node, Attempts: w.st.Attempt,
		LastError: w.lastError, Steps: w.st.Steps}
	if s.LastError == "" {
		s.LastError = w.st.Waiting
	}
	if r := w.st.Run; r != nil {
		s.Restarts = map[string]int32{}
		for _, c := range r.Containers {
			s.Restarts[c.Name] = c.Restarts
		}
	}
	return s, nil
}

// apiPhase is the pod phase the API shows for a lifecycle phase.
func (w *podWorkflow) apiPhase() string {
	switch w.st.Phase {
	case PhaseRunning, PhaseTerminating:
		return model.PodRunning
	case PhaseFailed:
		return model.PodFailed
	case PhaseSucceeded:
		return model.PodSucceeded
	}
	return model.PodPending
}
