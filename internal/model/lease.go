package model

import "time"

// Lease is a node's liveness, in the shape of Kubernetes'
// coordination.k8s.io/v1 Lease: its agent renews it every heartbeat
// interval, and node health reads its renewTime. It is kept outside the
// change feed, so a heartbeat costs one small write and no watch event.
type Lease struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     LeaseSpec  `json:"spec"`
}

// LeaseSpec is the lease's holder and its renewal.
type LeaseSpec struct {
	HolderIdentity       string `json:"holderIdentity,omitempty"`
	LeaseDurationSeconds int32  `json:"leaseDurationSeconds,omitempty"`
	// AcquireTime and RenewTime are the control plane's clock at the
	// first and the latest renewal: a node's clock cannot make it look
	// alive (a renewTime sent by the node is ignored).
	AcquireTime      *time.Time `json:"acquireTime,omitempty"`
	RenewTime        *time.Time `json:"renewTime,omitempty"`
	LeaseTransitions int32      `json:"leaseTransitions,omitempty"`
}

// Lease API group and kind.
const (
	APIVersionCoordination = "coordination.k8s.io/v1"
	KindLease              = "Lease"
	// MaxLeaseDurationSeconds bounds a lease's duration (one hour).
	MaxLeaseDurationSeconds = 3600
	// AnnotationLeaseNodeVersion on a renewal is the resourceVersion of
	// the Node as its agent last saw it: the lease is renewed only while
	// the Node is still at that version (409 otherwise), so a heartbeat
	// is one request, and a Node changed meanwhile (declared lost,
	// deleted, relabelled) is read again before the lease is. On the
	// answer it is the Node's version at the renewal.
	AnnotationLeaseNodeVersion = "zonewright.io/node-resource-version"
)

// NodeVersion is the Node's resourceVersion a renewal's answer carries;
// "" from a control plane that does not check it.
func (l *Lease) NodeVersion() string { return l.Metadata.Annotations[AnnotationLeaseNodeVersion] }
