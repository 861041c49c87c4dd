//go:build !illumos && !nodev

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/zonewright/zonewright/deploy"
	nodeagent "github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devcluster"
	"github.com/zonewright/zonewright/internal/devnodes"
	"github.com/zonewright/zonewright/internal/devregistry"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/pgserver"
	"github.com/zonewright/zonewright/internal/pki"
	"github.com/zonewright/zonewright/internal/podcidr"
	"github.com/zonewright/zonewright/internal/zwclient"
)

// platformCommands adds dev, and the Temporal server alone, where the
// Temporal server can be embedded.
func platformCommands() map[string]command {
	return map[string]command{"dev": dev, "temporal": temporalServer}
}

// devConfig is what `zonewright dev` was asked for.
type devConfig struct {
	dataDir, listen, temporalAddr, uiAddr, dbURL string
	pgPort, nodes                                int
	isolation                                    isolationFlag
	logLevel, registryAddr, mapFile              string
	reconcile, orphanGrace                       string
	// cp holds the control plane's settings of the flags.
	cp controlplane.Config
	// checks finish the flags that need a look once all are parsed.
	checks []func() error
	// isolated is the decision on --isolation; whyNotIsolated says why
	// not when it is off; underlay is the nodes' network when on.
	isolated       bool
	whyNotIsolated string
	underlay       netip.Prefix
}

func dev(ctx context.Context, args []string) error {
	d, err := parseDevFlags(args)
	if err != nil {
		return err
	}
	log, err := newLogger(d.logLevel)
	if err != nil {
		return err
	}
	start := time.Now()
	if exposed := podsShareUserWarning(d.isolated, os.Geteuid(), d.nodes, d.dataDir, d.whyNotIsolated); exposed != "" {
		fmt.Fprintln(os.Stderr, "WARNING: "+exposed)
	}
	if err := d.checkPortsFree(); err != nil {
		return err
	}
	if err := os.MkdirAll(d.dataDir, 0o755); err != nil {
		return err
	}
	unlock, err := lockDataDir(d.dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	audit, err := d.prepareDataDir()
	if err != nil {
		return err
	}
	defer audit.Close()
	d.cp.AuditLog, d.cp.Logger = audit, log
	opts, err := d.clusterOptions(log)
	if err != nil {
		return err
	}
	c, err := devcluster.Build(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Stop()
	up, err := d.extras(ctx, c, log)
	defer up.stop()
	if err != nil {
		return err
	}
	d.printBanner(c, up, time.Since(start))
	select {
	case <-ctx.Done():
		log.Info("stopping the dev stack")
	case err := <-c.ControlPlane.Served():
		return fmt.Errorf("API server stopped: %w", err)
	}
	return nil
}

// devFlags defines dev's flags on fs.
func devFlags(fs *flag.FlagSet) *devConfig {
	d := &devConfig{}
	fs.StringVar(&d.dataDir, "data-dir", env("ZW_DATA_DIR", ".data"), "where PostgreSQL and Temporal keep their data (env ZW_DATA_DIR)")
	fs.StringVar(&d.listen, "listen", env("ZW_LISTEN", "127.0.0.1:8080"), "API address (env ZW_LISTEN)")
	fs.StringVar(&d.temporalAddr, "temporal-address", env("ZW_TEMPORAL_ADDRESS", devstack.DefaultTemporalAddress), "embedded Temporal frontend address (env ZW_TEMPORAL_ADDRESS)")
	fs.StringVar(&d.uiAddr, "ui-address", env("ZW_UI_ADDRESS", devstack.DefaultUIAddress), "Temporal Web UI address (env ZW_UI_ADDRESS)")
	fs.StringVar(&d.dbURL, "database-url", env("DATABASE_URL", ""), "use this PostgreSQL instead of a private one (env DATABASE_URL)")
	fs.IntVar(&d.pgPort, "postgres-port", 0, "loopback port of the private PostgreSQL; 0 picks a free one")
	fs.IntVar(&d.nodes, "nodes", 3, "simulated illumos nodes to run, each a real agent over illumos-sim")
	fs.Var(&d.isolation, "isolation", "run every simulated node and zone in network, mount and UTS namespaces of its own, pods on 10.<n>.0.0/17 reaching other nodes' pods only through the nodes' routes, services on 10.96.0.0/16 unless --service-cidr says otherwise (needs root); the default where this machine allows it, --isolation=false for the shared loopback")
	fs.StringVar(&d.logLevel, "log-level", env("ZW_LOG_LEVEL", "info"), "debug, info, warn or error (env ZW_LOG_LEVEL)")
	d.checks = append(d.checks, imageFlags(fs, &d.cp, "", "", "127.0.0.0/8,::1"))
	fs.StringVar(&d.registryAddr, "registry", env("ZW_REGISTRY", "127.0.0.1:5000"), "serve an OCI registry here, in memory, seeded with "+devregistry.DemoImage+"; pods name its images as <address>/<repository>:<tag>; empty serves none (env ZW_REGISTRY)")
	fs.StringVar(&d.mapFile, "image-map", env("ZW_IMAGE_MAP", ""), "image map file (env ZW_IMAGE_MAP); default: the built-in deploy/images.yaml")
	fs.StringVar(&d.reconcile, "reconcile-interval", nodeagent.DefaultReconcileInterval.String(), "how often each node compares its host with the control plane (passed to the agents)")
	fs.StringVar(&d.orphanGrace, "orphan-grace", nodeagent.DefaultOrphanGrace.String(), "how long a node reports an orphan before removing it (passed to the agents)")
	nodeHealth := nodeHealthFlags(fs, &d.cp)
	// Inside 127.0.0.0/8, so service addresses are reachable on Linux.
	serviceCIDRFlag(fs, &d.cp, clusterip.DevCIDR)
	// Pod networks 127.<m>.<n>.0/24: reachable on Linux too; m depends on
	// the data dir unless given (networks).
	podCIDRFlags(fs, &d.cp, "")
	maxConnectionsFlag(fs, &d.cp)
	streamBoundsFlags(fs, &d.cp)
	dnsDone := dnsFlags(fs, &d.cp.DNS, "127.0.0.1:8053")
	d.checks = append(d.checks, capacityFlag(fs, &d.cp), nodeHealth, dnsDone)
	return d
}

// parseDevFlags parses and checks dev's flags and decides the stack's
// isolation and networks.
func parseDevFlags(args []string) (*devConfig, error) {
	fs := flag.NewFlagSet("dev", flag.ExitOnError)
	d := devFlags(fs)
	_ = fs.Parse(args)
	d.isolated, d.whyNotIsolated = d.isolation.decide()
	if d.isolation.on != nil && *d.isolation.on && d.whyNotIsolated != "" {
		return nil, fmt.Errorf("--isolation: %s", d.whyNotIsolated)
	}
	// Every path the stack shows or writes (the env file, zwctl's
	// config, the banner) holds from any directory.
	abs, err := filepath.Abs(d.dataDir)
	if err != nil {
		return nil, err
	}
	d.dataDir = abs
	for _, check := range d.checks {
		if err := check(); err != nil {
			return nil, err
		}
	}
	if d.isolated {
		if err := isolatedServiceCIDR(fs, &d.cp.ServiceCIDR); err != nil {
			return nil, err
		}
	}
	if _, err := clusterip.Parse(d.cp.ServiceCIDR); err != nil {
		return nil, fmt.Errorf("--service-cidr: %w", err)
	}
	return d, d.networks()
}

// networks decides the pod range (one of the data dir's own unless
// given) and, in isolation mode, the nodes' underlay.
func (d *devConfig) networks() error {
	if d.cp.ClusterCIDR == "" || d.isolated {
		cidr, err := devClusterCIDR(d.dataDir, d.cp.ServiceCIDR)
		if err != nil {
			return err
		}
		if d.isolated {
			// The network number the data dir picks, on 10/8 inside the
			// namespaces.
			n := int(netip.MustParsePrefix(cidr).Addr().As4()[1])
			d.underlay = fabric.IsolatedUnderlay(n)
			cidr = fabric.IsolatedClusterCIDR(n)
		}
		if d.cp.ClusterCIDR == "" {
			d.cp.ClusterCIDR = cidr
		}
	}
	if _, err := podcidr.ParseRange(d.cp.ClusterCIDR, d.cp.NodeCIDRMaskSize); err != nil {
		return fmt.Errorf("--cluster-cidr, --node-cidr-mask-size: %w", err)
	}
	return nil
}

// checkPortsFree refuses early and clearly when something already holds
// the stack's ports.
func (d *devConfig) checkPortsFree() error {
	for _, p := range []struct{ addr, flag string }{{d.listen, "--listen"}, {d.temporalAddr, "--temporal-address"}, {d.uiAddr, "--ui-address"}, {d.cp.DNS.Addr, "--dns-listen"}} {
		if p.addr == "" {
			continue
		}
		if err := devstack.CheckPortFree(p.addr); err != nil {
			var inUse *devstack.PortInUseError
			if errors.As(err, &inUse) {
				return fmt.Errorf("%s is already in use (another dev stack?); stop it or pass %s", p.addr, p.flag)
			}
			return err
		}
	}
	return nil
}

// prepareDataDir readies what the control plane keeps in the data
// directory besides its state: the image directories, the image map,
// the encryption key and the audit log, which it returns open.
func (d *devConfig) prepareDataDir() (*os.File, error) {
	var err error
	if d.cp.ImageStore == "" {
		d.cp.ImageStore = filepath.Join(d.dataDir, "images")
	}
	if d.cp.ImageSourceDir == "" {
		d.cp.ImageSourceDir = filepath.Join(d.dataDir, "image-sources")
	}
	if err := os.MkdirAll(d.cp.ImageSourceDir, 0o755); err != nil {
		return nil, err
	}
	if d.cp.ImageMap, err = devImageMap(d.mapFile); err != nil {
		return nil, err
	}
	// Secrets are encrypted with a key kept in the data directory (0600),
	// so they open again after a restart.
	if d.cp.EncryptionKey, err = encryption.EnsureKeyFile(filepath.Join(d.dataDir, "encryption.key")); err != nil {
		return nil, err
	}
	// The audit log and the cluster-admin token (admin.token) live in the
	// data directory too.
	return os.OpenFile(filepath.Join(d.dataDir, "audit.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// clusterOptions are the dev stack's: the data directory is the control
// plane's state directory, its CA the cluster's; this binary is the
// nodes' agent.
func (d *devConfig) clusterOptions(log *slog.Logger) (devcluster.Options, error) {
	var self, sim string
	if d.nodes > 0 {
		var err error
		if sim, err = devnodes.FindSim(); err != nil {
			return devcluster.Options{}, err
		}
		if self, err = os.Executable(); err != nil {
			return devcluster.Options{}, err
		}
	}
	d.cp.Listen = d.listen
	return devcluster.Options{Dir: d.dataDir, Logger: log, DatabaseURL: d.dbURL, PostgresPort: d.pgPort,
		TemporalAddress: d.temporalAddr, ControlPlane: d.cp, Zonewright: self, Sim: sim, Nodes: d.nodes,
		AgentArgs: []string{"--heartbeat-interval", devHeartbeat(d.cp.NodeGracePeriod).String(),
			"--reconcile-interval", d.reconcile, "--orphan-grace", d.orphanGrace,
			"--cluster-domain", d.cp.DNS.Domain, "--dns-upstream", upstreamFlag(d.cp.DNS.Upstreams)},
		Underlay: d.underlay, SuperviseAgents: true, OperatorName: "dev-operator"}, nil
}

// devExtras are the parts of the dev stack around the cluster: the
// Temporal Web UI, the registry, zwctl's and kubectl's configs and the
// env file.
type devExtras struct {
	ui            *devstack.UI
	registryShown string
	envFile       string
	stops         []func()
}

func (e *devExtras) stop() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
}

// extras starts the Web UI and the registry and writes the files that
// let zwctl, kubectl and the Temporal CLI talk to the stack.
func (d *devConfig) extras(ctx context.Context, c *devcluster.Cluster, log *slog.Logger) (*devExtras, error) {
	e := &devExtras{registryShown: "none (--registry \"\")"}
	var err error
	if e.ui, err = devstack.StartUI(devstack.UIConfig{Address: d.uiAddr, TemporalAddress: c.TemporalAddress, Namespace: devstack.DefaultNamespace,
		TLS: &c.OperatorCert}); err != nil {
		return e, fmt.Errorf("Temporal Web UI: %w", err)
	}
	e.stops = append(e.stops, func() { _ = e.ui.Stop() })
	cp, caFile := c.ControlPlane, controlplane.CAFile(d.dataDir)
	// zwctl's config (context dev), so that after sourcing the env file
	// every zwctl command talks to this stack; the same for the stock
	// kubectl.
	zwctlConfig, kubeconfig := filepath.Join(d.dataDir, "zwctl.yaml"), filepath.Join(d.dataDir, "kubeconfig")
	config := zwclient.SingleContext("dev", cp.URL(), caFile, cp.AdminToken(), "default")
	if err := config.Save(zwctlConfig); err != nil {
		return e, err
	}
	if err := config.SaveKubeconfig(kubeconfig); err != nil {
		return e, err
	}
	// A registry that cannot start (its port taken) leaves the rest of
	// the stack as it is: registry images need a registry of their own.
	var registryEnv []envVar
	if d.registryAddr != "" {
		if reg, err := devregistry.Start(ctx, d.registryAddr); err != nil {
			log.Warn("no dev registry", "err", err)
			e.registryShown = "none: " + err.Error()
		} else {
			e.stops = append(e.stops, func() { _ = reg.Close() })
			e.registryShown = fmt.Sprintf("%s (in memory; try image %s/%s)", reg.Addr, reg.Addr, devregistry.DemoImage)
			registryEnv = []envVar{{"ZW_REGISTRY", reg.Addr}}
		}
	}
	op := c.OperatorCert
	e.envFile = filepath.Join(d.dataDir, "env")
	return e, devEnvFile(e.envFile, append([]envVar{{"ZW_API_URL", cp.URL()}, {"ZW_CACERT", caFile}, {"ZW_TOKEN", cp.AdminToken()},
		{zwclient.EnvConfig, zwctlConfig}, {"KUBECONFIG", kubeconfig},
		{"TEMPORAL_ADDRESS", c.TemporalAddress}, {"TEMPORAL_NAMESPACE", devstack.DefaultNamespace},
		{"TEMPORAL_TLS_CERT", op.CertFile}, {"TEMPORAL_TLS_KEY", op.KeyFile}, {"TEMPORAL_TLS_CA", op.CAFile}, {"TEMPORAL_TLS_SERVER_NAME", op.ServerName},
	}, registryEnv...), zwctlDir())
}

// nodeList is the banner's line of nodes.
func (d *devConfig) nodeList(c *devcluster.Cluster) string {
	if c.Nodes == nil {
		return "none (--nodes 0); pod CIDRs would come from " + d.cp.ClusterCIDR
	}
	list := "pod CIDRs assigned from " + d.cp.ClusterCIDR
	if d.underlay.IsValid() {
		list += ", isolation mode: each node a network namespace on the underlay " + d.underlay.String()
		if os.Geteuid() != 0 {
			list += " in a user namespace of this stack's, each zone a subordinate id of yours"
		}
		list += " (reach pods with zwctl port-forward or exec)"
	} else {
		list += ", shared loopback: pods reachable from this machine (" + d.whyNotIsolated + ")"
	}
	for _, n := range c.Nodes.Nodes {
		list += fmt.Sprintf("\n    %s  state %s  agent pid %d (%s)", n.Name, n.Root, n.Pid(), n.PidFile)
	}
	return list
}

// printBanner says where everything is, once the stack is up.
func (d *devConfig) printBanner(c *devcluster.Cluster, e *devExtras, took time.Duration) {
	exposed := podsShareUserWarning(d.isolated, os.Geteuid(), d.nodes, d.dataDir, d.whyNotIsolated)
	if exposed != "" {
		exposed = "  WARNING      " + exposed + "\n"
	}
	dbShown := ""
	if d.dbURL == "" {
		dbShown = " (password in " + pgserver.PasswordFile(c.PostgresDir()) + ")"
	}
	cp, caFile := c.ControlPlane, controlplane.CAFile(d.dataDir)
	fmt.Printf(`
zonewright dev stack is up (started in %s)
  API          %s (CA %s, fingerprint %s)
  Temporal UI  %s
  Temporal     %s (namespace %s, mutual TLS: certificates in %s)
  PostgreSQL   %s%s
  data         %s
  nodes        %s
  services     %s (cluster DNS %s)
  DNS          %s, domain %s
  image files  %s (file:// image sources; http:// on loopback allowed)
  registry     %s

  admin token  %s (audit log %s)
%s
Try: source %s
     zwctl get nodes
     curl --cacert "$ZW_CACERT" -H "Authorization: Bearer $ZW_TOKEN" "$ZW_API_URL/api/v1/namespaces/default/pods"
     curl --cacert "$ZW_CACERT" -H "Authorization: Bearer $ZW_TOKEN" "$ZW_API_URL/api/v1/images"
     temporal workflow list
Ctrl-C stops everything; the next start resumes the same data.
`, took.Round(time.Millisecond), cp.URL(), caFile, cp.CA().Fingerprint(), e.ui.URL(), c.TemporalAddress, devstack.DefaultNamespace, filepath.Join(d.dataDir, "tls"), redact(c.DatabaseURL), dbShown, d.dataDir, d.nodeList(c), cp.ServiceCIDR(), cp.ClusterDNSAddress(),
		dnsShown(cp.DNSAddr()), d.cp.DNS.Domain, d.cp.ImageSourceDir, e.registryShown, controlplane.AdminTokenFile(d.dataDir), filepath.Join(d.dataDir, "audit.log"), exposed, e.envFile)
}

// envVar is one line of the dev stack's env file.
type envVar struct{ key, value string }

// devEnvFile writes the env file a shell sources to talk to the dev
// stack: `export KEY='value'` lines in the order given. It may hold
// credentials, so only its owner reads it.
//
// binDir, when not empty, goes first on PATH, so zwctl built beside
// zonewright answers to its name.
func devEnvFile(path string, vars []envVar, binDir string) error {
	var b strings.Builder
	b.WriteString("# zonewright dev stack: source this file (written at every start).\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "export %s=%s\n", v.key, shellQuote(v.value))
	}
	if binDir != "" {
		fmt.Fprintf(&b, "export PATH=%s:\"$PATH\"\n", shellQuote(binDir))
	}
	if err := pki.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// zwctlDir is the directory of the zwctl built beside this binary
// (make build), or "" when there is none.
func zwctlDir() string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	dir := filepath.Dir(self)
	if _, err := os.Stat(filepath.Join(dir, "zwctl")); err != nil {
		return ""
	}
	return dir
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// dnsShown is the DNS address for the banner.
func dnsShown(addr string) string {
	if addr == "" {
		return `none (--dns-listen "")`
	}
	return addr
}

// devImageMap loads the given map, or the built-in one.
func devImageMap(path string) (*imagemap.Map, error) {
	if path != "" {
		return imagemap.Load(path)
	}
	m, err := imagemap.Parse(deploy.ImageMap)
	if err != nil {
		return nil, fmt.Errorf("built-in image map: %w", err)
	}
	return m, nil
}

// lockDataDir keeps two dev stacks from sharing one data directory.
func lockDataDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "dev.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory %s is in use by another dev stack; stop it or pass --data-dir", dir)
	}
	return func() { f.Close() }, nil
}

func redact(url string) string {
	if cfg, err := pgx.ParseConfig(url); err == nil {
		return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
	}
	return "(custom URL)"
}

// isolatedServiceCIDR is the service range in isolation mode: a pod's
// packets leave its zone by its default route, and the node's kernel
// translates those to the service range (its ipnat rules), but never
// those to 127.0.0.0/8, which the kernel drops as martians when
// they arrive from another interface. The dev stack's default range is
// replaced by serve's; one given on loopback is refused.
func isolatedServiceCIDR(fs *flag.FlagSet, cidr *string) error {
	given := os.Getenv("ZW_SERVICE_CIDR") != ""
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "service-cidr" })
	if !given {
		*cidr = clusterip.DefaultCIDR
		return nil
	}
	if p, err := netip.ParsePrefix(*cidr); err == nil && p.Addr().IsLoopback() {
		return fmt.Errorf("--service-cidr %s: in isolation mode pods cannot reach loopback addresses; leave it out (%s) or give another range", *cidr, clusterip.DefaultCIDR)
	}
	return nil
}

// devClusterCIDR is the pod range of the dev stack in dataDir: one of its
// own, so that two stacks on one machine never give pods the same address.
func devClusterCIDR(dataDir, serviceCIDR string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("--data-dir %s: %w", dataDir, err)
	}
	var avoid []netip.Prefix
	if p, err := netip.ParsePrefix(serviceCIDR); err == nil {
		avoid = append(avoid, p)
	}
	return devnodes.ClusterCIDROf(abs, avoid...), nil
}

// podsShareUserWarning is what the stack says, on stderr at start and in
// its banner, when its pods' processes run as the user running it: not
// root, so zones cannot drop to uids of their own, and no isolation mode
// (no user namespace of the stack's) to give them some. Then any pod
// reads the data directory: the CA's key, the admin token, the
// encryption key. Empty otherwise.
func podsShareUserWarning(isolated bool, euid, nodes int, dataDir, whyNotIsolated string) string {
	if isolated || euid == 0 || nodes == 0 {
		return ""
	}
	return fmt.Sprintf("pods run as your user (uid %d) and can read %s: the CA's key, the admin token, the encryption key. "+
		"Run only pods you trust, or give this stack isolation mode (%s) or root.", euid, dataDir, whyNotIsolated)
}

// isolationFlag is --isolation: on, off, or (unset) on where this machine
// allows it.
type isolationFlag struct{ on *bool }

func (f *isolationFlag) IsBoolFlag() bool { return true }

func (f *isolationFlag) String() string {
	if f == nil || f.on == nil {
		return "auto"
	}
	return strconv.FormatBool(*f.on)
}

func (f *isolationFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	f.on = &v
	return nil
}

// decide says whether the stack runs isolated, and why not when it does
// not.
func (f *isolationFlag) decide() (bool, string) {
	if f.on != nil && !*f.on {
		return false, "--isolation=false"
	}
	if err := fabric.IsolationSupported(); err != nil {
		return false, err.Error()
	}
	return true, ""
}
