package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
)

// A pod's first start is recorded as it goes, from times the lifecycle
// knows anyway (workflow.Now at each step's end, the node's step times in
// the provision's result), and handed to the status write that first makes
// the pod Ready, which measures it (controlops.UpdatePodStatus). No
// command is added: the record lives in PodState.

// startupScheduled: the pod was bound to a node. A pod evicted before it
// was ever Ready starts its record again; one that was Ready is not
// measured again.
func (w *podWorkflow) startupScheduled(ctx workflow.Context) {
	if !w.st.StartMeasured {
		w.st.Startup = &controlapi.PodStartup{Scheduled: workflow.Now(ctx)}
	}
}

// startupImageReady: the pod holds an address and its image is on the node.
func (w *podWorkflow) startupImageReady(ctx workflow.Context) {
	if s := w.st.Startup; s != nil {
		s.ImageReady = workflow.Now(ctx)
	}
}

// startupProvisioned: the zone is built and supervised; steps are the
// provision's step times, which divide it into its phases.
func (w *podWorkflow) startupProvisioned(ctx workflow.Context, steps []hostapi.StepTime) {
	s := w.st.Startup
	if s == nil {
		return
	}
	s.Provisioned = workflow.Now(ctx)
	s.Boot, s.Network, s.Containers = 0, 0, 0
	for _, st := range steps {
		switch st.Step {
		case "BootZone":
			s.Boot += st.Duration
		case "ConfigureNetwork":
			s.Network += st.Duration
		case "StartContainers", "WaitContainersOnline", "Supervise":
			s.Containers += st.Duration
		}
		// The rest (datasets, link, configuration, install) is the
		// install's, with the request's way to the node.
	}
}

// startupMeasured hands the record over to the status write that makes
// the pod Ready (nil when there is none to hand, or it was handed); from
// then on the pod's start counts as measured.
func (w *podWorkflow) startupMeasured() *controlapi.PodStartup {
	s := w.st.Startup
	if s == nil || w.st.StartMeasured || s.Provisioned.IsZero() {
		return nil
	}
	w.st.Startup, w.st.StartMeasured = nil, true
	return s
}

// lastStepTime is how long the step recorded last took.
func (w *podWorkflow) lastStepTime() time.Duration {
	if n := len(w.st.Steps); n > 0 && !w.st.Steps[n-1].Finished.IsZero() {
		return w.st.Steps[n-1].Finished.Sub(w.st.Steps[n-1].Started)
	}
	return 0
}
