package host_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/devstack"
)

// quietStepInput says how the test workflow runs its one step.
type quietStepInput struct {
	Queue     string
	Heartbeat time.Duration
	Attempts  int32
}

// quietStepWorkflow runs QuietStep with a StartToClose far longer than
// the test and returns the attempt that answered.
func quietStepWorkflow(ctx workflow.Context, in quietStepInput) (int32, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: in.Queue,
		StartToCloseTimeout: 10 * time.Minute, HeartbeatTimeout: in.Heartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumAttempts: in.Attempts}})
	var attempt int32
	err := workflow.ExecuteActivity(ctx, "QuietStep").Get(ctx, &attempt)
	return attempt, err
}

// quietStep records one heartbeat of its own and then works 8 s without
// another, as a zone boot does; an attempt in the crashing worker
// (quietStepBlocks) never ends by itself.
func quietStep(ctx context.Context) (int32, error) {
	activity.RecordHeartbeat(ctx, "step 1")
	if os.Getenv(crashingWorkerEnv) != "" {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	select {
	case <-time.After(8 * time.Second):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return activity.GetInfo(ctx).Attempt, nil
}

// crashingWorkerEnv makes the test binary a worker process that takes a
// step and is then killed (TestKeepalive...).
const crashingWorkerEnv = "ZW_TEST_KEEPALIVE_WORKER"

func startQuietWorker(t *testing.T, c client.Client, queue string, keepalive bool) {
	t.Helper()
	o := worker.Options{}
	if keepalive {
		o.Interceptors = append(o.Interceptors, hostacts.Keepalive(200*time.Millisecond))
	}
	w := worker.New(c, queue, o)
	w.RegisterWorkflow(quietStepWorkflow)
	w.RegisterActivityWithOptions(quietStep, activity.RegisterOptions{Name: "QuietStep"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
}

// A host step that reports no progress of its own lives on its heartbeat
// timeout while its worker runs it (Keepalive), and the details it last
// recorded stay its details; the same step without the keepalive fails
// on that timeout. A step whose worker is killed while it runs is tried
// again after the heartbeat timeout, not after its StartToClose, which
// is what the keepalive lets every host step ask for.
//
// Remove the keepalive's RecordHeartbeat (activities/host/keepalive.go)
// to see the first half fail.
func TestKeepaliveHoldsAQuietStepAndAKilledOneIsRetried(t *testing.T) {
	if addr := os.Getenv(crashingWorkerEnv); addr != "" {
		c, err := client.Dial(client.Options{HostPort: addr, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			t.Fatal(err)
		}
		startQuietWorker(t, c, "crashing", true)
		select {} // until killed
	}
	ctx := t.Context()
	tmp := devstack.StartTestTemporal(t)
	c, err := client.Dial(client.Options{HostPort: tmp.Address(), Namespace: tmp.Namespace(),
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	run := func(id string, in quietStepInput) (client.WorkflowRun, error) {
		return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "kept"}, quietStepWorkflow, in)
	}
	startQuietWorker(t, c, "kept", true)
	startQuietWorker(t, c, "unkept", false)

	// Kept alive: 8 s of work under a 1 s heartbeat timeout, one attempt.
	wr, err := run("kept", quietStepInput{Queue: "kept", Heartbeat: time.Second, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // several beats after the step's own, well before its end
	d, err := c.DescribeWorkflowExecution(ctx, wr.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.PendingActivities) != 1 {
		t.Fatalf("pending activities %v; want the step", d.PendingActivities)
	}
	var details string
	if pa := d.PendingActivities[0]; pa.HeartbeatDetails == nil {
		t.Fatalf("the step's heartbeat details are gone: %v", pa)
	} else if err := converter.GetDefaultDataConverter().FromPayloads(pa.HeartbeatDetails, &details); err != nil || details != "step 1" {
		t.Fatalf("the step's heartbeat details: %q (%v); want the step's own %q", details, err, "step 1")
	}
	var attempt int32
	if err := wr.Get(ctx, &attempt); err != nil || attempt != 1 {
		t.Fatalf("the kept-alive step: attempt %d, %v; want done at its first attempt", attempt, err)
	}

	// Not kept alive: the same step fails on its heartbeat timeout.
	wr, err = run("unkept", quietStepInput{Queue: "unkept", Heartbeat: time.Second, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = wr.Get(ctx, &attempt)
	var te *temporal.TimeoutError
	if !errors.As(err, &te) || te.TimeoutType() != enumspb.TIMEOUT_TYPE_HEARTBEAT {
		t.Fatalf("the step without a keepalive: %v; want a heartbeat timeout", err)
	}

	// Killed mid-step: the worker process dies with the step; the retry
	// runs here once the heartbeat timeout has passed.
	worker := exec.Command(os.Args[0], "-test.run=^TestKeepaliveHoldsAQuietStepAndAKilledOneIsRetried$")
	worker.Env = append(os.Environ(), crashingWorkerEnv+"="+tmp.Address())
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Process.Kill(); _ = worker.Wait() })
	wr, err = run("killed", quietStepInput{Queue: "crashing", Heartbeat: 2 * time.Second, Attempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		d, err := c.DescribeWorkflowExecution(ctx, wr.GetID(), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(d.PendingActivities) == 1 && d.PendingActivities[0].State == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker process never took the step")
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = worker.Process.Kill()
	_ = worker.Wait()
	startQuietWorker(t, c, "crashing", true)
	if err := wr.Get(ctx, &attempt); err != nil || attempt != 2 {
		t.Fatalf("the step after its worker was killed: attempt %d, %v; want done at its second attempt", attempt, err)
	}
	it := c.GetWorkflowHistory(ctx, wr.GetID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			if a.Attempt != 2 {
				t.Fatalf("the step's attempt %d started after its retry", a.Attempt)
			}
			if f := a.GetLastFailure().GetTimeoutFailureInfo(); f == nil || f.TimeoutType != enumspb.TIMEOUT_TYPE_HEARTBEAT {
				t.Fatalf("the first attempt ended with %v; want its heartbeat timeout", a.GetLastFailure())
			}
		}
	}
}
