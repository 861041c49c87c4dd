package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/supervisor"
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
	// ImageKind is the catalog kind of Image (model.ImageLXTarball, …);
	// empty when the pod names no catalog image.
	ImageKind string
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

// ContainerProbes are one container's probes; nil: none of that kind.
type ContainerProbes struct {
	Name                         string
	Startup, Liveness, Readiness *model.Probe
}

// Supervisor is the node's pod supervisor, as the host activities see it
// (internal/supervisor).
type Supervisor interface {
	Watch(p supervisor.Pod, initial map[string]supervisor.Initial) uint64
	Restarted(uid, container string) uint64
	Forget(uid string)
}

// Host holds the host activities of one node: every change they make goes
// through the illumos commands. Only that node's agent runs them, on its
// task queue node/<name>.
//
// Every exported method is an activity (RegisterActivity(h) registers them
// by method name), and every one is idempotent: names derive from the
// sandbox (see PodSandbox.ZoneName), so a retry, or a re-run after a crash,
// finds the work already done and succeeds.
//
// Errors: a request that cannot succeed however often it is tried
// (illumos.ErrInvalid: a bad name, a usage error, a value zonecfg refuses)
// is a non-retryable ApplicationError of type "Invalid"; something on the
// host that is in the way and is not ours (a VNIC of the pod's name over
// another link, a zone of the pod's name belonging to another pod) is a
// non-retryable "Conflict". Everything else is a retryable ApplicationError
// whose type is the illumos kind ("NotFound", "AlreadyExists",
// "WrongState", "Busy", "Transient", "Unknown"), or "ContainerMaintenance"
// from WaitContainersOnline. Messages name the step, the zone, the attempt,
// and the failed command's argv and stderr.
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
	// PrepareZonepath, if set, runs on the zonepath once the zone's dataset
	// exists and is mounted. zoneadm install wants the zonepath owned by
	// root with mode 0700 while zfs create makes it 0755, so on illumos the
	// agent sets this to a chmod. Nil when the commands do not run against
	// this machine's filesystem (a --bin-dir pointing elsewhere).
	PrepareZonepath func(zonepath string) error
	// PollInterval is how often the waiting activities (WaitContainersOnline,
	// ShutdownZone) look again; zero means 500ms.
	PollInterval time.Duration
	// StepRetry is the first wait before a provision step that failed
	// transiently is tried again (doubling up to 30s); zero means 1s.
	StepRetry time.Duration
	// HeartbeatInterval is how often long commands heartbeat; zero means 5s.
	HeartbeatInterval time.Duration
	// DownloadStallTimeout ends an image download that receives nothing
	// for that long; zero means a minute.
	DownloadStallTimeout time.Duration

	mu    sync.Mutex
	zones map[string]*zoneLock
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

// ZoneName is the pod's zone name on its node.
func (s PodSandbox) ZoneName() string { return illumos.ZoneName(s.Namespace, s.Name, s.UID) }

// VNICName is the pod's VNIC (it ends in a digit, as dladm wants).
func (s PodSandbox) VNICName() string { return illumos.LinkName("zw", s.UID) }

// check refuses a sandbox that cannot name a zone or address it.
func (s PodSandbox) check() error {
	if s.Namespace == "" || s.Name == "" || s.UID == "" {
		return fmt.Errorf("sandbox needs a namespace, a name and a uid (got %q, %q, %q)", s.Namespace, s.Name, s.UID)
	}
	return nil
}

// checkNet refuses an address the zone cannot be given.
func (s PodSandbox) checkNet() (netip.Prefix, error) {
	ip, err := netip.ParseAddr(s.IP)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("pod IP %q is not an address", s.IP)
	}
	if s.PrefixLen <= 0 || s.PrefixLen > ip.BitLen() {
		return netip.Prefix{}, fmt.Errorf("prefix length %d is out of range for %s", s.PrefixLen, s.IP)
	}
	if s.Gateway != "" {
		if _, err := netip.ParseAddr(s.Gateway); err != nil {
			return netip.Prefix{}, fmt.Errorf("gateway %q is not an address", s.Gateway)
		}
	}
	return netip.PrefixFrom(ip, s.PrefixLen), nil
}

// zonepath is the zone's zonepath: the mountpoint of its dataset.
func (h *Host) zonepath(s PodSandbox) string { return path.Join(h.ZonesPath, s.ZoneName()) }

// dataset is the zone's dataset.
func (h *Host) dataset(s PodSandbox) (string, error) {
	return illumos.DatasetName(h.ZonesDataset, s.ZoneName())
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

// Error types of the ApplicationErrors host activities return.
const (
	ErrTypeInvalid              = "Invalid"
	ErrTypeConflict             = "Conflict"
	ErrTypeContainerMaintenance = "ContainerMaintenance"
)

// kindErrType is the ApplicationError type of a retryable illumos failure.
var kindErrType = map[illumos.Kind]string{
	illumos.KindUnknown:       "Unknown",
	illumos.KindNotFound:      "NotFound",
	illumos.KindAlreadyExists: "AlreadyExists",
	illumos.KindWrongState:    "WrongState",
	illumos.KindBusy:          "Busy",
	illumos.KindTransient:     "Transient",
}

// attemptKey carries a step's own try number within a provision.
type attemptKey struct{}

func withAttempt(ctx context.Context, n int32) context.Context {
	return context.WithValue(ctx, attemptKey{}, n)
}

// attempt is the step's try within a provision, else the activity's
// attempt number (1 outside an activity).
func attempt(ctx context.Context) int32 {
	if n, ok := ctx.Value(attemptKey{}).(int32); ok {
		return n
	}
	if !activity.IsActivity(ctx) {
		return 1
	}
	return activity.GetInfo(ctx).Attempt
}

// fail turns the failure of step on the sandbox's zone into the error the
// activity returns: non-retryable when the request is invalid, retryable
// otherwise, the message saying what a person needs to act on.
func (h *Host) fail(ctx context.Context, step string, s PodSandbox, err error) error {
	if err == nil {
		return nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return err // already shaped (conflicts, maintenance)
	}
	kind := illumos.KindOf(err)
	msg := fmt.Sprintf("%s for pod %s/%s (zone %s) on node %s, attempt %d: %v",
		step, s.Namespace, s.Name, s.ZoneName(), h.Node, attempt(ctx), err)
	h.log().Warn("host activity failed", "step", step, "zone", s.ZoneName(), "kind", kind.String(), "attempt", attempt(ctx), "err", err)
	// The message carries the whole story (argv, stderr); a cause would
	// only repeat it in the error's text on the workflow side.
	if kind == illumos.KindInvalid {
		return temporal.NewNonRetryableApplicationError(msg, ErrTypeInvalid, nil)
	}
	return temporal.NewApplicationError(msg, kindErrType[kind])
}

// invalid is a request the host refuses before running anything.
func (h *Host) invalid(ctx context.Context, step string, s PodSandbox, err error) error {
	return h.fail(ctx, step, s, &illumos.Error{Op: step, Subject: s.ZoneName(), Kind: illumos.KindInvalid, Err: err})
}

// conflict is something on the host in the pod's way that is not the pod's.
func (h *Host) conflict(ctx context.Context, step string, s PodSandbox, format string, args ...any) error {
	msg := fmt.Sprintf("%s for pod %s/%s (zone %s) on node %s, attempt %d: %s",
		step, s.Namespace, s.Name, s.ZoneName(), h.Node, attempt(ctx), fmt.Sprintf(format, args...))
	h.log().Error("host activity conflict", "step", step, "zone", s.ZoneName(), "msg", msg)
	return temporal.NewNonRetryableApplicationError(msg, ErrTypeConflict, nil)
}

// heartbeat records a heartbeat every interval until the returned stop is
// called, so that a long command (zoneadm install) is seen to be alive.
func (h *Host) heartbeat(ctx context.Context, details func() any) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(h.heartbeatInterval())
		defer t.Stop()
		for {
			activity.RecordHeartbeat(ctx, details())
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// beat records one heartbeat (in polling loops).
func beat(ctx context.Context, details any) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, details)
	}
}

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
