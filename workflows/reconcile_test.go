package workflows

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/zonewright/zonewright/activities"
)

// ReconcileHosts reads every Ready node's inventory on that node's task
// queue, skips a node that does not answer, removes the orphans the
// comparison says are past their grace period on their node, reports each
// removal, and sums the drift.
func TestReconcileHostsSkipsSilentNodesAndRemovesOrphansPastGrace(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute)
	env.RegisterActivity(&activities.Control{})
	env.RegisterActivity(&activities.Host{})

	orphan := activities.Orphan{Key: "zone/default-ghost-0123456789ab", Zone: "default-ghost-0123456789ab"}
	var mu sync.Mutex
	var removedOn, reported []string
	var grace time.Duration

	env.OnActivity(ctl.ReadyNodes, mock.Anything).Return([]string{"n1", "n2"}, nil)
	env.OnActivity(host.Inventory, mock.Anything).Return(func(ctx context.Context) (activities.HostInventory, error) {
		switch q := activity.GetInfo(ctx).TaskQueue; q {
		case NodeTaskQueue("n1"):
			return activities.HostInventory{Node: "n1"}, nil
		default:
			return activities.HostInventory{}, errors.New("no poller on " + q)
		}
	})
	env.OnActivity(ctl.ReconcileHost, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.ReconcileHostInput) (activities.ReconcileHostResult, error) {
		mu.Lock()
		grace = in.OrphanGrace
		mu.Unlock()
		return activities.ReconcileHostResult{Node: in.Node, Orphans: 2, ZoneMissing: 1, Remove: []activities.Orphan{orphan}}, nil
	})
	env.OnActivity(host.RemoveOrphan, mock.Anything, mock.Anything).Return(func(ctx context.Context, o activities.Orphan) error {
		mu.Lock()
		defer mu.Unlock()
		removedOn = append(removedOn, activity.GetInfo(ctx).TaskQueue+" "+o.Key)
		return nil
	})
	env.OnActivity(ctl.OrphanRemoved, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.OrphanRemovedInput) error {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, in.Node+" "+in.Orphan.Key)
		return nil
	})

	env.ExecuteWorkflow(ReconcileHosts, ReconcileHostsInput{})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var res ReconcileHostsResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Skipped, []string{"n2"}) || len(res.Nodes) != 1 || res.Nodes[0].Node != "n1" ||
		res.Orphans != 2 || res.OrphansRemoved != 1 || res.RemoveFailed != 0 || res.ZoneMissing != 1 {
		t.Errorf("result %+v", res)
	}
	if !slices.Equal(removedOn, []string{"node/n1 " + orphan.Key}) || !slices.Equal(reported, []string{"n1 " + orphan.Key}) {
		t.Errorf("removed %q, reported %q", removedOn, reported)
	}
	if grace != DefaultOrphanGrace {
		t.Errorf("grace %s, want the default %s", grace, DefaultOrphanGrace)
	}
}
