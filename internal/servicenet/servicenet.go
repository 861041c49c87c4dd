// Package servicenet is the cluster's service network at one generation:
// every service, its address and ports, and the pods behind it. It is what
// the cluster DNS answers from and what every node programs into ipnat.
// Holders swap a whole snapshot at once and never go back to an older
// generation, so "which generation does this node or server have?" has
// one answer.
package servicenet

// Snapshot is every service and its endpoints at one generation.
type Snapshot struct {
	Generation int64     `json:"generation"`
	Services   []Service `json:"services"`
}

// Service is one service as DNS and NAT need it.
type Service struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ClusterIP is the service's address; empty for a headless service
	// (spec.clusterIP None), whose name resolves to its endpoints.
	ClusterIP       string `json:"clusterIP,omitempty"`
	SessionAffinity string `json:"sessionAffinity,omitempty"` // None or ClientIP
	Ports           []Port `json:"ports,omitempty"`
	// Endpoints are the pods that receive the service's traffic: ready
	// ones (and not-ready ones when the service publishes them).
	Endpoints []Endpoint `json:"endpoints,omitempty"`
}

// Headless reports a service without a ClusterIP.
func (s *Service) Headless() bool { return s.ClusterIP == "" }

// Port is one port of a service.
type Port struct {
	Name     string `json:"name,omitempty"`
	Protocol string `json:"protocol"` // TCP or UDP
	Port     int32  `json:"port"`
}

// Endpoint is one pod behind a service.
type Endpoint struct {
	IP   string `json:"ip"`
	Node string `json:"nodeName,omitempty"`
	Pod  string `json:"pod,omitempty"` // the pod's name (same namespace)
	// Hostname is the pod's DNS label under a headless service (its
	// spec.hostname, else empty).
	Hostname string `json:"hostname,omitempty"`
	// TargetPorts are the pod's ports for the service's Ports, in order
	// (a named targetPort resolves per pod; 0: the pod has no such port).
	TargetPorts []int32 `json:"targetPorts,omitempty"`
}
