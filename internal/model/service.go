package model

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Kinds of the service network.
const (
	KindService   = "Service"
	KindEndpoints = "Endpoints"
)

// Service gives a set of pods one stable address and name.
type Service struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta    `json:"metadata"`
	Spec     ServiceSpec   `json:"spec"`
	Status   ServiceStatus `json:"status"`
}

// ServiceSpec is the desired state of a service.
type ServiceSpec struct {
	// Selector picks the pods (same namespace) behind the service.
	Selector map[string]string `json:"selector,omitempty"`
	Ports    []ServicePort     `json:"ports,omitempty"`
	// ClusterIP is the service's virtual address: empty on create asks for
	// one, an address inside the service CIDR asks for that one, and None
	// makes the service headless (its name resolves to its pods).
	ClusterIP string `json:"clusterIP,omitempty"`
	// Type is ClusterIP, the only type served.
	Type                     string                 `json:"type,omitempty"`
	SessionAffinity          string                 `json:"sessionAffinity,omitempty"`
	SessionAffinityConfig    *SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`
	PublishNotReadyAddresses bool                   `json:"publishNotReadyAddresses,omitempty"`
}

// ServicePort is one port a service exposes.
type ServicePort struct {
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	Port     int32  `json:"port"`
	// TargetPort is the pods' port: a number, or the name of a container
	// port, resolved per pod. Unset means the same as Port.
	TargetPort IntOrString `json:"targetPort,omitempty"`
}

// SessionAffinityConfig tunes ClientIP affinity.
type SessionAffinityConfig struct {
	ClientIP *ClientIPConfig `json:"clientIP,omitempty"`
}

// ClientIPConfig says how long a client sticks to one pod.
type ClientIPConfig struct {
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`
}

// ServiceStatus of a ClusterIP service holds an empty load balancer
// status, as Kubernetes writes it and kubectl sends it back (kubectl
// expose, apply of an exported service).
type ServiceStatus struct {
	LoadBalancer LoadBalancerStatus `json:"loadBalancer"`
}

// LoadBalancerStatus is empty: zonewright's services have no external
// load balancer, so no ingress points.
type LoadBalancerStatus struct{}

// Service types, affinities and the headless marker.
const (
	ServiceTypeClusterIP   = "ClusterIP"
	AffinityNone           = "None"
	AffinityClientIP       = "ClientIP"
	ClusterIPNone          = "None"
	DefaultClientIPTimeout = int32(10800) // Kubernetes' default: 3 hours
	MaxClientIPTimeout     = int32(86400)
)

// Headless reports a service without a virtual address.
func (s *Service) Headless() bool { return s.Spec.ClusterIP == ClusterIPNone }

func (s *Service) GetTypeMeta() *TypeMeta    { return &s.TypeMeta }
func (s *Service) GetMeta() *ObjectMeta      { return &s.Metadata }
func (s *Service) Parts() (spec, status any) { return &s.Spec, &s.Status }

// IntOrString is a port given as a number or as a name (Kubernetes'
// intstr): JSON 8080 or "http".
type IntOrString struct {
	IntVal int32
	StrVal string
}

// IntValue makes an IntOrString holding a number.
func IntValue(v int32) IntOrString { return IntOrString{IntVal: v} }

// StrValue makes an IntOrString holding a name.
func StrValue(s string) IntOrString { return IntOrString{StrVal: s} }

// IsZero reports an unset value (neither a number nor a name).
func (v IntOrString) IsZero() bool { return v.IntVal == 0 && v.StrVal == "" }

// String is the name, or the number in decimal.
func (v IntOrString) String() string {
	if v.StrVal != "" {
		return v.StrVal
	}
	return strconv.Itoa(int(v.IntVal))
}

func (v IntOrString) MarshalJSON() ([]byte, error) {
	if v.StrVal != "" {
		return json.Marshal(v.StrVal)
	}
	return json.Marshal(v.IntVal)
}

func (v *IntOrString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*v = IntOrString{}
		return json.Unmarshal(b, &v.StrVal)
	}
	var n int32
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("a port must be a number or a port name: %s", b)
	}
	*v = IntOrString{IntVal: n}
	return nil
}

// Endpoints is the set of pod addresses behind one service, with the same
// name as the service. Only zonewright writes it.
type Endpoints struct {
	TypeMeta      `json:",inline"`
	Metadata      ObjectMeta `json:"metadata"`
	EndpointsData `json:",inline"`
}

// EndpointsData is the body of an Endpoints object; stored as its spec.
type EndpointsData struct {
	Subsets []EndpointSubset `json:"subsets"`
}

// EndpointSubset is a group of addresses that share the same ports.
type EndpointSubset struct {
	Addresses         []EndpointAddress `json:"addresses,omitempty"`
	NotReadyAddresses []EndpointAddress `json:"notReadyAddresses,omitempty"`
	Ports             []EndpointPort    `json:"ports,omitempty"`
}

// EndpointAddress is one pod behind a service.
type EndpointAddress struct {
	IP        string           `json:"ip"`
	Hostname  string           `json:"hostname,omitempty"`
	NodeName  string           `json:"nodeName,omitempty"`
	TargetRef *ObjectReference `json:"targetRef,omitempty"`
}

// EndpointPort is a service port resolved to the pods' port number.
type EndpointPort struct {
	Name     string `json:"name,omitempty"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol"`
}

// endpointsStatus is empty: endpoints are all observed state already.
type endpointsStatus struct{}

func (e *Endpoints) GetTypeMeta() *TypeMeta    { return &e.TypeMeta }
func (e *Endpoints) GetMeta() *ObjectMeta      { return &e.Metadata }
func (e *Endpoints) Parts() (spec, status any) { return &e.EndpointsData, &endpointsStatus{} }
