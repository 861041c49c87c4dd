package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	controlacts "github.com/zonewright/zonewright/activities/control"
	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/transfer"
)

// fakeMove plays a claim's row through a move, recording what ran where.
type fakeMove struct {
	mu    sync.Mutex
	st    controlapi.ClaimState
	calls []string
	// missed names the host step whose node does not take it up the
	// first time (ScheduleToStart); missedOnce: that happened.
	missed     string
	missedOnce bool
}

// notTakenUp: the step's node does not take it up this time.
func (f *fakeMove) notTakenUp(step string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if step != f.missed || f.missedOnce {
		return false
	}
	f.missedOnce = true
	return true
}

func (f *fakeMove) record(ctx context.Context, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	where := strings.TrimPrefix(activity.GetInfo(ctx).TaskQueue, "node/")
	f.calls = append(f.calls, where+": "+fmt.Sprintf(format, args...))
}

func (f *fakeMove) state() controlapi.ClaimState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	if st.Move != nil {
		m := *st.Move
		st.Move = &m
	}
	return st
}

func (f *fakeMove) phase(change func(st *controlapi.ClaimState)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.st)
}

// A move plans, pre-copies while the pod runs, tells it to leave, waits
// until it has left, sends the increment, switches and cleans up; a
// send whose agent died is simply run again.
func TestClaimMoveStepsInOrder(t *testing.T) { runClaimMove(t, "") }

// A move's node step that its node did not take up (ScheduleToStart,
// which Temporal never retries) is run again: the move ends as it would
// have, and the workflow does not fail.
func TestClaimMoveStepsNotTakenUpAreRunAgain(t *testing.T) {
	for _, step := range []string{"snapshot", "send", "receive", "destroy", "destroy @"} {
		t.Run(step, func(t *testing.T) { runClaimMove(t, step) })
	}
}

// runClaimMove plays a move through ClaimSync, the host step missed not
// taken up by its node the first time.
func runClaimMove(t *testing.T, missed string) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	env.RegisterActivity(&controlacts.Control{})
	env.RegisterActivity(&hostacts.Activities{})

	f := &fakeMove{st: controlapi.ClaimState{Found: true, Node: "a", OnSource: 1,
		Volume: hostapi.ClaimVolume{Name: "db", UID: "u1", Bytes: 1 << 30}, CapacityBytes: 1 << 30,
		Move: &model.ClaimMove{Phase: model.MovePlanning, From: "a"}}, missed: missed}
	env.OnActivity(ctl.LoadClaim, mock.Anything, mock.Anything).Return(func(context.Context, controlapi.ClaimRef) (controlapi.ClaimState, error) {
		return f.state(), nil
	})
	env.OnActivity(ctl.PlanClaimMove, mock.Anything, mock.Anything).Return(func(ctx context.Context, _ controlapi.ClaimTarget) (controlapi.ClaimMovePlan, error) {
		f.record(ctx, "plan")
		m := &model.ClaimMove{Phase: model.MoveCopying, From: "a", To: "b", ID: "x"}
		f.phase(func(st *controlapi.ClaimState) { st.Move = m })
		return controlapi.ClaimMovePlan{Move: m}, nil
	})
	env.OnActivity(host.SnapshotClaimVolume, mock.Anything, mock.Anything).Return(func(ctx context.Context, s hostapi.ClaimSnapshot) error {
		if f.notTakenUp("snapshot") {
			return notTakenUpError()
		}
		f.record(ctx, "snapshot %s", s.UID)
		return nil
	})
	env.OnActivity(ctl.ClaimTransfer, mock.Anything, mock.Anything).Return(func(_ context.Context, in controlapi.ClaimTransferInput) (controlapi.ClaimTransferTickets, error) {
		id := controlops.TransferID("u1", in.Move.MoveID, in.Step)
		return controlapi.ClaimTransferTickets{Upload: transferTicket(id), Download: transferTicket(id)}, nil
	})
	died := false
	env.OnActivity(host.SendClaimVolume, mock.Anything, mock.Anything).Return(func(ctx context.Context, x hostapi.ClaimTransfer) (hostapi.ClaimTransferResult, error) {
		if f.notTakenUp("send") {
			return hostapi.ClaimTransferResult{}, notTakenUpError()
		}
		if !died {
			died = true // the agent dies mid-send: the attempt fails
			return hostapi.ClaimTransferResult{}, errors.New("activity heartbeat timeout")
		}
		f.record(ctx, "send %s from %q through %s", x.Snapshot, x.From, x.Ticket.ID)
		return hostapi.ClaimTransferResult{Bytes: 1}, nil
	})
	env.OnActivity(host.ReceiveClaimVolume, mock.Anything, mock.Anything).Return(func(ctx context.Context, x hostapi.ClaimTransfer) (hostapi.ClaimTransferResult, error) {
		if f.notTakenUp("receive") {
			return hostapi.ClaimTransferResult{}, notTakenUpError()
		}
		f.record(ctx, "receive %s from %q through %s", x.Snapshot, x.From, x.Ticket.ID)
		return hostapi.ClaimTransferResult{Bytes: 1}, nil
	})
	env.OnActivity(ctl.MoveClaimPods, mock.Anything, mock.Anything).Return(func(ctx context.Context, _ controlapi.ClaimMoveInput) (int, error) {
		f.record(ctx, "pods told to leave")
		f.phase(func(st *controlapi.ClaimState) { st.Move.Phase = model.MoveSwitching })
		// The pod is unbound a while later, which wakes the claim.
		env.RegisterDelayedCallback(func() {
			f.phase(func(st *controlapi.ClaimState) { st.OnSource = 0 })
			env.SignalWorkflow(SignalVolumeSync, nil)
		}, 5*time.Second)
		return 1, nil
	})
	env.OnActivity(ctl.SwitchClaimNode, mock.Anything, mock.Anything).Return(func(ctx context.Context, _ controlapi.ClaimMoveInput) error {
		f.record(ctx, "switch")
		f.phase(func(st *controlapi.ClaimState) { st.Node, st.Move.Phase = "b", model.MoveCleaning })
		return nil
	})
	env.OnActivity(host.DestroyClaimVolume, mock.Anything, mock.Anything).Return(func(ctx context.Context, c hostapi.ClaimVolume) error {
		if f.notTakenUp("destroy") {
			return notTakenUpError()
		}
		f.record(ctx, "destroy %s", c.UID)
		return nil
	})
	env.OnActivity(host.DestroyClaimSnapshot, mock.Anything, mock.Anything).Return(func(ctx context.Context, s hostapi.ClaimSnapshot) error {
		if f.notTakenUp("destroy @") {
			return notTakenUpError()
		}
		f.record(ctx, "destroy @%s", s.UID)
		return nil
	})
	env.OnActivity(ctl.EndClaimMove, mock.Anything, mock.Anything).Return(func(ctx context.Context, _ controlapi.ClaimMoveInput) error {
		f.record(ctx, "end")
		f.phase(func(st *controlapi.ClaimState) { st.Move = nil })
		return nil
	})

	env.ExecuteWorkflow(ClaimSync, ClaimInput{Claim: controlapi.ClaimRef{Namespace: "default", Name: "db"}})
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow: completed %v, error %v", env.IsWorkflowCompleted(), env.GetWorkflowError())
	}
	want := []string{
		"zonewright-control: plan",
		"a: snapshot move-x-1",
		`a: send move-x-1 from "" through u1-move-x-1`,
		`b: receive move-x-1 from "" through u1-move-x-1`,
		"zonewright-control: pods told to leave",
		"a: snapshot move-x-2",
		`a: send move-x-2 from "move-x-1" through u1-move-x-2`,
		`b: receive move-x-2 from "move-x-1" through u1-move-x-2`,
		"zonewright-control: switch",
		"a: destroy u1",
		"b: destroy @move-x-1",
		"b: destroy @move-x-2",
		"zonewright-control: end",
	}
	got := f.calls
	if missed != "" {
		// The phase whose step was missed runs again from its start (its
		// steps are safe to run again): only the first run of each counts.
		var first []string
		for _, c := range got {
			if !slices.Contains(first, c) {
				first = append(first, c)
			}
		}
		got = first
	}
	if got := strings.Join(got, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func transferTicket(id string) transfer.Ticket {
	return transfer.Ticket{ID: id, URL: "http://cp/api/v1/volumetransfers/" + id}
}
