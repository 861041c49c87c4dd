package worker

import (
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/workflows"
)

// NodeOptions size a node worker.
type NodeOptions struct {
	// MaxConcurrentActivities bounds the host activities running at once
	// (probes included); zero means 64. Zone installs are bounded further
	// by the Host's own semaphore.
	MaxConcurrentActivities int
	// StopTimeout is how long Stop waits for running activities; zero
	// means 30s. Activities still running then see their context cancelled.
	StopTimeout time.Duration
}

// NewNode builds the worker of one node: it polls node/<name> and runs the
// host activities of h (every exported method, registered by name).
func NewNode(c client.Client, h *activities.Host, o NodeOptions) worker.Worker {
	if o.MaxConcurrentActivities <= 0 {
		o.MaxConcurrentActivities = 64
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 30 * time.Second
	}
	w := worker.New(c, workflows.NodeTaskQueue(h.Node), worker.Options{
		MaxConcurrentActivityExecutionSize: o.MaxConcurrentActivities,
		MaxConcurrentActivityTaskPollers:   4,
		WorkerStopTimeout:                  o.StopTimeout,
		// The node's task queue carries host activities only.
		DisableWorkflowWorker: true,
	})
	w.RegisterActivity(h)
	return w
}
