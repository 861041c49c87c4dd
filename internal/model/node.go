package model

import (
	"net/netip"
	"strings"
	"time"
)

// Node is an illumos host that runs pods as zones.
type Node struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     NodeSpec   `json:"spec"`
	Status   NodeStatus `json:"status"`
}

// NodeSpec is what operators and the agent declare about a node.
type NodeSpec struct {
	// PodCIDR is the range pod addresses on this node come from.
	PodCIDR       string  `json:"podCIDR,omitempty"`
	Unschedulable bool    `json:"unschedulable,omitempty"`
	Taints        []Taint `json:"taints,omitempty"`
}

// PodGateway is the address a node keeps for itself in its pod CIDR, the
// pods' default router: the first host address. IPAM never gives it to a
// pod; the node's agent holds it.
func PodGateway(cidr netip.Prefix) netip.Addr { return cidr.Masked().Addr().Next() }

// Taint repels pods that do not tolerate it.
type Taint struct {
	Key       string     `json:"key"`
	Value     string     `json:"value,omitempty"`
	Effect    string     `json:"effect"`
	TimeAdded *time.Time `json:"timeAdded,omitempty"`
}

// Taint effects.
const (
	TaintNoSchedule       = "NoSchedule"
	TaintPreferNoSchedule = "PreferNoSchedule"
	TaintNoExecute        = "NoExecute"
)

// NodeStatus is what the node's agent observed.
type NodeStatus struct {
	Capacity    ResourceList    `json:"capacity,omitempty"`
	Allocatable ResourceList    `json:"allocatable,omitempty"`
	Conditions  []NodeCondition `json:"conditions,omitempty"`
	Addresses   []NodeAddress   `json:"addresses,omitempty"`
	NodeInfo    NodeInfo        `json:"nodeInfo,omitempty"`
	// DaemonEndpoints are where the node's agent serves the control plane
	// (logs and exec), at the node's InternalIP address.
	DaemonEndpoints NodeDaemonEndpoints `json:"daemonEndpoints,omitzero"`
	// ServiceNetwork is the service network generation whose NAT rules
	// the node has in force; nil until it has applied one.
	ServiceNetwork *NodeServiceNetwork `json:"serviceNetwork,omitempty"`
}

// NodeServiceNetwork says which service network snapshot a node's NAT
// rules implement, so "has every node got it?" has an answer.
type NodeServiceNetwork struct {
	// Generation is the newest snapshot generation the host has applied:
	// every rule it took away is gone (read back), so no traffic it
	// removed still arrives; Missing counts its rules the host refused.
	Generation  int64      `json:"generation"`
	AppliedTime *time.Time `json:"appliedTime,omitempty"`
	// Rules counts zonewright's NAT rules for the newest snapshot the
	// node holds (its rdr rules and the hairpin map rule).
	Rules int `json:"rules"`
	// Missing counts the rules of the newest snapshot the host did not
	// take (ipnat refused them); Message says which, when there are some.
	Missing int    `json:"missing,omitempty"`
	Message string `json:"message,omitempty"`
}

// NodeCondition is one facet of a node's health.
type NodeCondition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastHeartbeatTime  *time.Time `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime *time.Time `json:"lastTransitionTime,omitempty"`
}

// NodeReady is the condition that gates scheduling.
const NodeReady = "Ready"

// Condition is the node's condition of type t, or nil.
func (n *Node) Condition(t string) *NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// Ready reports whether the node's Ready condition is True.
func (n *Node) Ready() bool {
	c := n.Condition(NodeReady)
	return c != nil && c.Status == ConditionTrue
}

// NodeAddress is one way to reach the node.
type NodeAddress struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// Node address types, as Kubernetes names them.
const (
	NodeHostName   = "Hostname"
	NodeInternalIP = "InternalIP"
)

// InternalIP is the node's InternalIP address, "" when it reports none.
func (n *Node) InternalIP() string {
	for _, a := range n.Status.Addresses {
		if a.Type == NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// NodeDaemonEndpoints are the ports the node's own daemons serve on
// (Kubernetes' daemonEndpoints, whose kubeletEndpoint is here the agent's).
type NodeDaemonEndpoints struct {
	AgentEndpoint DaemonEndpoint `json:"agentEndpoint,omitzero"`
}

// DaemonEndpoint is one port; 0: not served.
type DaemonEndpoint struct {
	Port int32 `json:"Port"`
}

// NodeInfo describes the host's software.
type NodeInfo struct {
	OSRelease    string   `json:"osRelease,omitempty"`
	KernelVer    string   `json:"kernelVersion,omitempty"`
	AgentVersion string   `json:"agentVersion,omitempty"`
	ZoneBrands   []string `json:"zoneBrands,omitempty"`
}

func (n *Node) GetTypeMeta() *TypeMeta    { return &n.TypeMeta }
func (n *Node) GetMeta() *ObjectMeta      { return &n.Metadata }
func (n *Node) Parts() (spec, status any) { return &n.Spec, &n.Status }

// What a node's agent owns on its Node besides status and the brand
// labels (LabelNodeBrandPrefix): the API takes these from the node's own
// status reports and keeps every other label and annotation.
const (
	LabelNodeHostname            = "zonewright.io/hostname"
	AnnotationNodeZones          = "zonewright.io/zones"                 // "running=3,installed=1"
	AnnotationNodeZonesAvailable = "zonewright.io/zones-available-bytes" // free space for zones
	// The pool holding the node's images: bytes used, and its size (used
	// plus available), as zfs reports them; image GC compares the two.
	AnnotationNodeImagePoolUsed = "zonewright.io/image-pool-used-bytes"
	AnnotationNodeImagePoolSize = "zonewright.io/image-pool-size-bytes"
)

// AgentOwnedLabel tells whether a label is the node agent's to set.
func AgentOwnedLabel(key string) bool {
	return key == LabelNodeHostname || strings.HasPrefix(key, LabelNodeBrandPrefix)
}

// AgentOwnedAnnotation tells whether an annotation is the node agent's.
func AgentOwnedAnnotation(key string) bool {
	switch key {
	case AnnotationNodeZones, AnnotationNodeZonesAvailable, AnnotationNodeImagePoolUsed, AnnotationNodeImagePoolSize:
		return true
	}
	return false
}
