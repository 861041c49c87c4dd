package workflows

// NodeTaskQueue is the task queue of one node: only that node's agent polls
// it, so host activities sent there run on that host.
func NodeTaskQueue(node string) string { return "node/" + node }
