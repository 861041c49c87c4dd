package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/activities"
)

// ReconcileHostsScheduleID is the Temporal Schedule that runs ReconcileHosts.
const ReconcileHostsScheduleID = "zonewright-reconcile-hosts"

// ReconcileHostsWorkflowName is the name ReconcileHosts is registered under.
const ReconcileHostsWorkflowName = "ReconcileHosts"

// Defaults of ReconcileHostsInput.
const (
	DefaultOrphanGrace      = 2 * time.Minute
	DefaultInventoryTimeout = 10 * time.Second
)

// ReconcileHostsInput tunes one reconciliation.
type ReconcileHostsInput struct {
	// OrphanGrace is how long a zonewright resource with no pod must have
	// been seen before it is removed; zero means DefaultOrphanGrace.
	OrphanGrace time.Duration
	// InventoryTimeout bounds how long a node's inventory may wait to be
	// picked up and to run; a node that does not answer in time is skipped
	// (node health deals with it). Zero means DefaultInventoryTimeout.
	InventoryTimeout time.Duration
}

// ReconcileHostsResult is the drift found, node by node, for logs now and
// metrics later.
type ReconcileHostsResult struct {
	Nodes          []activities.ReconcileHostResult
	Skipped        []string // nodes whose inventory could not be read
	Orphans        int
	OrphansRemoved int
	RemoveFailed   int
	ZoneMissing    int
	ZoneNotRunning int
}

// ReconcileHosts compares, for every Ready node in parallel, what the host
// reports (Host.Inventory on node/<name>) with what PostgreSQL says
// (Control.ReconcileHost): drifted pods get events and their lifecycle,
// orphans past their grace period are removed (Host.RemoveOrphan) and
// reported (Control.OrphanRemoved).
func ReconcileHosts(ctx workflow.Context, in ReconcileHostsInput) (ReconcileHostsResult, error) {
	if in.OrphanGrace <= 0 {
		in.OrphanGrace = DefaultOrphanGrace
	}
	if in.InventoryTimeout <= 0 {
		in.InventoryTimeout = DefaultInventoryTimeout
	}
	log := workflow.GetLogger(ctx)
	control := workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	}
	var nodes []string
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, control), ctl.ReadyNodes).Get(ctx, &nodes); err != nil {
		return ReconcileHostsResult{}, err
	}

	results := make([]*activities.ReconcileHostResult, len(nodes))
	removed := make([]int, len(nodes))
	failed := make([]int, len(nodes))
	wg := workflow.NewWaitGroup(ctx)
	for i, node := range nodes {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			cctx := workflow.WithActivityOptions(ctx, control)
			ictx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
				TaskQueue:              NodeTaskQueue(node),
				ScheduleToStartTimeout: in.InventoryTimeout,
				StartToCloseTimeout:    in.InventoryTimeout,
				RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
			})
			var inv activities.HostInventory
			if err := workflow.ExecuteActivity(ictx, host.Inventory).Get(ctx, &inv); err != nil {
				log.Warn("node skipped: its inventory could not be read", "node", node, "error", err)
				return
			}
			var res activities.ReconcileHostResult
			err := workflow.ExecuteActivity(cctx, ctl.ReconcileHost, activities.ReconcileHostInput{
				Node: node, Inventory: inv, OrphanGrace: in.OrphanGrace}).Get(ctx, &res)
			if err != nil {
				log.Warn("node skipped: its inventory could not be compared", "node", node, "error", err)
				return
			}
			results[i] = &res
			rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
				TaskQueue:              NodeTaskQueue(node),
				ScheduleToStartTimeout: in.InventoryTimeout,
				StartToCloseTimeout:    5 * time.Minute,
				HeartbeatTimeout:       time.Minute,
				RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 3},
			})
			for _, o := range res.Remove {
				if err := workflow.ExecuteActivity(rctx, host.RemoveOrphan, o).Get(ctx, nil); err != nil {
					log.Warn("orphan not removed; the next reconciliation tries again", "node", node, "orphan", o.String(), "error", err)
					failed[i]++
					continue
				}
				removed[i]++
				if err := workflow.ExecuteActivity(cctx, ctl.OrphanRemoved, activities.OrphanRemovedInput{Node: node, Orphan: o}).Get(ctx, nil); err != nil {
					log.Warn("orphan removed but not recorded", "node", node, "orphan", o.String(), "error", err)
				}
			}
		})
	}
	wg.Wait(ctx)

	var out ReconcileHostsResult
	for i, r := range results {
		if r == nil {
			out.Skipped = append(out.Skipped, nodes[i])
			continue
		}
		r.Remove = nil // said by the counts; keeps the result small
		out.Nodes = append(out.Nodes, *r)
		out.Orphans += r.Orphans
		out.ZoneMissing += r.ZoneMissing
		out.ZoneNotRunning += r.ZoneNotRunning
		out.OrphansRemoved += removed[i]
		out.RemoveFailed += failed[i]
	}
	log.Info("hosts reconciled", "nodes", len(nodes), "skipped", len(out.Skipped), "orphans", out.Orphans,
		"orphansRemoved", out.OrphansRemoved, "removeFailed", out.RemoveFailed,
		"zoneMissing", out.ZoneMissing, "zoneNotRunning", out.ZoneNotRunning)
	return out, nil
}
