package worker_test

import (
	"log/slog"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"

	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/worker"
	"github.com/zonewright/zonewright/workflows"
)

// The host reconciliation schedule follows the configured interval and
// grace period, also when it exists already (a restart with new flags).
func TestEnsureSchedulesAppliesTheReconcileSettings(t *testing.T) {
	ctx := t.Context()
	tmp := devstack.StartTestTemporal(t)
	c, err := client.Dial(client.Options{HostPort: tmp.Address(), Namespace: tmp.Namespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	check := func(every, grace time.Duration) {
		t.Helper()
		d, err := c.ScheduleClient().GetHandle(ctx, workflows.ReconcileHostsScheduleID).Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if iv := d.Schedule.Spec.Intervals; len(iv) != 1 || iv[0].Every != every {
			t.Errorf("intervals %+v, want every %s", iv, every)
		}
		a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction)
		if !ok || a.Workflow != workflows.ReconcileHostsWorkflowName || a.TaskQueue != workflows.ControlTaskQueue || len(a.Args) != 1 {
			t.Fatalf("action %+v", d.Schedule.Action)
		}
		var in workflows.ReconcileHostsInput
		if err := converter.GetDefaultDataConverter().FromPayload(a.Args[0].(*commonpb.Payload), &in); err != nil {
			t.Fatal(err)
		}
		if in.OrphanGrace != grace {
			t.Errorf("orphan grace %s, want %s", in.OrphanGrace, grace)
		}
	}
	if err := worker.EnsureSchedules(ctx, c, worker.ScheduleOptions{}); err != nil {
		t.Fatal(err)
	}
	check(worker.ReconcileEvery, workflows.DefaultOrphanGrace)
	if err := worker.EnsureSchedules(ctx, c, worker.ScheduleOptions{ReconcileInterval: 5 * time.Second, OrphanGrace: time.Minute}); err != nil {
		t.Fatal(err)
	}
	check(5*time.Second, time.Minute)
}
