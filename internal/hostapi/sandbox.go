package hostapi

import (
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
)

// PodSandbox is everything a node needs to build and run one pod's zone.
// Host names (zone, VNIC, dataset) derive from it deterministically, so
// every host operation can be retried, or re-run after a crash, and find
// its earlier work.
type PodSandbox struct {
	Namespace string
	Name      string
	UID       string
	Brand     string // sparse, ipkg, lx, bhyve
	Image     string
	// ImageKind is the catalog kind of Image (model.ImageLXTarball, …);
	// empty when the pod names no catalog image.
	ImageKind string
	// ImageDigest is an oci image's manifest digest (hex): which of the
	// image's datasets on the node the zone clones.
	ImageDigest string `json:",omitempty"`
	// MilliCPU and MemoryBytes cap the zone (capped-cpu, capped-memory);
	// zero means no cap.
	MilliCPU    int64
	MemoryBytes int64
	// EphemeralStorageBytes is the zone dataset's quota (its root and
	// emptyDirs); zero takes the node's default (hostops.Host.ZoneQuota).
	EphemeralStorageBytes int64 `json:",omitempty"`
	// MaxProcesses and MaxLWPs are the pod's own process limits; the
	// node's (hostops.Host.MaxProcesses, MaxLWPs) bound them, zero takes
	// the node's.
	MaxProcesses int64 `json:",omitempty"`
	MaxLWPs      int64 `json:",omitempty"`
	// Hostname is the zone's node name; empty means the pod's name.
	Hostname   string `json:",omitempty"`
	IP         string // the pod's address on the node's pod network
	PrefixLen  int
	Gateway    string // the default route inside the zone
	Containers []ContainerSpec
	// Volumes are mounted into the zone at Mounts.
	Volumes []PodVolume `json:",omitempty"`
	Mounts  []PodMount  `json:",omitempty"`
}

// ContainerSpec is one container, run as an SMF service in the zone.
type ContainerSpec struct {
	Name string
	Argv []string // command then args
	Env  []model.EnvVar
	// WorkingDir is where the command starts (absolute); empty: "/".
	WorkingDir string `json:",omitempty"`
	// User is the zone's user the command runs as, an image's USER:
	// user or user:group, each a name of the zone's passwd or group file
	// or a number; empty: the zone's root.
	User string `json:",omitempty"`
	// KillGraceSeconds bounds how long SMF waits for the command to end
	// once it is told to stop, before it kills it (the service's stop
	// method timeout): the grace of a failed liveness or startup probe
	// (model.Container.KillGraceSeconds). Zero leaves SMF's 60 s.
	KillGraceSeconds int64 `json:",omitempty"`
}

// RestartInput names one container of a pod.
type RestartInput struct {
	Sandbox   PodSandbox
	Container string
}

// ShutdownInput asks for a graceful zone shutdown within a grace period.
type ShutdownInput struct {
	Sandbox      PodSandbox
	GraceSeconds int64
}

// SuperviseInput hands a running pod to its node's supervisor: the
// sandbox (without the containers' environment) and each container's
// probes.
type SuperviseInput struct {
	Sandbox PodSandbox
	Probes  []ContainerProbes
}

// ContainerProbes are one container's probes (nil: none of that kind)
// and its ports, which the probes may name.
type ContainerProbes struct {
	Name                         string
	Startup, Liveness, Readiness *model.Probe
	Ports                        []model.ContainerPort `json:",omitempty"`
}

// ZoneName is the pod's zone name on its node.
func (s PodSandbox) ZoneName() string { return names.ZoneName(s.Namespace, s.Name, s.UID) }

// VNICName is the pod's VNIC (it ends in a digit, as dladm wants).
func (s PodSandbox) VNICName() string { return names.LinkName("zw", s.UID) }

// NodeName is the zone's node name: the pod's hostname, else its name (a
// DNS label, as a host name must be).
func (s PodSandbox) NodeName() string {
	if s.Hostname != "" {
		return s.Hostname
	}
	return s.Name
}
