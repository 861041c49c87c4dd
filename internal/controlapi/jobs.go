package controlapi

import (
	"time"
)

// JobRef names a job; its workflow is keyed by it.
type JobRef struct {
	Namespace string
	Name      string
}

// JobSyncResult is what a job's workflow needs to know after one sync.
type JobSyncResult struct {
	// Gone: the job and its pods are gone; the workflow ends.
	Gone bool `json:",omitempty"`
	// WakeAfter: sync again this long from now even if nothing changes
	// (the active deadline, the TTL after finishing); zero: on a change.
	WakeAfter time.Duration `json:",omitempty"`
}
