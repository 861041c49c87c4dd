package hostapi

import (
	"encoding/json"
	"time"
)

// ProvisionInput is a pod to build on its node and then hand to the
// node's supervisor.
type ProvisionInput struct {
	Sandbox PodSandbox
	Probes  []ContainerProbes
	// Timed asks for the steps' times in the result (ProvisionResult.Steps).
	Timed bool `json:",omitempty"`
}

// ProvisionResult is a provision's outcome: the Seq from which the
// supervisor's reports describe the pod and, when asked for
// (ProvisionInput.Timed), how long each step took on the node (retries
// included, the hand-over to the supervisor as step "Supervise").
type ProvisionResult struct {
	Seq   uint64
	Steps []StepTime `json:",omitempty"`
}

// StepTime is how long one step of a provision took on the node.
type StepTime struct {
	Step     string
	Duration time.Duration
}

// MarshalJSON writes a result without step times as the bare Seq, the
// result's form before the times existed: a lifecycle that did not ask
// for them reads it.
func (r ProvisionResult) MarshalJSON() ([]byte, error) {
	if r.Steps == nil {
		return json.Marshal(r.Seq)
	}
	type plain ProvisionResult
	return json.Marshal(plain(r))
}

// UnmarshalJSON reads either form: the bare Seq (an agent from before, a
// recorded history) or the object.
func (r *ProvisionResult) UnmarshalJSON(b []byte) error {
	var seq uint64
	if json.Unmarshal(b, &seq) == nil {
		*r = ProvisionResult{Seq: seq}
		return nil
	}
	type plain ProvisionResult
	return json.Unmarshal(b, (*plain)(r))
}

// ProvisionProgress is how far a provision got: what it reports while it
// runs and what its failure carries, so that the steps begun (the failed
// one included) are undone and no others.
type ProvisionProgress struct {
	Begun int
	Step  string
}

// ProvisionTimeout bounds a whole provision on its node: the sum of its
// steps' own bounds (hostops.ProvisionSteps, whose test holds them equal).
const ProvisionTimeout = 49 * time.Minute
