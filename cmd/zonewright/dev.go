//go:build !illumos && !nodev

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zonewright/zonewright/deploy"
	nodeagent "github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/controlplane"
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
	"github.com/zonewright/zonewright/workflows"
)

// platformCommands adds dev, and the Temporal server alone, where the
// Temporal server can be embedded.
func platformCommands() map[string]command {
	return map[string]command{"dev": dev, "temporal": temporalServer}
}

// devDatabase is the database the dev stack keeps in its private cluster.
const devDatabase = "zonewright"

func dev(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dev", flag.ExitOnError)
	dataDir := fs.String("data-dir", env("ZW_DATA_DIR", ".data"), "where PostgreSQL and Temporal keep their data (env ZW_DATA_DIR)")
	listen := fs.String("listen", env("ZW_LISTEN", "127.0.0.1:8080"), "API address (env ZW_LISTEN)")
	temporalAddr := fs.String("temporal-address", env("ZW_TEMPORAL_ADDRESS", devstack.DefaultTemporalAddress), "embedded Temporal frontend address (env ZW_TEMPORAL_ADDRESS)")
	uiAddr := fs.String("ui-address", env("ZW_UI_ADDRESS", devstack.DefaultUIAddress), "Temporal Web UI address (env ZW_UI_ADDRESS)")
	dbURL := fs.String("database-url", env("DATABASE_URL", ""), "use this PostgreSQL instead of a private one (env DATABASE_URL)")
	pgPort := fs.Int("postgres-port", 0, "loopback port of the private PostgreSQL; 0 picks a free one")
	nodes := fs.Int("nodes", 3, "simulated illumos nodes to run, each a real agent over illumos-sim")
	var isolation isolationFlag
	fs.Var(&isolation, "isolation", "run every simulated node and zone in network, mount and UTS namespaces of its own, pods on 10.<n>.0.0/17 reaching other nodes' pods only through the nodes' routes, services on 10.96.0.0/16 unless --service-cidr says otherwise (needs root); the default where this machine allows it, --isolation=false for the shared loopback")
	logLevel := fs.String("log-level", env("ZW_LOG_LEVEL", "info"), "debug, info, warn or error (env ZW_LOG_LEVEL)")
	var img controlplane.Config
	imagesDone := imageFlags(fs, &img, "", "", "127.0.0.0/8,::1")
	registryAddr := fs.String("registry", env("ZW_REGISTRY", "127.0.0.1:5000"), "serve an OCI registry here, in memory, seeded with "+devregistry.DemoImage+"; pods name its images as <address>/<repository>:<tag>; empty serves none (env ZW_REGISTRY)")
	mapFile := fs.String("image-map", env("ZW_IMAGE_MAP", ""), "image map file (env ZW_IMAGE_MAP); default: the built-in deploy/images.yaml")
	reconcile := fs.String("reconcile-interval", nodeagent.DefaultReconcileInterval.String(), "how often each node compares its host with the control plane (passed to the agents)")
	orphanGrace := fs.String("orphan-grace", nodeagent.DefaultOrphanGrace.String(), "how long a node reports an orphan before removing it (passed to the agents)")
	var health controlplane.Config
	nodeHealth := nodeHealthFlags(fs, &health)
	// Inside 127.0.0.0/8, so service addresses are reachable on Linux.
	serviceCIDRFlag(fs, &health, clusterip.DevCIDR)
	// Pod networks 127.<m>.<n>.0/24: reachable on Linux too; m depends on
	// the data dir unless given (below).
	podCIDRFlags(fs, &health, "")
	maxConnectionsFlag(fs, &health)
	streamBoundsFlags(fs, &health)
	dnsDone := dnsFlags(fs, &health.DNS, "127.0.0.1:8053")
	capacityDone := capacityFlag(fs, &health)
	_ = fs.Parse(args)
	isolated, isolationOff := isolation.decide()
	if isolation.on != nil && *isolation.on && isolationOff != "" {
		return fmt.Errorf("--isolation: %s", isolationOff)
	}
	// Every path the stack shows or writes (the env file, zwctl's
	// config, the banner) holds from any directory.
	abs, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	*dataDir = abs
	if err := imagesDone(); err != nil {
		return err
	}
	if err := capacityDone(); err != nil {
		return err
	}
	if err := nodeHealth(); err != nil {
		return err
	}
	if err := dnsDone(); err != nil {
		return err
	}
	if isolated {
		if err := isolatedServiceCIDR(fs, &health.ServiceCIDR); err != nil {
			return err
		}
	}
	if _, err := clusterip.Parse(health.ServiceCIDR); err != nil {
		return fmt.Errorf("--service-cidr: %w", err)
	}
	var underlay netip.Prefix
	if health.ClusterCIDR == "" || isolated {
		cidr, err := devClusterCIDR(*dataDir, health.ServiceCIDR)
		if err != nil {
			return err
		}
		if isolated {
			// The network number the data dir picks, on 10/8 inside the
			// namespaces.
			n := int(netip.MustParsePrefix(cidr).Addr().As4()[1])
			underlay = fabric.IsolatedUnderlay(n)
			cidr = fabric.IsolatedClusterCIDR(n)
		}
		if health.ClusterCIDR == "" {
			health.ClusterCIDR = cidr
		}
	}
	if _, err := podcidr.ParseRange(health.ClusterCIDR, health.NodeCIDRMaskSize); err != nil {
		return fmt.Errorf("--cluster-cidr, --node-cidr-mask-size: %w", err)
	}
	log, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
	start := time.Now()
	exposed := podsShareUserWarning(isolated, os.Geteuid(), *nodes, *dataDir, isolationOff)
	if exposed != "" {
		fmt.Fprintln(os.Stderr, "WARNING: "+exposed)
		exposed = "  WARNING      " + exposed + "\n"
	}

	// Refuse early and clearly when something already holds our ports.
	for _, p := range []struct{ addr, flag string }{{*listen, "--listen"}, {*temporalAddr, "--temporal-address"}, {*uiAddr, "--ui-address"}, {health.DNS.Addr, "--dns-listen"}} {
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
	if err := os.MkdirAll(*dataDir, 0o755); err != nil {
		return err
	}
	unlock, err := lockDataDir(*dataDir)
	if err != nil {
		return err
	}
	defer unlock()

	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()

	url, dbShown := *dbURL, ""
	if url == "" {
		pg, err := pgserver.Start(ctx, pgserver.Config{DataDir: filepath.Join(*dataDir, "postgres"), Port: *pgPort})
		if err != nil {
			return fmt.Errorf("private PostgreSQL: %w", err)
		}
		stops = append(stops, func() {
			if err := pg.Stop(); err != nil {
				log.Warn("stop PostgreSQL", "err", err)
			}
		})
		if url, err = pg.EnsureDatabase(ctx, devDatabase); err != nil {
			return err
		}
		dbShown = " (password in " + pgserver.PasswordFile(filepath.Join(*dataDir, "postgres")) + ")"
	}

	// The data directory is the control plane's state directory: the
	// cluster CA every certificate comes from is kept in its tls/.
	stateDir, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(stateDir, "tls"), "zonewright CA")
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	// Temporal's authorizer denies a node whose certificate was revoked
	// with its Node.
	certPool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	stops = append(stops, certPool.Close)
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalConfig{
		Address: *temporalAddr, DataDir: filepath.Join(*dataDir, "temporal"), Namespace: devstack.DefaultNamespace, CA: ca,
		SearchAttributes: devstack.KeywordAttributes(workflows.SearchAttributeNames...), Logger: log.With("component", "temporal-server"),
		NodeCertRevoked: (&auth.NodeCertificates{Pool: certPool}).Revoked,
	})
	if err != nil {
		return fmt.Errorf("embedded Temporal: %w", err)
	}
	stops = append(stops, func() { _ = tmp.Stop() })
	// The control plane's and the operator's (the Temporal CLI's and the
	// Web UI's) certificates, issued at every start beside the CA.
	tlsDir := filepath.Join(stateDir, "tls")
	cpCert, err := devstack.EnsureClientTLS(ca, tlsDir, "temporal-control-plane", devstack.ControlPlaneName)
	if err != nil {
		return err
	}
	opCert, err := devstack.EnsureClientTLS(ca, tlsDir, "temporal-operator", "dev-operator", devstack.AdminOrg)
	if err != nil {
		return err
	}

	ui, err := devstack.StartUI(devstack.UIConfig{Address: *uiAddr, TemporalAddress: tmp.Address(), Namespace: devstack.DefaultNamespace,
		TLS: &opCert})
	if err != nil {
		return fmt.Errorf("Temporal Web UI: %w", err)
	}
	stops = append(stops, func() { _ = ui.Stop() })

	if img.ImageStore == "" {
		img.ImageStore = filepath.Join(*dataDir, "images")
	}
	if img.ImageSourceDir == "" {
		if img.ImageSourceDir, err = filepath.Abs(filepath.Join(*dataDir, "image-sources")); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(img.ImageSourceDir, 0o755); err != nil {
		return err
	}
	if img.ImageMap, err = devImageMap(*mapFile); err != nil {
		return err
	}
	// Secrets are encrypted with a key kept in the data directory (0600),
	// so they open again after a restart.
	key, err := encryption.EnsureKeyFile(filepath.Join(*dataDir, "encryption.key"))
	if err != nil {
		return err
	}
	// The audit log and the cluster-admin token (admin.token) live in the
	// data directory too.
	audit, err := os.OpenFile(filepath.Join(*dataDir, "audit.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	stops = append(stops, func() { audit.Close() })
	// The nodes' endpoints, once the nodes exist: on the fabric in
	// isolation mode.
	var nodeDial fabric.Dialer
	cp, err := controlplane.Start(ctx, controlplane.Config{DatabaseURL: url, Listen: *listen, StateDir: stateDir, AuditLog: audit, NodeDial: nodeDial.DialContext,
		TemporalAddress: tmp.Address(), TemporalNamespace: devstack.DefaultNamespace, TemporalTLS: controlplane.TLSConfig(cpCert), Logger: log,
		ImageStore: img.ImageStore, TransferDir: img.TransferDir, AdvertiseURL: img.AdvertiseURL,
		ImageMap: img.ImageMap, ImageStallTimeout: img.ImageStallTimeout,
		ImageSourceDir: img.ImageSourceDir, ImageAllowPrivateSources: img.ImageAllowPrivateSources, ImageMaxBytes: img.ImageMaxBytes,
		InsecureRegistries: img.InsecureRegistries, PodRegistryImageTTL: img.PodRegistryImageTTL, MaxPodRegistryImages: img.MaxPodRegistryImages,
		ImageGC: img.ImageGC, NodeGracePeriod: health.NodeGracePeriod, NodeEvictionTimeout: health.NodeEvictionTimeout,
		ServiceCIDR: health.ServiceCIDR, ClusterCIDR: health.ClusterCIDR, NodeCIDRMaskSize: health.NodeCIDRMaskSize,
		DNS: health.DNS, Capacity: health.Capacity, EncryptionKey: key, MaxConnections: health.MaxConnections, MaxUnauthenticated: health.MaxUnauthenticated,
		MinRequestTimeout: health.MinRequestTimeout, StreamIdleTimeout: health.StreamIdleTimeout})
	if err != nil {
		return err
	}
	stops = append(stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cp.Stop(sctx)
	})
	caFile := controlplane.CAFile(stateDir)
	// zwctl's config (context dev), so that after sourcing the env file
	// every zwctl command talks to this stack.
	zwctlConfig, kubeconfig := filepath.Join(*dataDir, "zwctl.yaml"), filepath.Join(*dataDir, "kubeconfig")
	config := zwclient.SingleContext("dev", cp.URL(), caFile, cp.AdminToken(), "default")
	if err := config.Save(zwctlConfig); err != nil {
		return err
	}
	// The same for the stock kubectl.
	if err := config.SaveKubeconfig(kubeconfig); err != nil {
		return err
	}
	// A registry that cannot start (its port taken) leaves the rest of
	// the stack as it is: registry images need a registry of their own.
	registryShown, registryEnv := "none (--registry \"\")", []envVar(nil)
	if *registryAddr != "" {
		reg, err := devregistry.Start(ctx, *registryAddr)
		if err != nil {
			log.Warn("no dev registry", "err", err)
			registryShown = "none: " + err.Error()
		} else {
			stops = append(stops, func() { _ = reg.Close() })
			registryShown = fmt.Sprintf("%s (in memory; try image %s/%s)", reg.Addr, reg.Addr, devregistry.DemoImage)
			registryEnv = []envVar{{"ZW_REGISTRY", reg.Addr}}
		}
	}
	envFile := filepath.Join(*dataDir, "env")
	if err := devEnvFile(envFile, append([]envVar{{"ZW_API_URL", cp.URL()}, {"ZW_CACERT", caFile}, {"ZW_TOKEN", cp.AdminToken()},
		{zwclient.EnvConfig, zwctlConfig}, {"KUBECONFIG", kubeconfig},
		{"TEMPORAL_ADDRESS", tmp.Address()}, {"TEMPORAL_NAMESPACE", devstack.DefaultNamespace},
		{"TEMPORAL_TLS_CERT", opCert.CertFile}, {"TEMPORAL_TLS_KEY", opCert.KeyFile}, {"TEMPORAL_TLS_CA", opCert.CAFile}, {"TEMPORAL_TLS_SERVER_NAME", opCert.ServerName},
	}, registryEnv...), zwctlDir()); err != nil {
		return err
	}

	nodeList := "none (--nodes 0); pod CIDRs would come from " + health.ClusterCIDR
	if *nodes > 0 {
		sim, err := devnodes.FindSim()
		if err != nil {
			return err
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		ns, err := devnodes.Start(ctx, devnodes.Config{Count: *nodes, DataDir: filepath.Join(*dataDir, "nodes"), Agent: self, Sim: sim, Tokens: &auth.Tokens{Pool: cp.Store.Pool()},
			Temporal: tmp.Address(), Namespace: devstack.DefaultNamespace, TemporalMTLS: true, Logger: log,
			APIURL: cp.URL(), APICAFile: caFile,
			ExtraArgs: []string{"--heartbeat-interval", devHeartbeat(health.NodeGracePeriod).String(),
				"--reconcile-interval", *reconcile, "--orphan-grace", *orphanGrace,
				"--cluster-domain", health.DNS.Domain, "--dns-upstream", upstreamFlag(health.DNS.Upstreams)},
			Underlay: underlay})
		if err != nil {
			return err
		}
		nodeDial.Use(ns.Fabric())
		stops = append(stops, ns.Stop)
		// A dead agent is restarted, as SMF would; the supervision ends
		// before the agents are stopped (stops run last to first).
		supervise, stopSupervising := context.WithCancel(ctx)
		ns.Supervise(supervise)
		stops = append(stops, stopSupervising)
		nodeList = "pod CIDRs assigned from " + health.ClusterCIDR
		if underlay.IsValid() {
			nodeList += ", isolation mode: each node a network namespace on the underlay " + underlay.String()
			if os.Geteuid() != 0 {
				nodeList += " in a user namespace of this stack's, each zone a subordinate id of yours"
			}
			nodeList += " (reach pods with zwctl port-forward or exec)"
		} else {
			nodeList += ", shared loopback: pods reachable from this machine (" + isolationOff + ")"
		}
		for _, n := range ns.Nodes {
			nodeList += fmt.Sprintf("\n    %s  state %s  agent pid %d (%s)", n.Name, n.Root, n.Pid(), n.PidFile)
		}
	}

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
`, time.Since(start).Round(time.Millisecond), cp.URL(), caFile, cp.CA().Fingerprint(), ui.URL(), tmp.Address(), devstack.DefaultNamespace, tlsDir, redact(url), dbShown, *dataDir, nodeList, cp.ServiceCIDR(), cp.ClusterDNSAddress(),
		dnsShown(cp.DNSAddr()), health.DNS.Domain, img.ImageSourceDir, registryShown, controlplane.AdminTokenFile(stateDir), filepath.Join(stateDir, "audit.log"), exposed, envFile)

	select {
	case <-ctx.Done():
		log.Info("stopping the dev stack")
	case err := <-cp.Served():
		return fmt.Errorf("API server stopped: %w", err)
	}
	return nil
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
