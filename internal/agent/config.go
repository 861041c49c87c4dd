package agent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/clusterdns"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/version"
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
	DefaultCertCheckInterval     = time.Hour
	DefaultWorkerStopTimeout     = 30 * time.Second
	// DefaultZoneMaxProcesses and DefaultZoneMaxLWPs bound every zone of
	// a node (zonecfg max-processes, max-lwps) unless the agent is told
	// otherwise: a fork bomb in one pod stops there, not at the host's
	// process table.
	DefaultZoneMaxProcesses = 4096
	DefaultZoneMaxLWPs      = 16384
	// DefaultListen is the agent endpoint's address (`zonewright agent
	// --listen`): the port a kubelet serves on.
	DefaultListen = ":10250"
	// DefaultProvisionRetry is the first wait before a provision step
	// that failed transiently is tried again (doubling up to 30s).
	DefaultProvisionRetry = time.Second
	// DefaultServiceNATCheckInterval is how often the host's service NAT
	// rules are checked against the snapshot: an ipfilter refresh (which
	// wipes them) is repaired within about this long.
	DefaultServiceNATCheckInterval = 2 * time.Second
)

// GatewayLink is the global zone's VNIC on the etherstub that holds the
// pods' gateway address (the pod CIDR's first address, their default
// router). Pod traffic enters the global zone by it, so the service rdr
// rules name it: rdr applies to packets arriving inbound on its interface
// (spec 10.9).
const GatewayLink = "zwgw0"

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

// Config is everything the agent needs.
type Config struct {
	Node string // the Node's name

	TemporalAddress   string
	TemporalNamespace string
	TemporalTLS       *tls.Config // nil: plaintext; without a certificate: the node's own (its join)

	// PodCIDR asks the control plane for this pod network (granted unless
	// another node holds an overlapping one); empty: the control plane
	// assigns one from its cluster range. A Node that already holds
	// another keeps it: the agent uses the assigned one and reports the
	// disagreement (ConditionPodCIDRMismatch).
	PodCIDR      string
	Etherstub    string // default DefaultEtherstub
	ZonesDataset string // default ZonesDataset(DefaultStoragePool)
	ZonesPath    string // where ZonesDataset is mounted; default DefaultZonesPath
	ZoneBrands   []string
	// ImagesDataset and VolumesDataset: see hostops.Host; defaults
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

	// ZoneQuota is the quota of a zone dataset whose pod asks for no
	// ephemeral-storage, bytes; 0: none.
	ZoneQuota int64
	// ZoneMaxProcesses and ZoneMaxLWPs limit every zone of the node; a
	// pod's annotations may ask for less. 0: no limit.
	ZoneMaxProcesses, ZoneMaxLWPs int64

	MaxConcurrentInstalls   int
	MaxConcurrentActivities int // see nodeworker.Options
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
	// ProvisionRetry is the first wait before a provision step that
	// failed transiently is tried again; default DefaultProvisionRetry.
	ProvisionRetry time.Duration

	// APIURL is the control plane's base URL (https://host:8080): the
	// agent registers, renews its lease, reports its pods and follows the
	// service network there. Required.
	APIURL string
	// APICAFile is the CA certificate the API's server certificate chains
	// to (the cluster CA, tls/ca.crt of the control plane's state
	// directory); empty: the system's roots.
	APICAFile string
	// HTTPClient makes every call to the API; nil: one built by
	// newAPIClient from APICAFile, presenting the node's certificate.
	HTTPClient *http.Client
	// Metrics is the registry the agent's metrics go in (its
	// MetricsHandler serves it); nil: one of its own, with the Go
	// runtime's and the process's collectors. One registry serves one
	// agent run.
	Metrics *prometheus.Registry
	// StateDir keeps the node's key and the certificate it got when it
	// joined the cluster (NodeCredential).
	StateDir string
	// JoinTokenFile holds the join token, read only when StateDir holds no
	// certificate for this node yet.
	JoinTokenFile string
	// Listen is where the agent's endpoint (logs and exec, for the control
	// plane only) listens, host:port; port 0 picks a free one. Empty: no
	// endpoint (then the node's pods have no logs or exec).
	Listen string
	// AdvertiseAddress is the IP address the control plane reaches the
	// endpoint at, reported as the node's InternalIP; empty: Listen's host
	// if it names one, else the address this host reaches the API from.
	AdvertiseAddress string
	// ServiceNATCheckInterval: see DefaultServiceNATCheckInterval.
	ServiceNATCheckInterval time.Duration
	// NodeRouteInterval: see DefaultNodeRouteInterval.
	NodeRouteInterval time.Duration
	// CertCheckInterval is how often the agent looks whether its
	// certificate is due for renewal; default DefaultCertCheckInterval.
	CertCheckInterval time.Duration
	// CertRenewBefore, when set, renews the certificate once less than
	// this is left; default: once two thirds of its life have passed.
	CertRenewBefore time.Duration
	// ClusterDomain is the cluster's DNS domain, the same as the control
	// plane's; default clusterdns.DefaultDomain. The agent answers the cluster DNS on the pods' gateway (port 53) from
	// the service network it follows, and every zone's resolv.conf points
	// there.
	ClusterDomain string
	// DNSUpstreams are the resolvers of names outside the cluster domain
	// (see clusterdns.Config.Upstreams); nil: the host's resolv.conf.
	DNSUpstreams []string
	// ZonesDir is where this machine's filesystem holds ZonesPath; empty:
	// ZonesPath (see hostops.Host.ZonesDir).
	ZonesDir string

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
	if c.CertCheckInterval <= 0 {
		c.CertCheckInterval = DefaultCertCheckInterval
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
	if c.ProvisionRetry <= 0 {
		c.ProvisionRetry = DefaultProvisionRetry
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = clusterdns.DefaultDomain
	}
	if c.NodeRouteInterval <= 0 {
		c.NodeRouteInterval = DefaultNodeRouteInterval
	}
	if c.ServiceNATCheckInterval <= 0 {
		c.ServiceNATCheckInterval = DefaultServiceNATCheckInterval
	}
	if c.Version == "" {
		c.Version = version.String()
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
	if c.TemporalAddress == "" {
		errs = append(errs, errors.New("a Temporal address is required (--temporal-address)"))
	}
	// Without one, the control plane assigns the pod CIDR.
	if p, err := netip.ParsePrefix(c.PodCIDR); c.PodCIDR != "" && (err != nil || p.Masked() != p) {
		errs = append(errs, fmt.Errorf("pod CIDR %q is not a network such as 10.88.1.0/24", c.PodCIDR))
	}
	if !names.ValidLinkName(c.Etherstub) {
		errs = append(errs, fmt.Errorf("etherstub %q is not a valid link name (letters, digits, '_', ending in a digit)", c.Etherstub))
	}
	for what, ds := range map[string]string{"zones": c.ZonesDataset, "images": c.ImagesDataset, "volumes": c.VolumesDataset} {
		if !names.ValidDatasetName(ds) {
			errs = append(errs, fmt.Errorf("%s dataset %q is not a dataset name", what, ds))
		}
	}
	for what, dir := range map[string]string{"image dir": c.ImageDir, "zvol dir": c.ZvolDir, "zones dir": c.ZonesDir} {
		if dir != "" && !filepath.IsAbs(dir) {
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
	if c.APIURL == "" {
		errs = append(errs, errors.New("the control plane's API URL is required (--api-url)"))
	} else if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("API URL %q is not an http(s) URL such as https://control-plane:8080", c.APIURL))
	}
	if c.Listen != "" {
		if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("listen address %q is not host:port such as :10250", c.Listen))
		}
	}
	if c.AdvertiseAddress != "" && net.ParseIP(c.AdvertiseAddress) == nil {
		errs = append(errs, fmt.Errorf("advertise address %q is not an IP address", c.AdvertiseAddress))
	}
	if err := clusterdns.CheckDomain(c.ClusterDomain); err != nil {
		errs = append(errs, err)
	}
	if err := clusterdns.CheckUpstreams(c.DNSUpstreams); err != nil {
		errs = append(errs, err)
	}
	if c.SystemReservedMilliCPU < 0 || c.SystemReservedMemory < 0 {
		errs = append(errs, errors.New("system reservations cannot be negative"))
	}
	return errors.Join(errs...)
}
