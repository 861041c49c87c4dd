package model

// PodReport is what a node's supervisor tells a pod's lifecycle: the whole
// observed state of the pod on that node, sent only when it changed. A
// report is a level, not an edge: applying the same report twice changes
// nothing, and a report older than one already applied (lower Seq) is
// ignored, so a lost or repeated delivery is harmless.
type PodReport struct {
	UID  string `json:"uid"`
	Node string `json:"node"`
	// Seq orders the reports of one node; it grows across agent restarts
	// and a clock stepped back (the agent keeps it in its state
	// directory), and a retried report keeps its number.
	Seq uint64 `json:"seq"`
	// Zone is the zone's state (running, installed, …); "" when the zone
	// does not exist.
	Zone       string            `json:"zone"`
	Containers []ContainerReport `json:"containers,omitempty"`
}

// Container states a node reports.
const (
	ContainerStarting    = "starting"    // enabled, not online yet
	ContainerRunning     = "running"     // online
	ContainerExited      = "exited"      // the command ended; ExitCode says how
	ContainerMaintenance = "maintenance" // SMF stopped it for another reason
	ContainerMissing     = "missing"     // no service (or disabled)
)

// ContainerReport is one container as its node sees it.
type ContainerReport struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// ExitCode is set when State is exited.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Started: the startup probe succeeded (or there is none).
	Started bool `json:"started"`
	// Ready: the readiness probe succeeds (or there is none) and the
	// container runs.
	Ready bool `json:"ready"`
	// Unhealthy says why the liveness or startup probe crossed its failure
	// threshold; empty while healthy.
	Unhealthy string `json:"unhealthy,omitempty"`
}
