package controlapi

import (
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/model"
)

// PodRef names one pod incarnation: a pod deleted and created again under
// the same name has another UID, and activities of the old one leave it alone.
type PodRef struct {
	Namespace string
	Name      string
	UID       string
}

func (r PodRef) String() string { return r.Namespace + "/" + r.Name }

// PodSnapshot is what the lifecycle needs to know of the pod's row.
type PodSnapshot struct {
	Found    bool
	Spec     model.PodSpec
	Phase    string
	Reason   string
	Deleting bool
	// GracePeriodSeconds is the grace a pending deletion asked for.
	GracePeriodSeconds int64
	// ProcessLimits are what the pod's annotations ask of its zone.
	ProcessLimits model.ZoneProcessLimits `json:",omitempty"`
}

// ScheduleResult is the scheduler's decision: a node, or why none fits.
type ScheduleResult struct {
	Node    string
	Message string
	// Reason is why the pod waits when it is not the nodes' doing
	// (CapacityExceeded); empty: Unschedulable.
	Reason string `json:",omitempty"`
	// Claims are the pod's claims, bound to Node.
	Claims []hostapi.ClaimVolume `json:",omitempty"`
}

// AllocateInput asks for the pod's address on its node.
type AllocateInput struct {
	Pod  PodRef
	Node string
}

// AllocateResult is the pod's address, or why there is none.
type AllocateResult struct {
	IP        string
	PrefixLen int
	Gateway   string
	HostIP    string
	Exhausted string // non-empty: the node's pod CIDR is full
}

// StatusUpdate is one change to a pod's observed state, with the event
// that tells a person what happened.
type StatusUpdate struct {
	Pod     PodRef
	Phase   string // empty keeps the phase
	Reason  string
	Message string
	// Conditions replace those of the same type.
	Conditions        []model.PodCondition
	PodIP, HostIP     string
	ContainerStatuses []model.ContainerStatus
	StartTime         *time.Time
	// Event, when Reason is set, is recorded for the pod.
	EventType, EventReason, EventMessage string
	// EventOnly records the event and leaves the status as it is.
	EventOnly bool `json:",omitempty"`
	// Startup, on the update meant to make the pod Ready for the first
	// time, is measured when this write is the one that does.
	Startup *PodStartup `json:",omitempty"`
}

// PodName names a pod (any incarnation).
type PodName struct{ Namespace, Name string }
