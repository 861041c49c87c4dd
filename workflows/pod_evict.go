package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
)

// leaveNode takes the running pod off the node it was evicted from. A live
// node (drain) stops it gracefully, its grace period honoured, and removes
// its zone; a lost node is asked nothing more: its agent removes the
// leftovers when it comes back, before it reports Ready.
func (w *podWorkflow) leaveNode(ctx workflow.Context) error {
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	if !w.lost() {
		w.stopGracefully(ctx, "Evicting")
	}
	w.teardown(ctx) // on a lost node: only the address is released
	return w.leftNode(ctx)
}

// leftNode decides what becomes of a pod that left its node (holding
// nothing there any more): under restartPolicy Always it is unbound and
// scheduled again, same name and UID; otherwise it ends Failed.
func (w *podWorkflow) leftNode(ctx workflow.Context) error {
	ev, from := *w.st.Evict, w.st.Node
	why := "was drained"
	if ev.Lost {
		why = "is lost"
	}
	if ev.Message != "" {
		why += " (" + ev.Message + ")"
	}
	if w.spec.RestartPolicy != model.RestartAlways {
		w.finish(ctx, PhaseFailed, ev.Reason, fmt.Sprintf("node %s %s and restartPolicy is %s", from, why, w.spec.RestartPolicy))
		return nil
	}
	w.update(ctx, controlapi.StatusUpdate{EventOnly: true, EventType: model.EventWarning, EventReason: ev.Reason,
		EventMessage: fmt.Sprintf("Node %s %s; the pod leaves it", from, why)})
	w.step(ctx, "Unbind", 1)
	in := controlapi.UnbindInput{Pod: w.ref(), Message: fmt.Sprintf("Node %s %s; scheduling %s on another node", from, why, w.ref())}
	if err := w.control(ctx, ctl.UnbindPod, in).Get(ctx, nil); err != nil {
		return err
	}
	w.endStep(ctx, "")
	w.st.Evict, w.st.Node, w.st.Run, w.st.Sandbox, w.st.Report, w.st.NodeNotReady = nil, "", nil, nil, nil, false
	w.st.MovedFrom = from
	w.setPhase(PhasePending)
	return nil
}
