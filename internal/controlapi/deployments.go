package controlapi

import (
	"time"
)

// DeploymentRef names a deployment; its workflow is keyed by it.
type DeploymentRef struct {
	Namespace string
	Name      string
}

func (r DeploymentRef) String() string { return r.Namespace + "/" + r.Name }

// DeploymentSyncResult is what a deployment's workflow needs to know
// after one sync.
type DeploymentSyncResult struct {
	// Gone: the deployment and every pod of it are gone; the workflow ends.
	Gone bool `json:",omitempty"`
	// WakeAfter: sync again this long from now even if nothing changes (a
	// pod becomes available, a deadline passes); zero: only on a change.
	WakeAfter time.Duration `json:",omitempty"`
}
