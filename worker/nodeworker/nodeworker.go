// Package nodeworker wires the Temporal worker an agent runs for its node:
// it polls the node's task queue and runs the host activities there.
package nodeworker

import (
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// DefaultMaxConcurrentActivities bounds the host activities a node runs
// at once unless Options says otherwise.
const DefaultMaxConcurrentActivities = 64

// Options size a node worker.
type Options struct {
	// MaxConcurrentActivities bounds the host activities running at once
	// (probes included); zero means DefaultMaxConcurrentActivities. Zone installs are bounded further
	// by the Host's own semaphore.
	MaxConcurrentActivities int
	// StopTimeout is how long Stop waits for running activities; zero
	// means 30s. Activities still running then see their context cancelled.
	StopTimeout time.Duration
}

// New builds the worker of one node: it polls node/<name> and runs the
// host activities over h (every exported method of hostacts.Activities,
// registered by name).
func New(c client.Client, h *hostops.Host, o Options) worker.Worker {
	if o.MaxConcurrentActivities <= 0 {
		o.MaxConcurrentActivities = DefaultMaxConcurrentActivities
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 30 * time.Second
	}
	w := worker.New(c, taskqueue.Node(h.Node), worker.Options{
		MaxConcurrentActivityExecutionSize: o.MaxConcurrentActivities,
		MaxConcurrentActivityTaskPollers:   4,
		WorkerStopTimeout:                  o.StopTimeout,
		// The node's task queue carries host activities only.
		DisableWorkflowWorker: true,
		// Every host step is heartbeaten while it runs (see hostacts.Keepalive).
		Interceptors: []interceptor.WorkerInterceptor{hostacts.Keepalive(hostacts.KeepaliveEvery)},
	})
	w.RegisterActivity(&hostacts.Activities{Ops: h})
	return w
}
