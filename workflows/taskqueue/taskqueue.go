// Package taskqueue names zonewright's Temporal task queues: whoever
// starts work and the workers that poll for it share these names, and
// nothing else of each other.
package taskqueue

// Control is polled by the control plane: workflows and control-plane
// activities.
const Control = "zonewright-control"

// Node is the task queue of one node: only that node's agent polls it, so
// host activities sent there run on that host.
func Node(node string) string { return "node/" + node }
