// Package hostops is the work zonewright does on an illumos host for its
// pods: datasets, VNICs, zones (configure, install, boot, halt, shut
// down, uninstall), the zone's network, the containers (SMF services)
// and their hand-off to the node's supervisor, images pulled from the
// control plane, and the inventory, plan and orphan removal of host
// reconciliation. Every change goes through the illumos commands
// (internal/illumos).
//
// It knows nothing of Temporal: the host activities (activities/host) are
// thin wrappers over it, and the agent calls it directly. What it is asked
// and answers (the sandbox, images, claims, the inventory) are
// internal/hostapi's types, shared with its callers. Errors are plain
// Go errors (see errors.go); long operations report that they are alive
// through the caller's progress callback (internal/progress).
package hostops

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/containerlog"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/progress"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// Supervisor is the node's pod supervisor, as the host operations see it
// (internal/supervisor).
type Supervisor interface {
	Watch(p supervisor.Pod, initial map[string]supervisor.Initial) uint64
	Restarted(uid, container string) uint64
	Forget(uid string)
}

// Host does the work of one node's pods: every change it makes goes
// through the illumos commands. Only that node's agent runs it (through
// the host activities on its task queue node/<name>, or directly).
//
// Every operation is idempotent: names derive from the sandbox (see
// PodSandbox.ZoneName), so a retry, or a re-run after a crash, finds the
// work already done and succeeds.
//
// Errors say what failed where (*Error: the step, the pod and its zone,
// the node) and why: an *illumos.Error for a failed command (its kind, its
// argv and stderr; a usage error or a value zonecfg refuses is of kind
// illumos.KindInvalid), an *InvalidError for a request refused before any
// command runs, a *ConflictError for something on the host in the way
// that is not ours (a VNIC of the pod's name over another link, a zone of
// the pod's name belonging to another pod), a *MaintenanceError from
// WaitContainersOnline; the image operations add their own (errors.go).
//
// A Host must not be copied after first use.
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
	// Supervisor watches the pods running on this node; nil in tests
	// that run no pods.
	Supervisor Supervisor
	Log        *slog.Logger
	// Metrics measures image pulls; nil measures nothing.
	Metrics *metrics.Node
	// API is the node's client of the control plane's API, which image
	// downloads and volume transfers go through; nil: http.DefaultClient.
	API *http.Client

	// ImagesDataset holds the images pulled as ZFS streams and bhyve disks
	// (<ImagesDataset>/<image>, each with its golden @base snapshot that
	// zones and pod volumes are cloned from).
	ImagesDataset string
	// VolumesDataset holds the pods' volumes (bhyve boot disks cloned from
	// an image), one per pod zone.
	VolumesDataset string
	// ImageDir holds lx tarball images, <ImageDir>/<image>.tar.
	ImageDir string
	// ZvolDir is the directory of the volumes' raw devices
	// (illumos.DefaultZvolDir on illumos), where PullImage writes disk
	// images.
	ZvolDir string
	// ZonesDir is where this machine's filesystem holds ZonesPath, for
	// files written into zones from the global zone; empty: ZonesPath
	// itself (a simulated host keeps it under its own root).
	ZonesDir string
	// KeptLogs, if set, keeps the containers' logs when their zone halts
	// or is uninstalled (containers.go, keepLogs), so they outlive it;
	// nil: a container's log goes with its zone.
	KeptLogs *containerlog.Kept
	// ZoneDNS, if set, is written into every zone before it boots
	// (resolver.go); nil leaves the zones' resolver configuration alone.
	ZoneDNS *ZoneDNS
	// PodCIDR is the pod network the control plane assigned the node:
	// a pod address outside it is refused (invalid). Zero: not checked.
	PodCIDR netip.Prefix
	// PrepareZonepath, if set, runs on the zonepath once the zone's dataset
	// exists and is mounted. zoneadm install wants the zonepath owned by
	// root with mode 0700 while zfs create makes it 0755, so on illumos the
	// agent sets this to a chmod. Nil when the commands do not run against
	// this machine's filesystem (a --bin-dir pointing elsewhere).
	PrepareZonepath func(zonepath string) error
	// PollInterval is how often the waiting operations (WaitContainersOnline,
	// ShutdownZone) look again; zero means 500ms.
	PollInterval time.Duration
	// StepRetry is the first wait before a provision step that failed
	// transiently is tried again (doubling up to 30s); zero means 1s.
	StepRetry time.Duration
	// HeartbeatInterval is how often long commands report progress (to
	// the context's progress callback); zero means 5s.
	HeartbeatInterval time.Duration
	// DownloadStallTimeout ends an image download that receives nothing
	// for that long; zero means a minute.
	DownloadStallTimeout time.Duration
	// ZoneQuota is the quota of a zone dataset whose pod asks for no
	// ephemeral storage, bytes; zero: none.
	ZoneQuota int64
	// MaxProcesses and MaxLWPs limit every zone of the node (zonecfg
	// max-processes, max-lwps); a pod may ask for less, never more.
	// Zero: no limit of the node's.
	MaxProcesses, MaxLWPs int64
	// Secrets reads the values of containers' env[].valueFrom.secretKeyRef
	// when StartContainers writes their services (secretenv.go); nil: a
	// pod that reads secrets cannot start on this node.
	Secrets SecretEnvSource

	mu    sync.Mutex
	zones map[string]*zoneLock
	// configs caches installed zones' configurations for Inventory (see
	// installedConfig).
	configs map[string]cachedConfig
}

// cachedConfig is a zone's configuration as read while it had uuid.
type cachedConfig struct {
	uuid string
	info illumos.ZoneInfo
}

type zoneLock struct {
	sync.Mutex
	users int
}

// lockZone serialises the long zoneadm operations (install, uninstall) of
// one zone within this agent: a retry that Temporal starts while the
// attempt it replaces is still winding down waits for it instead of
// uninstalling under its feet.
func (h *Host) lockZone(ctx context.Context, zone string) (unlock func(), err error) {
	h.mu.Lock()
	if h.zones == nil {
		h.zones = map[string]*zoneLock{}
	}
	l := h.zones[zone]
	if l == nil {
		l = &zoneLock{}
		h.zones[zone] = l
	}
	l.users++
	h.mu.Unlock()
	release := func() {
		h.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(h.zones, zone)
		}
		h.mu.Unlock()
	}
	for !l.TryLock() {
		select {
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return func() { l.Unlock(); release() }, nil
}

// check refuses a sandbox that cannot name a zone or address it.
func checkSandbox(s hostapi.PodSandbox) error {
	if s.Namespace == "" || s.Name == "" || s.UID == "" {
		return fmt.Errorf("sandbox needs a namespace, a name and a uid (got %q, %q, %q)", s.Namespace, s.Name, s.UID)
	}
	if errs := model.ValidateName("hostname", s.NodeName()); len(errs) > 0 {
		return fmt.Errorf("sandbox node name: %w", errs)
	}
	return nil
}

// checkNet refuses an address the zone cannot be given: with the node's
// pod CIDR known (valid), one outside it, of another prefix length, or
// with a gateway outside it. The node's routes and gateway serve only the
// pod CIDR the control plane assigned it; another address would be
// unreachable, or another node's.
func checkSandboxNet(s hostapi.PodSandbox, podCIDR netip.Prefix) (netip.Prefix, error) {
	ip, err := netip.ParseAddr(s.IP)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("pod IP %q is not an address", s.IP)
	}
	if s.PrefixLen <= 0 || s.PrefixLen > ip.BitLen() {
		return netip.Prefix{}, fmt.Errorf("prefix length %d is out of range for %s", s.PrefixLen, s.IP)
	}
	var gw netip.Addr
	if s.Gateway != "" {
		if gw, err = netip.ParseAddr(s.Gateway); err != nil {
			return netip.Prefix{}, fmt.Errorf("gateway %q is not an address", s.Gateway)
		}
	}
	if podCIDR.IsValid() {
		if !podCIDR.Contains(ip) || s.PrefixLen != podCIDR.Bits() {
			return netip.Prefix{}, fmt.Errorf("pod address %s/%d is not in this node's pod CIDR %s, the one the control plane assigned it", s.IP, s.PrefixLen, podCIDR)
		}
		if gw.IsValid() && !podCIDR.Contains(gw) {
			return netip.Prefix{}, fmt.Errorf("gateway %s is not in this node's pod CIDR %s, the one the control plane assigned it", gw, podCIDR)
		}
	}
	return netip.PrefixFrom(ip, s.PrefixLen), nil
}

// zonepath is the zone's zonepath: the mountpoint of its dataset.
func (h *Host) zonepath(s hostapi.PodSandbox) string { return path.Join(h.ZonesPath, s.ZoneName()) }

// dataset is the zone's dataset.
func (h *Host) dataset(s hostapi.PodSandbox) (string, error) {
	return names.DatasetName(h.ZonesDataset, s.ZoneName())
}

func (h *Host) api() *http.Client {
	if h.API != nil {
		return h.API
	}
	return http.DefaultClient
}

func (h *Host) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.Default()
}

func (h *Host) pollInterval() time.Duration {
	if h.PollInterval > 0 {
		return h.PollInterval
	}
	return 500 * time.Millisecond
}

func (h *Host) heartbeatInterval() time.Duration {
	if h.HeartbeatInterval > 0 {
		return h.HeartbeatInterval
	}
	return 5 * time.Second
}

// fail turns the failure of step on the sandbox's zone into the error the
// operation returns: an *Error saying what a person needs to act on. An
// error already shaped (an *Error, an *ImageMissingError) is returned as
// it is.
func (h *Host) fail(ctx context.Context, step string, s hostapi.PodSandbox, err error) error {
	if err == nil || shaped(err) {
		return err
	}
	h.log().Warn("host operation failed", "step", step, "zone", s.ZoneName(), "kind", illumos.KindOf(err).String(), "err", err)
	return &Error{What: h.podStep(step, s), Err: err}
}

// podStep says which step on which pod, zone and node.
func (h *Host) podStep(step string, s hostapi.PodSandbox) string {
	return fmt.Sprintf("%s for pod %s/%s (zone %s) on node %s", step, s.Namespace, s.Name, s.ZoneName(), h.Node)
}

// invalid is a request the host refuses before running anything.
func (h *Host) invalid(ctx context.Context, step string, s hostapi.PodSandbox, err error) error {
	return h.fail(ctx, step, s, &InvalidError{Err: err})
}

// conflict is something on the host in the pod's way that is not the pod's.
func (h *Host) conflict(ctx context.Context, step string, s hostapi.PodSandbox, format string, args ...any) error {
	err := &Error{What: h.podStep(step, s), Err: &ConflictError{Reason: fmt.Sprintf(format, args...)}}
	h.log().Error("host operation conflict", "step", step, "zone", s.ZoneName(), "msg", err.Error())
	return err
}

// heartbeat reports progress every interval until the returned stop is
// called, so that a long command (zoneadm install) is seen to be alive.
// Without a progress callback in ctx it does nothing.
func (h *Host) heartbeat(ctx context.Context, details func() any) (stop func()) {
	report := progress.From(ctx)
	if report == nil {
		return func() {}
	}
	report(details())
	return progress.Every(ctx, h.heartbeatInterval(), func() { report(details()) })
}

// beat reports progress once (in polling loops).
func beat(ctx context.Context, details any) { progress.Report(ctx, details) }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
