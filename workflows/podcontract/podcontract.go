// Package podcontract is the pod lifecycle workflow's contract: its name
// and ID, the signals, updates and query it answers with their payloads,
// and the reasons it and its senders write into a pod's status. The API,
// the control plane's libraries, the reconciler and operators (temporal
// workflow signal --name finalize) use these; the workflow in package
// workflows implements them. Types only: it imports nothing of either side.
package podcontract

import (
	"errors"
	"strings"
)

// The lifecycle's workflow type, signals, updates and query.
const (
	WorkflowName = "PodLifecycle"
	// SignalTerminate asks for a graceful termination (TerminateSignal).
	SignalTerminate = "terminate"
	// SignalFinalize ends a grace period that has begun; on a pod that is
	// not terminating it changes nothing (an event says so).
	SignalFinalize = "finalize"
	// SignalCancel aborts a provision and rolls it back (CancelSignal).
	SignalCancel = "cancel"
	// SignalEvict tells the pod to leave its node (NodeHealth on a lost
	// node, the API's drain); its argument is an EvictSignal.
	SignalEvict = "evict"
	// SignalReport carries a node's model.PodReport: what the supervisor
	// on the pod's node saw change.
	SignalReport = "report"
	// SignalNode tells the pod its node's readiness (NodeSignal).
	SignalNode = "node"
	// SignalWake makes a waiting pod look again now (an image pull ended,
	// an address was released on its node, room was made).
	SignalWake  = "wake"
	QueryStatus = "status"
	// The updates answer instead of "sent": they validate first, so a
	// finalize on a pod that is not terminating is refused.
	UpdateTerminate = "terminate"
	UpdateFinalize  = "finalize"
	UpdateCancel    = "cancel"
)

// WorkflowID is the stable, readable ID of a pod's lifecycle.
func WorkflowID(namespace, name string) string { return "pod/" + namespace + "/" + name }

// ParseWorkflowID is WorkflowID backwards; ok is false for another
// workflow's ID.
func ParseWorkflowID(id string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(id, "pod/")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, "/")
	return namespace, name, ok && namespace != "" && name != "" && !strings.Contains(name, "/")
}

// ErrNoLifecycle: the pod has no running workflow to signal.
var ErrNoLifecycle = errors.New("the pod's lifecycle workflow is not running")

// TerminateSignal asks for a graceful termination (sent by DELETE).
type TerminateSignal struct {
	// GracePeriodSeconds overrides the pod's terminationGracePeriodSeconds;
	// 0 is a forced delete.
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`
}

// CancelSignal aborts an in-flight provision and rolls it back.
type CancelSignal struct {
	Reason string `json:"reason,omitempty"`
}

// NodeSignal tells a pod whether its node is Ready.
type NodeSignal struct {
	Node  string
	Ready bool
}

// EvictSignal tells a pod lifecycle to leave Node: Lost nodes get no more
// work (their leftovers are the agent's to clean when it returns); live
// ones (drain) stop the pod gracefully first. Reason is what a pod that
// does not restart ends Failed with.
type EvictSignal struct {
	Node   string
	Lost   bool
	Reason string
	// Message says why, when there is more to say than the reason.
	Message string `json:",omitempty"`
}

// Reasons a pod ends Failed with when it is evicted (EvictSignal.Reason).
const (
	ReasonNodeLost = "NodeLost"
	ReasonEvicted  = "Evicted"
)

// Pod reasons while the pod waits.
const (
	// ReasonUnschedulable: no node fits the pod.
	ReasonUnschedulable = "Unschedulable"
	// ReasonIPExhausted: its node's pod CIDR has no address left.
	ReasonIPExhausted      = "IPExhausted"
	ReasonImagePulling     = "ImagePulling"
	ReasonImagePullBackOff = "ImagePullBackOff"
	// ReasonErrImagePull: a pull of the pod's image was first seen failing.
	ReasonErrImagePull = "ErrImagePull"
	// ReasonErrImageNeverPull: the node lacks the image and the pod's
	// imagePullPolicy is Never.
	ReasonErrImageNeverPull = "ErrImageNeverPull"
)
