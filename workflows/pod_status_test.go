package workflows

import (
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// A workflow task that times out after its status write ran leaves that
// write in the store unrecorded, and the task tried again may take the
// node's newer report with the older (the lifecycle keeps the newest),
// finding the status it last recorded unchanged. Seen at 2,000 pods: a
// report of a container missing was written Not Ready by a task that
// timed out; its retry took the next reports (ready) with it and wrote
// nothing, and the pod stayed Not Ready for good. Signals taken at once
// are therefore written even when the status looks unchanged. The test
// puts the timed-out task's write in the store by hand.
func TestReportsTakenAtOnceRewriteTheStatus(t *testing.T) {
	h := newHarness(t, podSpec(func(s *model.PodSpec) {
		s.Containers[0].ReadinessProbe = &model.Probe{Exec: &model.ExecAction{Command: []string{"true"}}, PeriodSeconds: 10}
	}))
	h.report(time.Minute, "running", running(true))
	h.env.RegisterDelayedCallback(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		stale := h.statuses[len(h.statuses)-1]
		stale.Conditions = []model.PodCondition{{Type: model.PodReady, Status: model.ConditionFalse}}
		h.statuses = append(h.statuses, stale)
		h.statusAt = append(h.statusAt, h.env.Now())
	}, 2*time.Minute)
	// The retried task: the report the timed-out one took, and a newer
	// one that came meanwhile, at once.
	h.env.RegisterDelayedCallback(func() {
		seq := uint64(h.env.Now().UnixNano())
		h.env.SignalWorkflowSkippingWorkflowTask(podcontract.SignalReport, model.PodReport{UID: testRef.UID, Node: "n1", Seq: seq + 1,
			Zone: "running", Containers: []model.ContainerReport{running(false)}})
		h.env.SignalWorkflow(podcontract.SignalReport, model.PodReport{UID: testRef.UID, Node: "n1", Seq: seq + 2,
			Zone: "running", Containers: []model.ContainerReport{running(true)}})
	}, 3*time.Minute)
	var before, after []string
	h.env.RegisterDelayedCallback(func() { before = h.readyConditions() }, 2*time.Minute-time.Second)
	h.env.RegisterDelayedCallback(func() { after = h.readyConditions() }, 4*time.Minute)
	h.run(5*time.Minute, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	if err := h.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if len(before) == 0 || before[len(before)-1] != "True/" {
		t.Fatalf("before the unrecorded write the Ready conditions were %v; want the pod Ready", before)
	}
	if after[len(after)-1] != "True/" {
		t.Fatalf("after the next reports the store holds Ready %v; want True", after[len(after)-1])
	}
}
