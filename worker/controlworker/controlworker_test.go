package controlworker_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/worker/controlworker"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// The control plane's schedules fire every few minutes (the nodes
// reconcile their own hosts), keep their interval on a second start, and
// the host reconciliation schedule of earlier versions is deleted.
func TestEnsureSchedulesKeepsTheWorkflowListQuiet(t *testing.T) {
	ctx := t.Context()
	tmp := devstack.StartTestTemporal(t)
	c, err := client.Dial(client.Options{HostPort: tmp.Address(), Namespace: tmp.Namespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	const obsolete = "zonewright-reconcile-hosts"
	if _, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{ID: obsolete,
		Spec:   client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: 30 * time.Second}}},
		Action: &client.ScheduleWorkflowAction{ID: obsolete, Workflow: "ReconcileHosts", TaskQueue: taskqueue.Control}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := controlworker.EnsureSchedules(ctx, c, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{workflows.HousekeepingScheduleID, workflows.ReconcilePodsScheduleID, workflows.ImageSyncScheduleID, workflows.ImageGCScheduleID} {
		d, err := c.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if iv := d.Schedule.Spec.Intervals; len(iv) != 1 || iv[0].Every < 5*time.Minute {
			t.Errorf("schedule %s fires every %+v; want every 5 minutes or less often", id, iv)
		}
	}
	_, err = c.ScheduleClient().GetHandle(ctx, obsolete).Describe(ctx)
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) {
		t.Fatalf("the obsolete host reconciliation schedule is still there: %v", err)
	}
}
