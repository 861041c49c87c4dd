package activities

import (
	"context"
	"errors"
	"log/slog"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
)

// PodSandbox is everything a node needs to build and run one pod's zone.
// Host names (zone, VNIC, dataset) derive from it deterministically, so
// every host activity can be retried, or re-run after a crash, and find
// its earlier work.
type PodSandbox struct {
	Namespace string
	Name      string
	UID       string
	Brand     string // sparse, ipkg, lx, bhyve
	Image     string
	// MilliCPU and MemoryBytes cap the zone (capped-cpu, capped-memory);
	// zero means no cap.
	MilliCPU    int64
	MemoryBytes int64
	IP          string // the pod's address on the node's pod network
	PrefixLen   int
	Gateway     string // the default route inside the zone
	Containers  []ContainerSpec
}

// ContainerSpec is one container, run as an SMF service in the zone.
type ContainerSpec struct {
	Name string
	Argv []string // command then args
	Env  []model.EnvVar
}

// PodObservation is what a node sees of a pod's zone right now.
type PodObservation struct {
	ZoneState  string            // zoneadm state, "" when the zone does not exist
	Containers map[string]string // container name -> SMF state (online, offline, maintenance, …)
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

// ProbeInput is one probe of one container.
type ProbeInput struct {
	Sandbox   PodSandbox
	Container string
	Probe     model.Probe
}

// ProbeResult is a probe's verdict; a failed probe is a result, not an error.
type ProbeResult struct {
	Success bool
	Message string
}

// Host holds the host activities of one node: every change they make goes
// through the illumos commands. Only that node's agent runs them, on its
// task queue node/<name>.
type Host struct {
	Host illumos.Host
	Node string
	// Etherstub is the link pod VNICs are created over.
	Etherstub string
	// ZonesDataset holds one dataset per pod zone, mounted at ZonesPath.
	ZonesDataset string
	ZonesPath    string
	// Installs bounds concurrent zone installs on this node.
	Installs chan struct{}
	Log      *slog.Logger
}

var errUnimplemented = errors.New("not implemented yet")

// CreateDatasets creates the pod's zone dataset.
func (h *Host) CreateDatasets(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// DestroyDatasets destroys the pod's datasets; missing ones are fine.
func (h *Host) DestroyDatasets(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// CreateVNIC creates the pod's VNIC over the node's etherstub.
func (h *Host) CreateVNIC(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// DeleteVNIC deletes the pod's VNIC; a missing one is fine.
func (h *Host) DeleteVNIC(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// ConfigureZone writes the zone configuration (zonecfg).
func (h *Host) ConfigureZone(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// DeleteZoneConfig deletes the zone configuration; a missing one is fine.
func (h *Host) DeleteZoneConfig(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// InstallZone installs the zone, heartbeating while it runs.
func (h *Host) InstallZone(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// UninstallZone uninstalls the zone (halting it first if it runs).
func (h *Host) UninstallZone(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// BootZone boots the zone.
func (h *Host) BootZone(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// HaltZone halts the zone at once; a zone not running is fine.
func (h *Host) HaltZone(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// ConfigureNetwork gives the zone its address and default route.
func (h *Host) ConfigureNetwork(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// StartContainers imports and enables one SMF service per container.
func (h *Host) StartContainers(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// WaitContainersOnline waits until every container's service is online.
func (h *Host) WaitContainersOnline(ctx context.Context, s PodSandbox) error {
	return errUnimplemented
}

// ObservePod reports the zone's state and each container's service state.
func (h *Host) ObservePod(ctx context.Context, s PodSandbox) (PodObservation, error) {
	return PodObservation{}, errUnimplemented
}

// RestartContainer restarts one container's service (clearing maintenance).
func (h *Host) RestartContainer(ctx context.Context, in RestartInput) error { return errUnimplemented }

// StopContainers disables every container's service: SIGTERM to its processes.
func (h *Host) StopContainers(ctx context.Context, s PodSandbox) error { return errUnimplemented }

// ShutdownZone shuts the zone down gracefully, waiting up to the grace
// period; it reports whether the zone stopped in time.
func (h *Host) ShutdownZone(ctx context.Context, in ShutdownInput) (bool, error) {
	return false, errUnimplemented
}

// Probe runs one probe: exec through zlogin, httpGet and tcpSocket against
// the pod's address from this node.
func (h *Host) Probe(ctx context.Context, in ProbeInput) (ProbeResult, error) {
	return ProbeResult{}, errUnimplemented
}
