package model

import (
	"encoding/json"
	"fmt"
	"time"
)

// Pod is a set of containers run together in one illumos zone.
type Pod struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     PodSpec    `json:"spec"`
	Status   PodStatus  `json:"status"`
}

// PodSpec is the desired state of a pod.
type PodSpec struct {
	Containers []Container `json:"containers"`
	// RuntimeClassName selects the zone brand: sparse (default), ipkg, lx or bhyve.
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
	NodeName         string `json:"nodeName,omitempty"`
	// Hostname is the zone's node name (default: the pod's name). With
	// Subdomain naming a headless service of the namespace, the pod is
	// also <hostname>.<subdomain>.<namespace>.svc.<cluster domain>.
	Hostname      string            `json:"hostname,omitempty"`
	Subdomain     string            `json:"subdomain,omitempty"`
	NodeSelector  map[string]string `json:"nodeSelector,omitempty"`
	Tolerations   []Toleration      `json:"tolerations,omitempty"`
	RestartPolicy string            `json:"restartPolicy,omitempty"`
	// DNSPolicy is ClusterFirst (or empty, the same): a zone resolves
	// through the cluster DNS. kubectl run and Kubernetes' typed clients
	// send it; other policies are refused.
	DNSPolicy                     string `json:"dnsPolicy,omitempty"`
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
	// Volumes are mounted into the pod's zone by its containers'
	// volumeMounts (volume.go).
	Volumes []Volume `json:"volumes,omitempty"`
	// ImagePullSecrets name kubernetes.io/dockerconfigjson secrets of the
	// pod's namespace its registry images are pulled with.
	ImagePullSecrets []LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// DNSClusterFirst is the one DNS policy: the cluster DNS first.
const DNSClusterFirst = "ClusterFirst"

// LocalObjectReference names an object of the same namespace.
type LocalObjectReference struct {
	Name string `json:"name"`
}

// Zone brands a pod can run as.
const (
	BrandSparse = "sparse"
	BrandIPKG   = "ipkg"
	BrandLX     = "lx"
	BrandBhyve  = "bhyve"
)

// Brands lists every supported brand.
var Brands = []string{BrandSparse, BrandIPKG, BrandLX, BrandBhyve}

// Restart policies.
const (
	RestartAlways    = "Always"
	RestartOnFailure = "OnFailure"
	RestartNever     = "Never"
)

// DefaultTerminationGracePeriodSeconds matches Kubernetes.
const DefaultTerminationGracePeriodSeconds int64 = 30

// Bounds of what a pod spec may ask for. Kubernetes leaves most of these
// unbounded; here each becomes a timer, an SMF method timeout or a
// manifest on a host, so each is bounded well above any sane use.
const (
	// MaxGracePeriodSeconds: a day. A stop that needs longer is a drain,
	// not a grace period, and a pod's zone and address stay held meanwhile.
	MaxGracePeriodSeconds int64 = 86400
	// MaxProbeDelaySeconds bounds a probe's initialDelaySeconds (a day).
	MaxProbeDelaySeconds int32 = 86400
	// MaxProbePeriodSeconds bounds periodSeconds and timeoutSeconds (an hour).
	MaxProbePeriodSeconds int32 = 3600
	// MaxProbeThreshold bounds successThreshold and failureThreshold.
	MaxProbeThreshold int32 = 1000
	// MaxCommandBytes bounds a container's command and args together, and
	// a probe's command: bytes plus one terminator per word. POSIX's
	// smallest ARG_MAX is 4096; illumos allows 1 MiB, which the
	// environment shares. 128 KiB leaves room for it.
	MaxCommandBytes = 128 * 1024
	// MaxEnvBytes bounds a container's environment, names and values.
	MaxEnvBytes = 128 * 1024
	// MaxHTTPPathBytes bounds a probe's httpGet path.
	MaxHTTPPathBytes = 2048
	// MaxHTTPHeaderBytes bounds a probe's httpHeaders, names and values.
	MaxHTTPHeaderBytes = 8192
	// MaxProbeHostBytes bounds a probe's host and grpc service names.
	MaxProbeHostBytes = 253
)

// Container is one process tree of a pod, run as an SMF service in its zone.
type Container struct {
	Name           string               `json:"name"`
	Image          string               `json:"image"`
	Command        []string             `json:"command,omitempty"`
	Args           []string             `json:"args,omitempty"`
	Env            []EnvVar             `json:"env,omitempty"`
	Ports          []ContainerPort      `json:"ports,omitempty"`
	Resources      ResourceRequirements `json:"resources,omitempty"`
	LivenessProbe  *Probe               `json:"livenessProbe,omitempty"`
	ReadinessProbe *Probe               `json:"readinessProbe,omitempty"`
	StartupProbe   *Probe               `json:"startupProbe,omitempty"`
	VolumeMounts   []VolumeMount        `json:"volumeMounts,omitempty"`
	// VolumeDevices names the claims a bhyve pod's guest sees as disks.
	VolumeDevices []VolumeDevice `json:"volumeDevices,omitempty"`
	// ImagePullPolicy: Never runs the image only if its node holds it
	// already; IfNotPresent and Always (empty: IfNotPresent) pull it when
	// the node lacks it.
	ImagePullPolicy string `json:"imagePullPolicy,omitempty"`
}

// Image pull policies.
const (
	PullAlways       = "Always"
	PullIfNotPresent = "IfNotPresent"
	PullNever        = "Never"
)

// EnvVar is one environment variable of a container: a value, or where
// the node reads it from when it starts the container.
type EnvVar struct {
	Name      string        `json:"name"`
	Value     string        `json:"value"`
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource is where an environment variable's value comes from:
// one of a secret's keys, or a field of the pod.
type EnvVarSource struct {
	SecretKeyRef *SecretKeySelector   `json:"secretKeyRef,omitempty"`
	FieldRef     *ObjectFieldSelector `json:"fieldRef,omitempty"`
}

// ObjectFieldSelector names a field of the pod (FieldPaths), which the
// node fills in when it starts the container.
type ObjectFieldSelector struct {
	// APIVersion is the version FieldPath is written in: "v1" (empty
	// means v1).
	APIVersion string `json:"apiVersion,omitempty"`
	FieldPath  string `json:"fieldPath"`
}

// The pod fields an environment variable may take (fieldRef.fieldPath):
// Kubernetes' downward API, as far as a node knows the pod.
const (
	FieldPodName      = "metadata.name"
	FieldPodNamespace = "metadata.namespace"
	FieldPodUID       = "metadata.uid"
	FieldNodeName     = "spec.nodeName"
	FieldPodIP        = "status.podIP"
	FieldPodIPs       = "status.podIPs"
)

// FieldPaths lists the supported fieldRef.fieldPath values.
var FieldPaths = []string{FieldPodName, FieldPodNamespace, FieldPodUID, FieldNodeName, FieldPodIP, FieldPodIPs}

// SecretKeySelector names one key of a secret in the pod's namespace.
// The node reads it when it starts the container, so the value never
// passes through the pod's spec, its workflow or its events.
type SecretKeySelector struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// Optional: a missing secret or key leaves the variable unset
	// instead of keeping the container from starting.
	Optional *bool `json:"optional,omitempty"`
}

// IsOptional reports whether a missing secret or key may be skipped.
func (s *SecretKeySelector) IsOptional() bool { return s.Optional != nil && *s.Optional }

// ContainerPort is a port a container listens on.
type ContainerPort struct {
	Name          string `json:"name,omitempty"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
}

// ResourceList maps a resource name (cpu, memory) to a quantity string.
type ResourceList map[string]string

// UnmarshalJSON takes each quantity as a string or, as Kubernetes does, a
// number: YAML's `cpu: 2` arrives as one. The number is kept as written.
func (l *ResourceList) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*l = nil
		return nil
	}
	out := make(ResourceList, len(raw))
	for k, v := range raw {
		var str string
		if err := json.Unmarshal(v, &str); err == nil {
			out[k] = str
			continue
		}
		var n json.Number
		if err := json.Unmarshal(v, &n); err != nil {
			return fmt.Errorf("quantity %s: want a string or a number, not %s", k, v)
		}
		out[k] = n.String()
	}
	*l = out
	return nil
}

// Resource names.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
	ResourcePods   = "pods"
)

// ResourceRequirements are what a container asks for and may not exceed.
type ResourceRequirements struct {
	Requests ResourceList `json:"requests,omitempty"`
	Limits   ResourceList `json:"limits,omitempty"`
}

// Probe checks a container's health.
type Probe struct {
	Exec                *ExecAction      `json:"exec,omitempty"`
	HTTPGet             *HTTPGetAction   `json:"httpGet,omitempty"`
	TCPSocket           *TCPSocketAction `json:"tcpSocket,omitempty"`
	GRPC                *GRPCAction      `json:"grpc,omitempty"`
	InitialDelaySeconds int32            `json:"initialDelaySeconds,omitempty"`
	PeriodSeconds       int32            `json:"periodSeconds,omitempty"`
	TimeoutSeconds      int32            `json:"timeoutSeconds,omitempty"`
	SuccessThreshold    int32            `json:"successThreshold,omitempty"`
	FailureThreshold    int32            `json:"failureThreshold,omitempty"`
	// TerminationGracePeriodSeconds replaces the pod's grace period when
	// this (liveness or startup) probe's failure stops the container.
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// ExecAction runs a command inside the zone; exit 0 is healthy.
type ExecAction struct {
	Command []string `json:"command"`
}

// HTTPGetAction asks for a path on the pod's address (or Host); 200–399
// is healthy.
type HTTPGetAction struct {
	Path string `json:"path,omitempty"`
	// Port is a number or the name of one of the container's ports.
	Port IntOrString `json:"port"`
	// Host is connected to instead of the pod's address.
	Host        string       `json:"host,omitempty"`
	Scheme      string       `json:"scheme,omitempty"`
	HTTPHeaders []HTTPHeader `json:"httpHeaders,omitempty"`
}

// HTTPHeader is one header an httpGet probe sends; a "Host" header sets
// the request's host.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TCPSocketAction opens a connection to the pod's address (or Host).
type TCPSocketAction struct {
	// Port is a number or the name of one of the container's ports.
	Port IntOrString `json:"port"`
	Host string      `json:"host,omitempty"`
}

// GRPCAction calls the standard gRPC health service (grpc.health.v1
// Health/Check) on the pod's address; SERVING is healthy.
type GRPCAction struct {
	Port int32 `json:"port"`
	// Service is the name asked about; empty asks about the server.
	Service *string `json:"service,omitempty"`
}

// ProbePort resolves a probe's port, a number or the name of one of the
// container's ports, as kubelet does; false when the name is not there.
func ProbePort(port IntOrString, ports []ContainerPort) (int32, bool) {
	if port.StrVal == "" {
		return port.IntVal, true
	}
	for _, p := range ports {
		if p.Name == port.StrVal {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// KillGraceSeconds is how long the container's command is given to end
// when a failed liveness or startup probe stops it: the probe's own
// terminationGracePeriodSeconds, else the pod's (Kubernetes' rule). A
// container with both probes setting it takes the liveness probe's. It
// is at least a second, as an SMF method timeout must be.
func (c *Container) KillGraceSeconds(pod *PodSpec) int64 {
	for _, p := range []*Probe{c.LivenessProbe, c.StartupProbe} {
		if p != nil && p.TerminationGracePeriodSeconds != nil {
			return max(*p.TerminationGracePeriodSeconds, 1)
		}
	}
	if pod.TerminationGracePeriodSeconds != nil {
		return max(*pod.TerminationGracePeriodSeconds, 1)
	}
	return DefaultTerminationGracePeriodSeconds
}

// Toleration lets a pod schedule onto a node with a matching taint.
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"` // Equal (default) or Exists
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

// PodStatus is the observed state of a pod.
type PodStatus struct {
	Phase             string            `json:"phase,omitempty"`
	Conditions        []PodCondition    `json:"conditions,omitempty"`
	Reason            string            `json:"reason,omitempty"`
	Message           string            `json:"message,omitempty"`
	HostIP            string            `json:"hostIP,omitempty"`
	PodIP             string            `json:"podIP,omitempty"`
	StartTime         *time.Time        `json:"startTime,omitempty"`
	ContainerStatuses []ContainerStatus `json:"containerStatuses,omitempty"`
}

// Pod phases.
const (
	PodPending   = "Pending"
	PodRunning   = "Running"
	PodSucceeded = "Succeeded"
	PodFailed    = "Failed"
)

// ReasonTerminating is the status reason a pod's lifecycle writes once it
// has begun to stop the deleted pod.
const ReasonTerminating = "Terminating"

// PodCondition is one facet of a pod's progress.
type PodCondition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastTransitionTime *time.Time `json:"lastTransitionTime,omitempty"`
}

// Pod condition types.
const (
	PodScheduled = "PodScheduled"
	PodReady     = "Ready"
)

// ContainerStatus is the observed state of one container.
type ContainerStatus struct {
	Name         string         `json:"name"`
	Ready        bool           `json:"ready"`
	Started      *bool          `json:"started,omitempty"`
	RestartCount int32          `json:"restartCount"`
	State        ContainerState `json:"state"`
	// LastTerminationState is how the previous incarnation ended.
	LastTerminationState ContainerState `json:"lastState"`
}

// ContainerState is one of waiting, running or terminated (Kubernetes'
// shape); all nil is unknown.
type ContainerState struct {
	Waiting    *ContainerStateWaiting    `json:"waiting,omitempty"`
	Running    *ContainerStateRunning    `json:"running,omitempty"`
	Terminated *ContainerStateTerminated `json:"terminated,omitempty"`
}

// ContainerStateWaiting: not running yet, or backing off before a restart.
type ContainerStateWaiting struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ContainerStateRunning: the container's command runs.
type ContainerStateRunning struct {
	StartedAt *time.Time `json:"startedAt,omitempty"`
}

// ContainerStateTerminated: the container's command ended.
type ContainerStateTerminated struct {
	ExitCode   int32      `json:"exitCode"`
	Reason     string     `json:"reason,omitempty"` // Completed, Error, Unhealthy
	Message    string     `json:"message,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

// RunningAndReady says the pod is Running with its Ready condition True.
func (p *Pod) RunningAndReady() bool {
	if p.Status.Phase != PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == PodReady {
			return c.Status == ConditionTrue
		}
	}
	return false
}

func (p *Pod) GetTypeMeta() *TypeMeta    { return &p.TypeMeta }
func (p *Pod) GetMeta() *ObjectMeta      { return &p.Metadata }
func (p *Pod) Parts() (spec, status any) { return &p.Spec, &p.Status }
