package workflows

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	controlacts "github.com/zonewright/zonewright/activities/control"
	"github.com/zonewright/zonewright/internal/controlapi"
)

// syncs plays SyncDeployment: each call answers the next result and
// records when it ran.
type syncs struct {
	env     *testsuite.TestWorkflowEnvironment
	start   time.Time
	results []controlapi.DeploymentSyncResult
	ran     []time.Duration
}

func newDeploymentEnv(t *testing.T, results ...controlapi.DeploymentSyncResult) (*testsuite.TestWorkflowEnvironment, *syncs) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	env.RegisterActivity(&controlacts.Control{})
	s := &syncs{env: env, start: env.Now(), results: results}
	env.OnActivity(ctl.SyncDeployment, mock.Anything, mock.Anything).Return(func(context.Context, controlapi.DeploymentRef) (controlapi.DeploymentSyncResult, error) {
		s.ran = append(s.ran, env.Now().Sub(s.start))
		if len(s.ran) > len(s.results) {
			return controlapi.DeploymentSyncResult{}, nil
		}
		return s.results[len(s.ran)-1], nil
	})
	return env, s
}

var webRef = controlapi.DeploymentRef{Namespace: "default", Name: "web"}

// Between changes the workflow only waits: it syncs once at its start and
// once per change signal, and again when a sync asked for a timer; it ends
// when a sync finds the deployment gone.
func TestDeploymentSyncsOnSignalsAndTimersOnly(t *testing.T) {
	env, s := newDeploymentEnv(t,
		controlapi.DeploymentSyncResult{},                            // at start
		controlapi.DeploymentSyncResult{WakeAfter: 30 * time.Second}, // the signal at 1 h: a pod becomes available in 30 s
		controlapi.DeploymentSyncResult{},                            // the timer
		controlapi.DeploymentSyncResult{Gone: true},                  // the signal at 3 h
	)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalDeploymentChanged, nil) }, time.Hour)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalDeploymentChanged, nil) }, 3*time.Hour)
	env.ExecuteWorkflow(Deployment, DeploymentInput{Deployment: webRef})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{0, time.Hour, time.Hour + 30*time.Second, 3 * time.Hour}
	if len(s.ran) != len(want) {
		t.Fatalf("synced at %v; want %v", s.ran, want)
	}
	for i := range want {
		if s.ran[i].Round(time.Second) != want[i] {
			t.Fatalf("synced at %v; want %v", s.ran, want)
		}
	}
}

// A burst of signals costs a sync or two (signals that came while a sync
// ran take one more), not one per signal; a cancel request ends the
// workflow.
func TestDeploymentTakesABurstOfChangesTogether(t *testing.T) {
	env, s := newDeploymentEnv(t)
	env.RegisterDelayedCallback(func() {
		for range 10 {
			env.SignalWorkflow(SignalDeploymentChanged, nil)
		}
	}, time.Minute)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Hour)
	env.ExecuteWorkflow(Deployment, DeploymentInput{Deployment: webRef})
	if !env.IsWorkflowCompleted() || !errors.Is(env.GetWorkflowError(), workflow.ErrCanceled) && env.GetWorkflowError() == nil {
		t.Fatalf("a cancel request: completed %t, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	if len(s.ran) < 2 || len(s.ran) > 3 {
		t.Fatalf("%d syncs for a start and a burst of 10 signals; want 2 or 3", len(s.ran))
	}
}

// Past its history limit the workflow continues as new with its input.
func TestDeploymentContinuesAsNew(t *testing.T) {
	// Every sync asks to look again in a minute.
	var results []controlapi.DeploymentSyncResult
	for range 40 {
		results = append(results, controlapi.DeploymentSyncResult{WakeAfter: time.Minute})
	}
	env, s := newDeploymentEnv(t, results...)
	env.ExecuteWorkflow(Deployment, DeploymentInput{Deployment: webRef, HistoryLimit: 50})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v after syncs at %v", err, s.ran)
	}
	var in DeploymentInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
		t.Fatal(err)
	}
	if in.Deployment != webRef || in.HistoryLimit != 50 {
		t.Fatalf("continued with %+v; want the same deployment and limit", in)
	}
}
