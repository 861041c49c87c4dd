package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	nodeagent "github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/clusterdns"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
)

// agentOptions are agent's flags, as given (quantities and numbers are
// parsed after flag.Parse so that a bad environment value is reported
// like a bad flag).
type agentOptions struct {
	temporal       controlplane.Config
	node           string
	apiURL         string
	apiCA          string
	stateDir       string
	joinTokenFile  string
	listen         string
	advertiseAddr  string
	clusterDomain  string
	dnsUpstream    string
	zonesDir       string
	podCIDR        string
	etherstub      string
	pool           string
	zonesDataset   string
	zonesPath      string
	brands         string
	imageDir       string
	imagesDataset  string
	volumesDataset string
	zvolDir        string
	maxPods        string
	reservedCPU    string
	reservedMemory string
	zoneQuota      string
	zoneMaxProcs   string
	zoneMaxLWPs    string
	binDir         string
	installs       string
	heartbeat      string
	reconcile      string
	nodeRoutes     string
	orphanGrace    string
	provisionRetry string
	shutdown       string
	logLevel       string
}

func agentFlags() (*flag.FlagSet, *agentOptions) {
	fs := flag.NewFlagSet("agent", flag.ExitOnError)
	o := &agentOptions{}
	hostname, _ := os.Hostname()
	if i := strings.IndexByte(hostname, '.'); i > 0 {
		hostname = hostname[:i]
	}
	fs.StringVar(&o.node, "node", env("ZW_NODE", strings.ToLower(hostname)), "this node's name (env ZW_NODE; default the host name)")
	temporalFlags(fs, &o.temporal)
	fs.StringVar(&o.apiURL, "api-url", env("ZW_API_URL", ""), "the control plane's base URL, e.g. https://control-plane:8080: the node registers, renews its lease, reports its pods and follows the service network there (required; env ZW_API_URL)")
	fs.StringVar(&o.apiCA, "api-ca", env("ZW_API_CA", ""), "the CA certificate the API's server certificate chains to: the control plane's <state-dir>/tls/ca.crt; empty: the system's roots (env ZW_API_CA)")
	fs.StringVar(&o.stateDir, "state-dir", env("ZW_STATE_DIR", "/var/lib/zonewright/agent"), "keeps the node's key and the certificates it got when it joined the cluster (node.key, node.crt, node-serving.crt, ca.crt) (env ZW_STATE_DIR)")
	fs.StringVar(&o.joinTokenFile, "join-token-file", env("ZW_JOIN_TOKEN_FILE", ""), "file holding a join token (zonewright node join-token create): read only to join, when --state-dir holds no certificate for this node (env ZW_JOIN_TOKEN_FILE)")
	fs.StringVar(&o.listen, "listen", env("ZW_AGENT_LISTEN", nodeagent.DefaultListen),
		"address of the node's endpoint, which serves containers' logs and exec sessions to the control plane only (its certificate), host:port (env ZW_AGENT_LISTEN)")
	fs.StringVar(&o.advertiseAddr, "advertise-address", env("ZW_AGENT_ADVERTISE_ADDRESS", ""),
		"IP address the control plane reaches the node's endpoint at, reported as its InternalIP; empty: --listen's host if it names one, else the address this host reaches the API from (env ZW_AGENT_ADVERTISE_ADDRESS)")
	fs.StringVar(&o.clusterDomain, "cluster-domain", env("ZW_CLUSTER_DOMAIN", clusterdns.DefaultDomain),
		"the cluster's DNS domain, as the control plane's; the node answers it to its pods on their gateway, port 53 (env ZW_CLUSTER_DOMAIN)")
	fs.StringVar(&o.dnsUpstream, "dns-upstream", env("ZW_DNS_UPSTREAM", ""),
		"resolvers for the pods' names outside the cluster domain, comma-separated; empty: those of /etc/resolv.conf; none: refuse such names (env ZW_DNS_UPSTREAM)")
	fs.StringVar(&o.podCIDR, "pod-cidr", env("ZW_POD_CIDR", ""), "ask the control plane for this pod network, e.g. 10.88.1.0/24 (refused if another node holds an overlapping one); a node already holding another keeps it, and reports the disagreement (condition PodCIDRMismatch); empty: the control plane assigns one (env ZW_POD_CIDR)")
	fs.StringVar(&o.etherstub, "etherstub", env("ZW_ETHERSTUB", nodeagent.DefaultEtherstub), "etherstub the pods' VNICs are created over (env ZW_ETHERSTUB)")
	fs.StringVar(&o.pool, "storage-pool", env("ZW_STORAGE_POOL", nodeagent.DefaultStoragePool), "ZFS pool of the zones: datasets go under <pool>/zonewright/zones (env ZW_STORAGE_POOL)")
	fs.StringVar(&o.zonesDataset, "zones-dataset", env("ZW_ZONES_DATASET", ""), "parent dataset of the zones, overriding <storage-pool>/zonewright/zones (env ZW_ZONES_DATASET)")
	fs.StringVar(&o.zonesPath, "zones-path", env("ZW_ZONES_PATH", nodeagent.DefaultZonesPath), "mountpoint of the zones dataset; zonepaths are <zones-path>/<zone> (env ZW_ZONES_PATH)")
	fs.StringVar(&o.zonesDir, "zones-dir", env("ZW_ZONES_DIR", ""), "where this machine's filesystem holds the zones path, for files written into zones; empty: the zones path (env ZW_ZONES_DIR)")
	fs.StringVar(&o.brands, "zone-brands", env("ZW_ZONE_BRANDS", strings.Join(nodeagent.DefaultZoneBrands, ",")), "zone brands this node offers, comma-separated (env ZW_ZONE_BRANDS)")
	fs.StringVar(&o.imagesDataset, "images-dataset", env("ZW_IMAGES_DATASET", ""), "parent dataset of images received as ZFS streams or disk volumes, overriding <storage-pool>/zonewright/images (env ZW_IMAGES_DATASET)")
	fs.StringVar(&o.volumesDataset, "volumes-dataset", env("ZW_VOLUMES_DATASET", ""), "parent dataset of the pods' volumes (bhyve boot disks), overriding <storage-pool>/zonewright/volumes (env ZW_VOLUMES_DATASET)")
	fs.StringVar(&o.imageDir, "image-dir", env("ZW_IMAGE_DIR", nodeagent.DefaultImageDir), "directory of lx tarball images <image>.tar (env ZW_IMAGE_DIR)")
	fs.StringVar(&o.zvolDir, "zvol-dir", env("ZW_ZVOL_DIR", illumos.DefaultZvolDir), "directory of the volumes' raw devices (env ZW_ZVOL_DIR)")
	fs.StringVar(&o.maxPods, "max-pods", env("ZW_MAX_PODS", strconv.Itoa(nodeagent.DefaultMaxPods)), "pods this node takes at most (env ZW_MAX_PODS)")
	fs.StringVar(&o.reservedCPU, "system-reserved-cpu", env("ZW_SYSTEM_RESERVED_CPU", "500m"), "CPU kept from pods for the global zone (env ZW_SYSTEM_RESERVED_CPU)")
	fs.StringVar(&o.reservedMemory, "system-reserved-memory", env("ZW_SYSTEM_RESERVED_MEMORY", "1Gi"), "memory kept from pods for the global zone (env ZW_SYSTEM_RESERVED_MEMORY)")
	fs.StringVar(&o.zoneQuota, "zone-quota", env("ZW_ZONE_QUOTA", ""),
		"quota of the zone dataset (its root and emptyDirs) of a pod whose containers set no ephemeral-storage, a quantity such as 20Gi; empty: none (env ZW_ZONE_QUOTA)")
	fs.StringVar(&o.zoneMaxProcs, "zone-max-processes", env("ZW_ZONE_MAX_PROCESSES", strconv.Itoa(nodeagent.DefaultZoneMaxProcesses)),
		"processes a zone may run at most (zonecfg max-processes, at least 100); a pod's annotation zonewright.io/max-processes may ask for fewer; 0: no limit (env ZW_ZONE_MAX_PROCESSES)")
	fs.StringVar(&o.zoneMaxLWPs, "zone-max-lwps", env("ZW_ZONE_MAX_LWPS", strconv.Itoa(nodeagent.DefaultZoneMaxLWPs)),
		"threads (LWPs) a zone may run at most (zonecfg max-lwps, at least 100); a pod's annotation zonewright.io/max-lwps may ask for fewer; 0: no limit (env ZW_ZONE_MAX_LWPS)")
	fs.StringVar(&o.binDir, "bin-dir", env("ZW_BIN_DIR", ""), "directory of the illumos commands (zoneadm, dladm, ...); empty: their standard places (env ZW_BIN_DIR)")
	fs.StringVar(&o.installs, "max-concurrent-installs", env("ZW_MAX_CONCURRENT_INSTALLS", strconv.Itoa(nodeagent.DefaultMaxConcurrentInstalls)), "zone installs run at once at most (env ZW_MAX_CONCURRENT_INSTALLS)")
	fs.StringVar(&o.heartbeat, "heartbeat-interval", env("ZW_HEARTBEAT_INTERVAL", nodeagent.DefaultHeartbeatInterval.String()), "how often the node's lease is renewed and its status written if it changed (env ZW_HEARTBEAT_INTERVAL)")
	fs.StringVar(&o.reconcile, "reconcile-interval", env("ZW_RECONCILE_INTERVAL", nodeagent.DefaultReconcileInterval.String()),
		"how often this host's zones, VNICs and datasets are compared with the control plane (env ZW_RECONCILE_INTERVAL)")
	fs.StringVar(&o.nodeRoutes, "node-route-interval", env("ZW_NODE_ROUTE_INTERVAL", nodeagent.DefaultNodeRouteInterval.String()),
		"how often the routes to the other nodes' pod CIDRs are compared with the nodes and the routing table: a deleted route comes back within it (env ZW_NODE_ROUTE_INTERVAL)")
	fs.StringVar(&o.orphanGrace, "orphan-grace", env("ZW_ORPHAN_GRACE", nodeagent.DefaultOrphanGrace.String()),
		"how long a zonewright zone, VNIC or dataset with no pod is reported before it is removed (env ZW_ORPHAN_GRACE)")
	fs.StringVar(&o.provisionRetry, "provision-retry", env("ZW_PROVISION_RETRY", nodeagent.DefaultProvisionRetry.String()),
		"first wait before a provision step that failed transiently is tried again, doubling up to 30s (env ZW_PROVISION_RETRY)")
	fs.StringVar(&o.shutdown, "shutdown-timeout", env("ZW_SHUTDOWN_TIMEOUT", nodeagent.DefaultWorkerStopTimeout.String()), "on SIGTERM, how long running activities may take to finish before the agent exits (env ZW_SHUTDOWN_TIMEOUT)")
	fs.StringVar(&o.logLevel, "log-level", env("ZW_LOG_LEVEL", "info"), "debug, info, warn or error (env ZW_LOG_LEVEL)")
	return fs, o
}

// config turns the options into the agent's configuration.
func (o *agentOptions) config() (nodeagent.Config, error) {
	cfg := o.baseConfig()
	var errs []error
	if len(cfg.ZoneBrands) == 0 {
		errs = append(errs, fmt.Errorf("--zone-brands %q: want at least one brand", o.brands))
	}
	errs = append(errs, o.limits(&cfg)...)
	errs = append(errs, o.intervals(&cfg)...)
	if err := o.temporal.TemporalTLS.Check(o.temporal.TemporalInsecure); err != nil {
		errs = append(errs, err)
	} else if cfg.TemporalTLS, err = o.temporal.TemporalTLS.ClientTLS(); err != nil {
		errs = append(errs, err)
	}
	return cfg, errors.Join(errs...)
}

// baseConfig is the settings taken as given: names, addresses,
// directories, datasets (by default under --pool) and brands.
func (o *agentOptions) baseConfig() nodeagent.Config {
	cfg := nodeagent.Config{
		Node:              o.node,
		APIURL:            o.apiURL,
		APICAFile:         o.apiCA,
		StateDir:          o.stateDir,
		JoinTokenFile:     o.joinTokenFile,
		Listen:            o.listen,
		AdvertiseAddress:  o.advertiseAddr,
		ClusterDomain:     o.clusterDomain,
		DNSUpstreams:      clusterdns.ParseUpstreams(o.dnsUpstream),
		ZonesDir:          o.zonesDir,
		TemporalAddress:   o.temporal.TemporalAddress,
		TemporalNamespace: o.temporal.TemporalNamespace,
		PodCIDR:           o.podCIDR,
		Etherstub:         o.etherstub,
		ZonesDataset:      o.zonesDataset,
		ZonesPath:         o.zonesPath,
		ImageDir:          o.imageDir,
		ImagesDataset:     o.imagesDataset,
		VolumesDataset:    o.volumesDataset,
		ZvolDir:           o.zvolDir,
		BinDir:            o.binDir,
	}
	if cfg.ZonesDataset == "" {
		cfg.ZonesDataset = nodeagent.ZonesDataset(o.pool)
	}
	if cfg.ImagesDataset == "" {
		cfg.ImagesDataset = nodeagent.ImagesDataset(o.pool)
	}
	if cfg.VolumesDataset == "" {
		cfg.VolumesDataset = nodeagent.VolumesDataset(o.pool)
	}
	for _, b := range strings.Split(o.brands, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.ZoneBrands = append(cfg.ZoneBrands, b)
		}
	}
	return cfg
}

// limits parses into cfg how much the node takes and keeps: pods,
// installs, reserved CPU and memory, and each zone's quota and process
// limits.
func (o *agentOptions) limits(cfg *nodeagent.Config) (errs []error) {
	atoi := func(flag, v string) int {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("--%s %q: want a positive number", flag, v))
		}
		return n
	}
	cfg.MaxPods = atoi("max-pods", o.maxPods)
	cfg.MaxConcurrentInstalls = atoi("max-concurrent-installs", o.installs)
	var err error
	if cfg.SystemReservedMilliCPU, err = model.MilliCPU(o.reservedCPU); err != nil || cfg.SystemReservedMilliCPU < 0 {
		errs = append(errs, fmt.Errorf("--system-reserved-cpu %q: want a CPU quantity such as 500m", o.reservedCPU))
	}
	if cfg.SystemReservedMemory, err = model.Bytes(o.reservedMemory); err != nil || cfg.SystemReservedMemory < 0 {
		errs = append(errs, fmt.Errorf("--system-reserved-memory %q: want a memory quantity such as 1Gi", o.reservedMemory))
	}
	if o.zoneQuota != "" {
		if cfg.ZoneQuota, err = model.Bytes(o.zoneQuota); err != nil || cfg.ZoneQuota <= 0 || cfg.ZoneQuota > model.MaxStorageBytes {
			errs = append(errs, fmt.Errorf("--zone-quota %q: want a storage quantity such as 20Gi", o.zoneQuota))
		}
	}
	processLimit := func(flag, v string) int64 {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || (n != 0 && (n < model.MinZoneProcessLimit || n > model.MaxZoneProcessLimit)) {
			errs = append(errs, fmt.Errorf("--%s %q: want 0 (no limit) or a number from %d to %d", flag, v, model.MinZoneProcessLimit, model.MaxZoneProcessLimit))
		}
		return n
	}
	cfg.ZoneMaxProcesses = processLimit("zone-max-processes", o.zoneMaxProcs)
	cfg.ZoneMaxLWPs = processLimit("zone-max-lwps", o.zoneMaxLWPs)
	return errs
}

// intervals parses into cfg how often the agent acts and how long it
// waits.
func (o *agentOptions) intervals(cfg *nodeagent.Config) (errs []error) {
	var err error
	if cfg.HeartbeatInterval, err = time.ParseDuration(o.heartbeat); err != nil || cfg.HeartbeatInterval <= 0 {
		errs = append(errs, fmt.Errorf("--heartbeat-interval %q: want a duration such as 10s", o.heartbeat))
	}
	if cfg.ReconcileInterval, err = time.ParseDuration(o.reconcile); err != nil || cfg.ReconcileInterval < time.Second {
		errs = append(errs, fmt.Errorf("--reconcile-interval %q: want a duration of at least 1s, such as 30s", o.reconcile))
	}
	if cfg.NodeRouteInterval, err = time.ParseDuration(o.nodeRoutes); err != nil || cfg.NodeRouteInterval < time.Second {
		errs = append(errs, fmt.Errorf("--node-route-interval %q: want a duration of at least 1s, such as 10s", o.nodeRoutes))
	}
	if cfg.OrphanGrace, err = time.ParseDuration(o.orphanGrace); err != nil || cfg.OrphanGrace < 0 || cfg.OrphanGrace > nodeapi.MaxOrphanGraceSeconds*time.Second {
		errs = append(errs, fmt.Errorf("--orphan-grace %q: want a duration of at most 24h, such as 2m", o.orphanGrace))
	}
	if cfg.ProvisionRetry, err = time.ParseDuration(o.provisionRetry); err != nil || cfg.ProvisionRetry <= 0 || cfg.ProvisionRetry > 30*time.Second {
		errs = append(errs, fmt.Errorf("--provision-retry %q: want a duration of at most 30s, such as 1s", o.provisionRetry))
	}
	if cfg.WorkerStopTimeout, err = time.ParseDuration(o.shutdown); err != nil || cfg.WorkerStopTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout %q: want a duration such as 30s", o.shutdown))
	}
	return errs
}

// agent runs the node agent: `zonewright agent --api-url https://control-plane:8443 ...`.
func agent(ctx context.Context, args []string) error {
	fs, o := agentFlags()
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	log, err := newLogger(o.logLevel)
	if err != nil {
		return err
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	cfg.Logger = log
	warnIfInsecureTemporal(log, o.temporal)
	return nodeagent.Run(ctx, cfg)
}
