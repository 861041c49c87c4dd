package workflows

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	controlacts "github.com/zonewright/zonewright/activities/control"
	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// fakeClaimNodes plays a claim's row and its datasets on nodes a and b
// (and the relay between them) through a move, each host step idempotent
// as zfs makes it, so what a move leaves behind is visible.
type fakeClaimNodes struct {
	mu       sync.Mutex
	plan     *faultPlan
	st       controlapi.ClaimState
	datasets map[string]bool // node:dataset[@snapshot]
	relay    map[string]bool // transfer streams held
	problems []string
}

const claimUID = "u1"

func (f *fakeClaimNodes) state() controlapi.ClaimState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	if st.Move != nil {
		m := *st.Move
		st.Move = &m
	}
	return st
}

// host runs a host step's effect on the node the activity runs on.
func (f *fakeClaimNodes) host(ctx context.Context, name string, effect func(node string) error) error {
	return f.plan.do(ctx, name, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		return effect(nodeOf(ctx))
	})
}

func (f *fakeClaimNodes) ctl(ctx context.Context, name string, effect func()) error {
	return f.plan.do(ctx, name, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		effect()
		return nil
	})
}

func (f *fakeClaimNodes) leftovers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for ds, ok := range f.datasets {
		if ok && ds != "b:"+claimUID {
			out = append(out, "left "+ds)
		}
	}
	if !f.datasets["b:"+claimUID] {
		out = append(out, "the claim's dataset is not on its new node b")
	}
	if f.st.Node != "b" || f.st.Move != nil {
		out = append(out, fmt.Sprintf("the claim is on %q with move %+v", f.st.Node, f.st.Move))
	}
	sort.Strings(out)
	return append(out, f.problems...)
}

func runFaultyClaimMove(t *testing.T, at *stepRef, kind faultKind) (*faultPlan, []string) {
	t.Helper()
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(20 * time.Second)
	env.RegisterActivity(&controlacts.Control{})
	env.RegisterActivity(&hostacts.Activities{})
	// Every host step of a move retries until done (undoOptions).
	plan := newFaultPlan([]string{"SnapshotClaimVolume", "SendClaimVolume", "ReceiveClaimVolume", "DestroyClaimVolume",
		"DestroyClaimSnapshot"}, env.Now)
	if at != nil {
		plan.inject(*at, kind)
	}
	f := &fakeClaimNodes{plan: plan, datasets: map[string]bool{"a:" + claimUID: true}, relay: map[string]bool{},
		st: controlapi.ClaimState{Found: true, Node: "a", OnSource: 1,
			Volume: hostapi.ClaimVolume{Name: "db", UID: claimUID, Bytes: 1 << 30}, CapacityBytes: 1 << 30,
			Move: &model.ClaimMove{Phase: model.MovePlanning, From: "a"}}}
	on := func(fn, ret any) { env.OnActivity(fn, mock.Anything, mock.Anything).Return(ret) }
	on(ctl.LoadClaim, func(ctx context.Context, _ controlapi.ClaimRef) (controlapi.ClaimState, error) {
		err := plan.do(ctx, "LoadClaim", func() error { return nil })
		return f.state(), err
	})
	on(ctl.PlanClaimMove, func(ctx context.Context, _ controlapi.ClaimTarget) (controlapi.ClaimMovePlan, error) {
		var m model.ClaimMove
		err := f.ctl(ctx, "PlanClaimMove", func() {
			if f.st.Move.Phase == model.MovePlanning {
				f.st.Move = &model.ClaimMove{Phase: model.MoveCopying, From: "a", To: "b", ID: "x"}
			}
			m = *f.st.Move
		})
		return controlapi.ClaimMovePlan{Move: &m}, err
	})
	on(host.SnapshotClaimVolume, func(ctx context.Context, s hostapi.ClaimSnapshot) error {
		return f.host(ctx, "SnapshotClaimVolume", func(node string) error {
			if !f.datasets[node+":"+s.ClaimUID] {
				return temporal.NewNonRetryableApplicationError("no dataset to snapshot on "+node, "Invalid", nil)
			}
			f.datasets[node+":"+s.ClaimUID+"@"+s.UID] = true
			return nil
		})
	})
	on(ctl.ClaimTransfer, func(ctx context.Context, in controlapi.ClaimTransferInput) (controlapi.ClaimTransferTickets, error) {
		id := controlops.TransferID(claimUID, in.Move.MoveID, in.Step)
		err := f.ctl(ctx, "ClaimTransfer", func() {})
		return controlapi.ClaimTransferTickets{Upload: transferTicket(id), Download: transferTicket(id)}, err
	})
	on(host.SendClaimVolume, func(ctx context.Context, x hostapi.ClaimTransfer) (hostapi.ClaimTransferResult, error) {
		return hostapi.ClaimTransferResult{Bytes: 1}, f.host(ctx, "SendClaimVolume", func(node string) error {
			if !f.datasets[node+":"+x.Claim.UID+"@"+x.Snapshot] {
				return temporal.NewNonRetryableApplicationError("no snapshot "+x.Snapshot+" to send on "+node, "Invalid", nil)
			}
			f.relay[x.Ticket.ID] = true
			return nil
		})
	})
	on(host.ReceiveClaimVolume, func(ctx context.Context, x hostapi.ClaimTransfer) (hostapi.ClaimTransferResult, error) {
		return hostapi.ClaimTransferResult{Bytes: 1}, f.host(ctx, "ReceiveClaimVolume", func(node string) error {
			ds := node + ":" + x.Claim.UID
			if f.datasets[ds+"@"+x.Snapshot] {
				return nil // received already
			}
			if !f.relay[x.Ticket.ID] {
				return temporal.NewApplicationError("the relay holds no stream "+x.Ticket.ID, "Transient")
			}
			if x.From != "" && !f.datasets[ds+"@"+x.From] {
				return temporal.NewNonRetryableApplicationError("incremental stream without its base "+x.From, "Invalid", nil)
			}
			f.datasets[ds], f.datasets[ds+"@"+x.Snapshot] = true, true
			return nil
		})
	})
	on(ctl.MoveClaimPods, func(ctx context.Context, _ controlapi.ClaimMoveInput) (int, error) {
		err := f.ctl(ctx, "MoveClaimPods", func() {
			if f.st.Move.Phase == model.MoveCopying {
				f.st.Move.Phase = model.MoveSwitching
				// The pod is unbound a while later, which wakes the claim.
				env.RegisterDelayedCallback(func() {
					f.mu.Lock()
					f.st.OnSource = 0
					f.mu.Unlock()
					env.SignalWorkflow(SignalVolumeSync, nil)
				}, 5*time.Second)
			}
		})
		return 1, err
	})
	on(ctl.SwitchClaimNode, func(ctx context.Context, _ controlapi.ClaimMoveInput) error {
		return f.ctl(ctx, "SwitchClaimNode", func() {
			if !f.datasets["b:"+claimUID+"@"+model.MoveSnapshot("x", 2)] {
				f.problems = append(f.problems, "switched to b before it received the last increment")
			}
			f.st.Node = "b"
			if f.st.Move != nil {
				f.st.Move.Phase = model.MoveCleaning
			}
		})
	})
	on(host.DestroyClaimVolume, func(ctx context.Context, c hostapi.ClaimVolume) error {
		return f.host(ctx, "DestroyClaimVolume", func(node string) error {
			if node == f.st.Node {
				f.problems = append(f.problems, "destroyed the claim's dataset on its own node "+node)
			}
			for ds := range f.datasets {
				if ds == node+":"+c.UID || strings.HasPrefix(ds, node+":"+c.UID+"@") {
					delete(f.datasets, ds)
				}
			}
			return nil
		})
	})
	on(host.DestroyClaimSnapshot, func(ctx context.Context, s hostapi.ClaimSnapshot) error {
		return f.host(ctx, "DestroyClaimSnapshot", func(node string) error {
			delete(f.datasets, node+":"+s.ClaimUID+"@"+s.UID)
			return nil
		})
	})
	on(ctl.EndClaimMove, func(ctx context.Context, _ controlapi.ClaimMoveInput) error {
		return f.ctl(ctx, "EndClaimMove", func() { f.st.Move = nil })
	})
	env.ExecuteWorkflow(ClaimSync, ClaimInput{Claim: controlapi.ClaimRef{Namespace: "default", Name: "db"}})
	var problems []string
	if !env.IsWorkflowCompleted() {
		problems = append(problems, "the move did not end")
	} else if err := env.GetWorkflowError(); err != nil {
		problems = append(problems, "the claim's workflow failed: "+err.Error())
	}
	return plan, append(problems, f.leftovers()...)
}

func TestFailureAtEveryStepOfAClaimMove(t *testing.T) {
	clean, problems := runFaultyClaimMove(t, nil, "")
	if len(problems) > 0 {
		t.Fatalf("the move without faults: %s", strings.Join(problems, "\n"))
	}
	for _, at := range slices.Clone(clean.steps) {
		for _, kind := range kindsFor(at, clean.undo[at.Activity]) {
			t.Run(at.String()+"/"+string(kind), func(t *testing.T) {
				t.Parallel()
				_, problems := runFaultyClaimMove(t, &at, kind)
				judge(t, problems)
			})
		}
	}
}
