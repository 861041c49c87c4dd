// Package agent is `zonewright agent`, the process each illumos host runs
// under SMF. It prepares the host (the zones' parent dataset and the
// etherstub pod VNICs sit on), registers the host as a Node, heartbeats,
// and runs the node's Temporal worker: the host activities on task queue
// node/<name>, which only this agent polls.
//
// Trust: registration and heartbeats write the Node row directly through
// the store, so the agent holds the control plane's database URL. That is
// no wider than the trust it already has: it runs, as root on its host,
// whatever host activities the control plane's workflows send it, and it
// reports the capacity the scheduler believes. Giving agents a narrower
// channel (node credentials on the API, or a control-plane activity that
// writes the Node) would remove the database credential from the hosts;
// the Node written is the same either way.
//
// Starting, after preparing the host and before registering (so before the
// node reports Ready) and before the worker polls, the agent removes the
// zonewright resources of pods no longer bound to its node and adopts the
// rest untouched (see cleanHost). Stopping (SIGTERM from SMF, or the
// context) stops the worker gracefully: running activities get up to
// Config.WorkerStopTimeout to finish. Zones keep running; the next agent
// adopts them, since every host activity finds its earlier work by name.
package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	tworker "go.temporal.io/sdk/worker"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/supervisor"
	"github.com/zonewright/zonewright/worker"
	"github.com/zonewright/zonewright/workflows"
)

// Defaults of the agent's settings.
const (
	DefaultEtherstub             = "zwstub0"
	DefaultStoragePool           = "tank"
	DefaultZonesPath             = "/zonewright/zones"
	DefaultImageDir              = "/var/zonewright/images"
	DefaultMaxPods               = 110
	DefaultMaxConcurrentInstalls = 4
	DefaultHeartbeatInterval     = 10 * time.Second
	DefaultWorkerStopTimeout     = 30 * time.Second
)

// DefaultZoneBrands are the brands a node offers unless told otherwise.
var DefaultZoneBrands = []string{"sparse", "ipkg", "lx", "bhyve"}

// ZonesDataset is the zones' parent dataset in pool.
func ZonesDataset(pool string) string { return pool + "/zonewright/zones" }

// ImagesDataset is where images received as ZFS streams (and bhyve disk
// images, as volumes) live in pool, each with its golden @base snapshot.
func ImagesDataset(pool string) string { return pool + "/zonewright/images" }

// VolumesDataset holds the per-pod volumes (bhyve boot disks cloned from
// images) in pool.
func VolumesDataset(pool string) string { return pool + "/zonewright/volumes" }

// Labels, annotations and the condition reason the agent writes.
const (
	LabelHostname       = "zonewright.io/hostname"
	AnnotationZones     = "zonewright.io/zones"                 // "running=3,installed=1"
	AnnotationAvailable = "zonewright.io/zones-available-bytes" // free space for zones
	ReasonAgentReady    = "AgentReady"
)

// Config is everything the agent needs.
type Config struct {
	Node        string // the Node's name
	DatabaseURL string

	TemporalAddress   string
	TemporalNamespace string
	TemporalTLS       *tls.Config // nil: plaintext

	PodCIDR      string
	Etherstub    string // default DefaultEtherstub
	ZonesDataset string // default ZonesDataset(DefaultStoragePool)
	ZonesPath    string // where ZonesDataset is mounted; default DefaultZonesPath
	ZoneBrands   []string
	// ImagesDataset and VolumesDataset: see activities.Host; defaults
	// ImagesDataset(DefaultStoragePool), VolumesDataset(DefaultStoragePool).
	ImagesDataset  string
	VolumesDataset string
	// ImageDir holds lx tarball images; default DefaultImageDir.
	ImageDir string
	// ZvolDir is the volumes' raw device directory; default
	// illumos.DefaultZvolDir.
	ZvolDir string
	MaxPods int

	SystemReservedMilliCPU int64
	SystemReservedMemory   int64 // bytes

	// BinDir is the directory of the illumos commands; empty runs them
	// from their standard places.
	BinDir string

	MaxConcurrentInstalls   int
	MaxConcurrentActivities int // see worker.NodeOptions
	HeartbeatInterval       time.Duration
	WorkerStopTimeout       time.Duration
	// ObserveEvery is how often the supervisor lists the zones and their
	// services; default supervisor.DefaultObserveEvery.
	ObserveEvery time.Duration
	// ReconcileInterval is how often the host is compared with the control
	// plane (orphans, drift); default DefaultReconcileInterval.
	ReconcileInterval time.Duration
	// OrphanGrace is how long an orphan is reported before it is removed;
	// default DefaultOrphanGrace.
	OrphanGrace time.Duration

	// Version is reported as nodeInfo.agentVersion; empty means the
	// binary's build information.
	Version string
	Logger  *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Etherstub == "" {
		c.Etherstub = DefaultEtherstub
	}
	if c.ZonesDataset == "" {
		c.ZonesDataset = ZonesDataset(DefaultStoragePool)
	}
	if c.ZonesPath == "" {
		c.ZonesPath = DefaultZonesPath
	}
	if c.ImagesDataset == "" {
		c.ImagesDataset = ImagesDataset(DefaultStoragePool)
	}
	if c.VolumesDataset == "" {
		c.VolumesDataset = VolumesDataset(DefaultStoragePool)
	}
	if c.ImageDir == "" {
		c.ImageDir = DefaultImageDir
	}
	if c.ZvolDir == "" {
		c.ZvolDir = illumos.DefaultZvolDir
	}
	if len(c.ZoneBrands) == 0 {
		c.ZoneBrands = DefaultZoneBrands
	}
	if c.MaxPods <= 0 {
		c.MaxPods = DefaultMaxPods
	}
	if c.MaxConcurrentInstalls <= 0 {
		c.MaxConcurrentInstalls = DefaultMaxConcurrentInstalls
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.WorkerStopTimeout <= 0 {
		c.WorkerStopTimeout = DefaultWorkerStopTimeout
	}
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	if c.OrphanGrace <= 0 {
		c.OrphanGrace = DefaultOrphanGrace
	}
	if c.Version == "" {
		c.Version = buildVersion()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("a node name is required (--node)"))
	} else if f := model.ValidateNode(&model.Node{Metadata: model.ObjectMeta{Name: c.Node}}); len(f) > 0 {
		errs = append(errs, fmt.Errorf("node name %q: %v", c.Node, f))
	}
	if c.DatabaseURL == "" {
		errs = append(errs, errors.New("a database URL is required (--database-url)"))
	}
	if c.TemporalAddress == "" {
		errs = append(errs, errors.New("a Temporal address is required (--temporal-address)"))
	}
	if c.PodCIDR == "" {
		errs = append(errs, errors.New("the node's pod CIDR is required (--pod-cidr)"))
	} else if p, err := netip.ParsePrefix(c.PodCIDR); err != nil || p.Masked() != p {
		errs = append(errs, fmt.Errorf("pod CIDR %q is not a network such as 10.88.1.0/24", c.PodCIDR))
	}
	if !illumos.ValidLinkName(c.Etherstub) {
		errs = append(errs, fmt.Errorf("etherstub %q is not a valid link name (letters, digits, '_', ending in a digit)", c.Etherstub))
	}
	for what, ds := range map[string]string{"zones": c.ZonesDataset, "images": c.ImagesDataset, "volumes": c.VolumesDataset} {
		if !illumos.ValidDatasetName(ds) {
			errs = append(errs, fmt.Errorf("%s dataset %q is not a dataset name", what, ds))
		}
	}
	for what, dir := range map[string]string{"image dir": c.ImageDir, "zvol dir": c.ZvolDir} {
		if !filepath.IsAbs(dir) {
			errs = append(errs, fmt.Errorf("%s %q must be an absolute path", what, dir))
		}
	}
	if !strings.HasPrefix(c.ZonesPath, "/") || c.ZonesPath == "/" {
		errs = append(errs, fmt.Errorf("zones path %q must be an absolute path other than /", c.ZonesPath))
	}
	for _, b := range c.ZoneBrands {
		if b == "" || len(model.ValidateMeta(&model.ObjectMeta{Name: "n", Labels: map[string]string{model.LabelNodeBrandPrefix + b: "true"}}, false)) > 0 {
			errs = append(errs, fmt.Errorf("zone brand %q is not a valid name", b))
		}
	}
	if c.SystemReservedMilliCPU < 0 || c.SystemReservedMemory < 0 {
		errs = append(errs, errors.New("system reservations cannot be negative"))
	}
	return errors.Join(errs...)
}

// Agent is one running node agent.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	host  illumos.Host
	st    *store.Store
	facts illumos.HostFacts

	mu        sync.Mutex
	workerErr error // why the worker is not polling yet; nil once it is
}

// Run runs the agent until ctx ends, then stops it gracefully and returns
// nil. It returns an error when the host cannot be prepared or the
// configuration is wrong.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.With("node", cfg.Node)}
	a.host = illumos.Host{Runner: &illumos.Runner{BinDir: cfg.BinDir, Logger: a.log}}
	err := a.run(ctx)
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil // stopped while starting: not a failure
	}
	return err
}

func (a *Agent) run(ctx context.Context) error {
	cfg := a.cfg
	if err := a.prepareHost(ctx); err != nil {
		return err
	}
	facts, err := retry(ctx, a.log, "read host facts", func() (illumos.HostFacts, error) {
		return a.host.Facts(ctx, cfg.ZonesDataset)
	})
	if err != nil {
		return fmt.Errorf("read host facts: %w", err)
	}
	a.facts = facts

	if a.st, err = openStore(ctx, cfg.DatabaseURL, a.log); err != nil {
		return err
	}
	defer a.st.Close()

	h := &activities.Host{
		Host:           a.host,
		Node:           cfg.Node,
		Etherstub:      cfg.Etherstub,
		ZonesDataset:   cfg.ZonesDataset,
		ZonesPath:      cfg.ZonesPath,
		ImagesDataset:  cfg.ImagesDataset,
		VolumesDataset: cfg.VolumesDataset,
		ImageDir:       cfg.ImageDir,
		ZvolDir:        cfg.ZvolDir,
		Log:            a.log.With("component", "host"),
	}
	if cfg.MaxConcurrentInstalls > 0 {
		h.Installs = make(chan struct{}, cfg.MaxConcurrentInstalls)
	}
	if cfg.BinDir == "" {
		// The commands act on this machine: give zonepaths the mode
		// zoneadm install demands. (With another command directory the
		// zonepaths are not ours to chmod.)
		h.PrepareZonepath = func(p string) error { return os.Chmod(p, 0o700) }
	}

	// Before the node reports Ready and before its worker polls: remove
	// what belongs to pods no longer bound here, adopt the rest.
	if _, err := a.cleanHost(ctx, h, "at agent start"); err != nil {
		return err
	}

	node, err := a.sync(ctx, a.summary(ctx))
	if err != nil {
		return fmt.Errorf("register node %s: %w", cfg.Node, err)
	}
	a.log.Info("node registered", "uid", node.Metadata.UID, "cpus", facts.CPUs, "memory", facts.MemoryBytes,
		"allocatable", node.Status.Allocatable, "brands", cfg.ZoneBrands, "podCIDR", cfg.PodCIDR)

	opts := client.Options{
		HostPort:  cfg.TemporalAddress,
		Namespace: cfg.TemporalNamespace,
		Logger:    sdklog.NewStructuredLogger(a.log.With("component", "temporal")),
	}
	opts.ConnectionOptions.TLS = cfg.TemporalTLS
	tc, err := client.NewLazyClient(opts)
	if err != nil {
		return fmt.Errorf("Temporal client: %w", err)
	}
	defer tc.Close()

	// The supervisor watches the pods running here before the worker
	// takes new ones, so an agent restart loses no probe state.
	sup := supervisor.New(supervisor.Config{Node: cfg.Node, Host: supervisor.IllumosHost{Host: a.host},
		Reporter: lifecycleReporter{tc: tc}, ObserveEvery: cfg.ObserveEvery, Log: a.log})
	h.Supervisor = sup
	if err := a.superviseBound(ctx, sup, true); err != nil {
		return fmt.Errorf("list the pods bound to node %s: %w", cfg.Node, err)
	}
	supCtx, stopSupervising := context.WithCancel(ctx)
	defer stopSupervising()
	go sup.Run(supCtx)
	go a.reconcileHost(supCtx, h, sup, workflows.PodClient{Temporal: tc})

	workerCtx, stopStarting := context.WithCancel(ctx)
	defer stopStarting()
	started := make(chan tworker.Worker, 1)
	go func() { started <- a.startWorker(workerCtx, tc, h) }()

	a.heartbeat(ctx, h, sup)

	stopStarting()
	if w := <-started; w != nil {
		a.log.Info("stopping the worker", "timeout", cfg.WorkerStopTimeout)
		w.Stop() // waits for running activities up to WorkerStopTimeout
	}
	a.log.Info("agent stopped; zones keep running")
	return nil
}

// prepareHost makes the zones' parent dataset and the etherstub exist.
func (a *Agent) prepareHost(ctx context.Context) error {
	cfg := a.cfg
	zfs, dl := a.host.ZFS(), a.host.Dladm()
	if _, err := retry(ctx, a.log, "create the zones dataset", func() (struct{}, error) {
		return struct{}{}, zfs.Create(ctx, cfg.ZonesDataset, map[string]string{"mountpoint": cfg.ZonesPath})
	}); err != nil {
		return fmt.Errorf("create the zones dataset %s: %w", cfg.ZonesDataset, err)
	}
	if mp, err := zfs.Get(ctx, cfg.ZonesDataset, "mountpoint"); err == nil && mp != cfg.ZonesPath {
		// Zone datasets get their mountpoints explicitly, so this works;
		// but the operator chose another place, and we leave it.
		a.log.Warn("the zones dataset is mounted elsewhere than the zones path; zone datasets are mounted under the zones path",
			"dataset", cfg.ZonesDataset, "mountpoint", mp, "zonesPath", cfg.ZonesPath)
	}
	// The parents of images (received streams, disk volumes) and of the
	// pods' volumes; the directory of lx tarballs.
	for _, ds := range []string{cfg.ImagesDataset, cfg.VolumesDataset} {
		if _, err := retry(ctx, a.log, "create dataset "+ds, func() (struct{}, error) {
			return struct{}{}, zfs.Create(ctx, ds, nil)
		}); err != nil {
			return fmt.Errorf("create the dataset %s: %w", ds, err)
		}
	}
	if err := os.MkdirAll(cfg.ImageDir, 0o755); err != nil {
		return fmt.Errorf("create the image directory: %w", err)
	}
	if _, err := retry(ctx, a.log, "create the etherstub", func() (struct{}, error) {
		ok, err := dl.EtherstubExists(ctx, cfg.Etherstub)
		if err != nil || ok {
			return struct{}{}, err
		}
		err = dl.CreateEtherstub(ctx, cfg.Etherstub)
		if errors.Is(err, illumos.ErrAlreadyExists) {
			return struct{}{}, nil
		}
		return struct{}{}, err
	}); err != nil {
		return fmt.Errorf("create the etherstub %s: %w", cfg.Etherstub, err)
	}
	return nil
}

// retry runs fn until it succeeds, fails for good (not retryable) or has
// failed five times.
func retry[T any](ctx context.Context, log *slog.Logger, what string, fn func() (T, error)) (T, error) {
	var v T
	var err error
	for attempt := 1; ; attempt++ {
		if v, err = fn(); err == nil || !illumos.IsRetryable(err) || attempt == 5 || ctx.Err() != nil {
			return v, err
		}
		log.Warn("retrying", "what", what, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
}

// openStore opens the database, waiting for it to come up.
func openStore(ctx context.Context, url string, log *slog.Logger) (*store.Store, error) {
	for attempt := 0; ; attempt++ {
		err := store.Reachable(ctx, url)
		if err == nil {
			return store.Open(ctx, url)
		}
		if !errors.Is(err, store.ErrUnavailable) {
			return nil, err
		}
		if attempt%10 == 0 {
			log.Warn("waiting for the database", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// startWorker starts the node's worker, retrying until Temporal answers.
// It returns the running worker, or nil when ctx ends first.
func (a *Agent) startWorker(ctx context.Context, tc client.Client, h *activities.Host) tworker.Worker {
	for attempt := 0; ; attempt++ {
		w := worker.NewNode(tc, h, worker.NodeOptions{
			MaxConcurrentActivities: a.cfg.MaxConcurrentActivities,
			StopTimeout:             a.cfg.WorkerStopTimeout,
		})
		err := w.Start()
		a.mu.Lock()
		a.workerErr = err
		a.mu.Unlock()
		if err == nil {
			a.log.Info("node worker polling", "taskQueue", "node/"+a.cfg.Node, "temporal", a.cfg.TemporalAddress)
			return w
		}
		if attempt%10 == 0 {
			a.log.Warn("Temporal not reachable yet; the node worker will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// heartbeat updates the Node every interval until ctx ends. A node the
// control plane declared lost while this agent kept running (a network
// partition, a frozen process) is cleaned before it reports Ready again:
// its evicted pods may run elsewhere by now.
func (a *Agent) heartbeat(ctx context.Context, h *activities.Host, sup *supervisor.Supervisor) {
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if a.declaredLost(ctx) {
			if _, err := a.cleanHost(ctx, h, "on the node's return"); err != nil && ctx.Err() == nil {
				a.log.Warn("cleaning the host on the node's return failed; the reconciler will remove what is left", "err", err)
			}
			if err := a.superviseBound(ctx, sup, true); err != nil && ctx.Err() == nil {
				a.log.Warn("list the pods bound to this node", "err", err)
			}
		}
		hctx, cancel := context.WithTimeout(ctx, a.cfg.HeartbeatInterval+10*time.Second)
		if _, err := a.sync(hctx, a.summary(hctx)); err != nil && ctx.Err() == nil {
			a.log.Warn("node heartbeat failed", "err", err)
		}
		cancel()
	}
}

// declaredLost reports whether the Node's Ready condition is other than
// True: only the control plane's node health sets it so.
func (a *Agent) declaredLost(ctx context.Context) bool {
	n, err := a.st.Nodes().Get(ctx, "", a.cfg.Node)
	if err != nil {
		return false // the heartbeat reports the trouble
	}
	c := n.Condition(model.NodeReady)
	return c != nil && c.Status != model.ConditionTrue
}

// hostSummary is what each heartbeat reports besides being alive.
type hostSummary struct {
	zones     string // "running=3,installed=1", "" when unknown
	available string // bytes free for zones, "" when unknown
}

// summary counts the host's zones by state and reads the zones' free space.
func (a *Agent) summary(ctx context.Context) hostSummary {
	var s hostSummary
	if zones, err := a.host.Zoneadm().List(ctx); err != nil {
		a.log.Warn("list zones", "err", err)
	} else {
		s.zones = ZoneSummary(zones)
	}
	if v, err := a.host.ZFS().Get(ctx, a.cfg.ZonesDataset, "available"); err != nil {
		a.log.Warn("read the zones dataset's free space", "err", err)
	} else {
		s.available = v
	}
	return s
}

// ZoneSummary counts non-global zones by state: "running=3,installed=1"
// (states in alphabetical order), "none" when there are none.
func ZoneSummary(zones []illumos.Zone) string {
	counts := map[string]int{}
	for _, z := range zones {
		if z.Name != "global" {
			counts[string(z.State)]++
		}
	}
	if len(counts) == 0 {
		return "none"
	}
	states := make([]string, 0, len(counts))
	for s := range counts {
		states = append(states, s)
	}
	sort.Strings(states)
	parts := make([]string, len(states))
	for i, s := range states {
		parts[i] = s + "=" + strconv.Itoa(counts[s])
	}
	return strings.Join(parts, ",")
}

// sync writes the Node as this agent sees it, creating it if it is
// missing (a first start, or an operator deleted it), retrying on
// conflicting writes.
func (a *Agent) sync(ctx context.Context, sum hostSummary) (*model.Node, error) {
	nodes := a.st.Nodes()
	for range 10 {
		now := time.Now().UTC()
		n, err := nodes.Get(ctx, "", a.cfg.Node)
		if errors.Is(err, store.ErrNotFound) {
			n = &model.Node{Metadata: model.ObjectMeta{Name: a.cfg.Node}}
			model.DefaultNode(n)
			a.apply(n, now, sum)
			err = nodes.Create(ctx, n)
			if errors.Is(err, store.ErrAlreadyExists) {
				continue // registered concurrently: update it
			}
			return n, err
		}
		if err != nil {
			return nil, err
		}
		a.apply(n, now, sum)
		err = nodes.Update(ctx, n)
		if errors.Is(err, store.ErrConflict) {
			continue // someone else wrote it (an operator's label): read again
		}
		return n, err
	}
	return nil, errors.New("the node kept changing under the agent's writes")
}

// apply sets what the agent owns on n: capacity, allocatable, node info,
// addresses, pod CIDR, its labels, the Ready condition and the summary
// annotations. Everything else (taints, unschedulable, other labels) is
// the operator's and stays.
func (a *Agent) apply(n *model.Node, now time.Time, sum hostSummary) {
	cfg, f := a.cfg, a.facts
	if n.Spec.PodCIDR != "" && n.Spec.PodCIDR != cfg.PodCIDR {
		a.log.Warn("the node's pod CIDR changes; addresses allocated from the old one stay until their pods go",
			"old", n.Spec.PodCIDR, "new", cfg.PodCIDR)
	}
	n.Spec.PodCIDR = cfg.PodCIDR

	capCPU := int64(f.CPUs) * 1000
	capMem := int64(f.MemoryBytes)
	n.Status.Capacity = model.ResourceList{
		model.ResourceCPU:    FormatMilliCPU(capCPU),
		model.ResourceMemory: FormatBytes(capMem),
		model.ResourcePods:   strconv.Itoa(cfg.MaxPods),
	}
	n.Status.Allocatable = model.ResourceList{
		model.ResourceCPU:    FormatMilliCPU(max(capCPU-cfg.SystemReservedMilliCPU, 0)),
		model.ResourceMemory: FormatBytes(max(capMem-cfg.SystemReservedMemory, 0)),
		model.ResourcePods:   strconv.Itoa(cfg.MaxPods),
	}
	n.Status.NodeInfo = model.NodeInfo{
		OSRelease:    f.Uname.Version,
		KernelVer:    strings.TrimSpace(f.Uname.Sysname + " " + f.Uname.Release),
		AgentVersion: cfg.Version,
		ZoneBrands:   append([]string(nil), cfg.ZoneBrands...),
	}
	if f.Hostname != "" {
		n.Status.Addresses = []model.NodeAddress{{Type: "Hostname", Address: f.Hostname}}
	}

	if n.Metadata.Labels == nil {
		n.Metadata.Labels = map[string]string{}
	}
	for k := range n.Metadata.Labels {
		if strings.HasPrefix(k, model.LabelNodeBrandPrefix) {
			delete(n.Metadata.Labels, k) // brands no longer offered go
		}
	}
	for _, b := range cfg.ZoneBrands {
		n.Metadata.Labels[model.LabelNodeBrandPrefix+b] = "true"
	}
	if v := labelValue(f.Hostname); v != "" {
		n.Metadata.Labels[LabelHostname] = v
	}
	if n.Metadata.Annotations == nil {
		n.Metadata.Annotations = map[string]string{}
	}
	if sum.zones != "" {
		n.Metadata.Annotations[AnnotationZones] = sum.zones
	}
	if sum.available != "" {
		n.Metadata.Annotations[AnnotationAvailable] = sum.available
	}

	a.mu.Lock()
	workerErr := a.workerErr
	a.mu.Unlock()
	msg := "zonewright agent is posting heartbeats"
	if workerErr != nil {
		msg += "; its worker is not polling Temporal yet: " + workerErr.Error()
	}
	model.SetCondition(&n.Status.Conditions, model.NodeCondition{
		Type: model.NodeReady, Status: model.ConditionTrue, Reason: ReasonAgentReady, Message: msg, LastHeartbeatTime: &now,
	}, now)
}

// FormatMilliCPU renders millicores as a quantity: "8", "7500m".
func FormatMilliCPU(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}

// FormatBytes renders bytes as a quantity in the largest binary unit that
// divides them exactly: "32Gi", "1536Mi", "1000".
func FormatBytes(b int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30}, {"Mi", 20}, {"Ki", 10}} {
		if b != 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatInt(b>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}

// labelValue makes s a valid label value (at most 63 characters of
// [A-Za-z0-9._-], alphanumeric at both ends), or "".
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	v := string(b)
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "._-")
}

// buildVersion is the binary's version from its build information.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}
