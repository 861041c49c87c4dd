package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/model"
)

// versionNodeEviction marks histories that handled an evict signal.
const versionNodeEviction = "node-eviction"

// leaveNode takes the running pod off the node it was evicted from. A live
// node (drain) stops it gracefully, its grace period honoured, and removes
// its zone; a lost node is asked nothing more: its agent removes the
// leftovers when it comes back, before it reports Ready.
func (w *podWorkflow) leaveNode(ctx workflow.Context) error {
	_ = workflow.GetVersion(ctx, versionNodeEviction, workflow.DefaultVersion, 1)
	if !w.lost() {
		w.stopGracefully(ctx, "Evicting")
	}
	w.teardown(ctx) // on a lost node: only the address is released
	return w.leftNode(ctx)
}

// leftNode decides what becomes of a pod that left its node: under
// restartPolicy Always it is unbound and scheduled again (same name, same
// UID; errMoved), otherwise it stays Failed until it is deleted.
func (w *podWorkflow) leftNode(ctx workflow.Context) error {
	ev, from := *w.evict, w.run_.Node
	w.evict, w.run_, w.status.Node = nil, nil, ""
	why := "was drained"
	if ev.Lost {
		why = "is lost"
	}
	if w.spec.RestartPolicy != model.RestartAlways {
		msg := fmt.Sprintf("node %s %s and restartPolicy is %s", from, why, w.spec.RestartPolicy)
		if ev.Lost {
			// Node health marked the pod Failed/NodeLost already.
			w.status.LastError = msg
			w.setPhase(ctx, model.PodFailed)
		} else {
			w.markFailed(ctx, ev.Reason, msg)
		}
		return w.awaitRemoval(ctx)
	}
	w.step(ctx, "Unbind", 1)
	in := activities.UnbindInput{Pod: w.ref(), Message: fmt.Sprintf("Node %s %s; scheduling %s on another node", from, why, w.ref())}
	if err := workflow.ExecuteActivity(ctx, ctl.UnbindPod, in).Get(ctx, nil); err != nil {
		return err
	}
	w.endStep(ctx, "")
	w.movedFrom = from
	return errMoved
}
