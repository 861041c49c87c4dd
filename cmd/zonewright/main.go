// Command zonewright runs zonewright: `serve` (the control plane), `agent`
// (on each illumos host), `dev` (the whole stack on one machine, embedded
// defaults), `init` (a deployment's CA and encryption key) and `migrate`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/clusterdns"
	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/imagegc"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/imagestore"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/podcidr"
	"github.com/zonewright/zonewright/internal/scheduler"
	"github.com/zonewright/zonewright/internal/store"
)

type command func(ctx context.Context, args []string) error

// commands maps each subcommand to its entry point; dev comes only on
// platforms that embed the Temporal server (not the illumos build).
func commands() map[string]command {
	cmds := map[string]command{"serve": serve, "migrate": migrate, "agent": agent, "token": token, "node": node, "init": initState}
	for name, c := range platformCommands() {
		cmds[name] = c
	}
	return cmds
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	run, ok := commands()[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "zonewright: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "zonewright %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	names := []string{}
	for n := range commands() {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: zonewright <%s> [flags]\nRun 'zonewright <command> -h' for a command's flags.\n", strings.Join(names, "|"))
}

// env returns the value of an environment variable, or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

// serveOptions are serve's flags.
type serveOptions struct {
	controlplane.Config
	imageMap          string
	encryptionKeyFile string
	logLevel          string
	nodeHealth        func() error
	dns               func() error
	capacity          func() error
	images            func() error
	auditLog          string
}

func serveFlags() (*flag.FlagSet, *serveOptions) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	o := &serveOptions{}
	fs.StringVar(&o.DatabaseURL, "database-url", env("ZW_DATABASE_URL", ""), "PostgreSQL URL (env ZW_DATABASE_URL)")
	fs.StringVar(&o.Listen, "listen", env("ZW_LISTEN", "127.0.0.1:8080"), "API listen address (env ZW_LISTEN)")
	fs.StringVar(&o.StateDir, "state-dir", env("ZW_STATE_DIR", "/var/lib/zonewright"), "directory of the cluster CA and the API's server certificate (tls/), and of the cluster-admin token made on first start (admin.token, mode 0600) (env ZW_STATE_DIR)")
	apiTLSFlags(fs, &o.APITLS)
	fs.BoolVar(&o.APITLS.InsecureHTTP, "insecure-http", envBool("ZW_INSECURE_HTTP"), "serve the API over plain HTTP, readable and alterable by anyone on the network path (env ZW_INSECURE_HTTP)")
	temporalFlags(fs, &o.Config)
	o.images = imageFlags(fs, &o.Config, "/var/lib/zonewright/images", "", "")
	fs.StringVar(&o.imageMap, "image-map", env("ZW_IMAGE_MAP", ""), "image map file: default image, aliases, size presets, images (env ZW_IMAGE_MAP)")
	fs.StringVar(&o.encryptionKeyFile, "encryption-key-file", env("ZW_ENCRYPTION_KEY_FILE", ""),
		"file holding the 32-byte key secrets are encrypted with at rest, raw or base64 (head -c 32 /dev/urandom | base64); the same on every replica; without it the API keeps no secrets (env ZW_ENCRYPTION_KEY_FILE)")
	o.nodeHealth = nodeHealthFlags(fs, &o.Config)
	serviceCIDRFlag(fs, &o.Config, clusterip.DefaultCIDR)
	podCIDRFlags(fs, &o.Config, podcidr.DefaultClusterCIDR)
	o.dns = dnsFlags(fs, &o.Config.DNS, "")
	o.capacity = capacityFlag(fs, &o.Config)
	fs.StringVar(&o.auditLog, "audit-log", env("ZW_AUDIT_LOG", ""), "file the audit log (a JSON line per mutating or refused request) is appended to; - for stderr; empty: none (env ZW_AUDIT_LOG)")
	maxConnectionsFlag(fs, &o.Config)
	streamBoundsFlags(fs, &o.Config)
	fs.IntVar(&o.MaxWatches, "max-watches-per-identity", envInt("ZW_MAX_WATCHES_PER_IDENTITY", api.DefaultMaxWatches), "watches one identity may hold open at once; beyond, 429 (env ZW_MAX_WATCHES_PER_IDENTITY)")
	fs.StringVar(&o.logLevel, "log-level", env("ZW_LOG_LEVEL", "info"), "debug, info, warn or error (env ZW_LOG_LEVEL)")
	return fs, o
}

func serve(ctx context.Context, args []string) error {
	fs, o := serveFlags()
	_ = fs.Parse(args)
	if o.DatabaseURL == "" {
		return fmt.Errorf("--database-url (or ZW_DATABASE_URL) is required")
	}
	if err := o.TemporalTLS.Check(o.TemporalInsecure); err != nil {
		return err
	}
	if err := o.nodeHealth(); err != nil {
		return err
	}
	if _, err := clusterip.Parse(o.ServiceCIDR); err != nil {
		return fmt.Errorf("--service-cidr: %w", err)
	}
	if _, err := podcidr.ParseRange(o.ClusterCIDR, o.NodeCIDRMaskSize); err != nil {
		return fmt.Errorf("--cluster-cidr, --node-cidr-mask-size: %w", err)
	}
	if err := o.dns(); err != nil {
		return err
	}
	if err := o.capacity(); err != nil {
		return err
	}
	if err := o.images(); err != nil {
		return err
	}
	log, err := newLogger(o.logLevel)
	if err != nil {
		return err
	}
	warnShortGrace(log, o.NodeGracePeriod)
	warnIfInsecureTemporal(log, o.Config)
	tc := o.Config
	tc.Logger = log
	audit, closeAudit, err := openAuditLog(o.auditLog)
	if err != nil {
		return err
	}
	defer closeAudit()
	tc.AuditLog = audit
	if tc.ImageMap, err = imagemap.Load(o.imageMap); err != nil {
		return err
	}
	if o.encryptionKeyFile != "" {
		if tc.EncryptionKey, err = encryption.LoadKeyFile(o.encryptionKeyFile); err != nil {
			return fmt.Errorf("--encryption-key-file: %w", err)
		}
	} else {
		log.Warn("no --encryption-key-file: this API keeps no secrets (their endpoints answer 503)")
	}
	cp, err := controlplane.Start(ctx, tc)
	if err != nil {
		return err
	}
	log.Info("zonewright serving", "api", cp.URL(), "admin-token", controlplane.AdminTokenFile(tc.StateDir), "dns", cp.DNSAddr(), "temporal", tc.TemporalAddress, "namespace", tc.TemporalNamespace)
	select {
	case <-ctx.Done():
	case err := <-cp.Served():
		log.Error("API server stopped", "err", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cp.Stop(sctx)
}

// imageFlags registers the image catalog's flags shared by serve and dev;
// the function returned completes c once the flags are parsed.
func imageFlags(fs *flag.FlagSet, c *controlplane.Config, defaultStore, defaultSourceDir, defaultPrivate string) func() error {
	fs.StringVar(&c.ImageStore, "image-store", env("ZW_IMAGE_STORE", defaultStore), "directory imported images are kept in (env ZW_IMAGE_STORE)")
	fs.StringVar(&c.TransferDir, "transfer-dir", env("ZW_TRANSFER_DIR", ""), "directory the streams of claims moving between nodes pass through; default volume-transfers beside --image-store (env ZW_TRANSFER_DIR)")
	fs.StringVar(&c.AdvertiseURL, "advertise-url", env("ZW_ADVERTISE_URL", ""), "the API's URL as nodes reach it; default from --listen (env ZW_ADVERTISE_URL)")
	fs.DurationVar(&c.ImageStallTimeout, "image-stall-timeout", envDuration("ZW_IMAGE_STALL_TIMEOUT", time.Minute), "an image download receiving nothing this long is stalled and retried (env ZW_IMAGE_STALL_TIMEOUT)")
	fs.StringVar(&c.ImageSourceDir, "image-source-dir", env("ZW_IMAGE_SOURCE_DIR", defaultSourceDir), "file:// image sources only beneath this directory; empty refuses file:// sources (env ZW_IMAGE_SOURCE_DIR)")
	private := fs.String("image-allow-private-sources", env("ZW_IMAGE_ALLOW_PRIVATE_SOURCES", defaultPrivate),
		"comma-separated CIDRs of loopback, private or link-local addresses http(s) image sources may reach anyway, e.g. 127.0.0.0/8,::1 or 10.20.0.0/16; empty: public addresses only (env ZW_IMAGE_ALLOW_PRIVATE_SOURCES)")
	insecure := fs.String("insecure-registries", env("ZW_INSECURE_REGISTRIES", ""),
		"comma-separated registries (host[:port]) spoken to over plain http; loopback ones always are (env ZW_INSECURE_REGISTRIES)")
	fs.DurationVar(&c.PodRegistryImageTTL, "pod-registry-image-ttl", envDuration("ZW_POD_REGISTRY_IMAGE_TTL", controlops.DefaultUnusedPodImageTTL),
		"a registry image pods added to the catalog is removed once no pod has used it this long (env ZW_POD_REGISTRY_IMAGE_TTL)")
	fs.IntVar(&c.MaxPodRegistryImages, "max-pod-registry-images", envInt("ZW_MAX_POD_REGISTRY_IMAGES", api.DefaultMaxPodRegistryImages),
		"registry images pods may add to the catalog; a pod that would add one more is refused (403) (env ZW_MAX_POD_REGISTRY_IMAGES)")
	fs.IntVar(&c.ImageGC.High, "image-gc-high-threshold", envInt("ZW_IMAGE_GC_HIGH_THRESHOLD", imagegc.DefaultHighThreshold),
		"percent of a node's pool in use at which its unused images are removed, least recently used first; 100 turns image GC off (env ZW_IMAGE_GC_HIGH_THRESHOLD)")
	fs.IntVar(&c.ImageGC.Low, "image-gc-low-threshold", envInt("ZW_IMAGE_GC_LOW_THRESHOLD", imagegc.DefaultLowThreshold),
		"percent of a node's pool image GC brings the usage below; above 0 and below --image-gc-high-threshold (env ZW_IMAGE_GC_LOW_THRESHOLD)")
	maxBytes := fs.String("image-max-bytes", env("ZW_IMAGE_MAX_BYTES", "20Gi"), "largest image download and decompressed image accepted, a quantity such as 20Gi (env ZW_IMAGE_MAX_BYTES)")
	return func() error {
		var err error
		for _, r := range strings.Split(*insecure, ",") {
			if r = strings.TrimSpace(r); r != "" {
				c.InsecureRegistries = append(c.InsecureRegistries, r)
			}
		}
		if c.ImageAllowPrivateSources, err = imagestore.ParsePrefixes(*private); err != nil {
			return fmt.Errorf("--image-allow-private-sources: %w", err)
		}
		milli, err := model.ParseQuantity(*maxBytes)
		if err != nil || milli < 1000 {
			return fmt.Errorf("--image-max-bytes: %q is not a positive size such as 20Gi", *maxBytes)
		}
		c.ImageMaxBytes = milli / 1000
		if c.PodRegistryImageTTL <= 0 || c.MaxPodRegistryImages <= 0 {
			return fmt.Errorf("--pod-registry-image-ttl and --max-pod-registry-images must be positive")
		}
		if err := c.ImageGC.Check(); err != nil {
			return fmt.Errorf("--image-gc-high-threshold, --image-gc-low-threshold: %w", err)
		}
		if c.ImageSourceDir != "" && !filepath.IsAbs(c.ImageSourceDir) {
			if c.ImageSourceDir, err = filepath.Abs(c.ImageSourceDir); err != nil {
				return fmt.Errorf("--image-source-dir: %w", err)
			}
		}
		return nil
	}
}

// apiTLSFlags registers the API's certificate flags; --tls-san and
// --client-ca repeat or take comma-separated lists (one SMF property).
func apiTLSFlags(fs *flag.FlagSet, t *controlplane.APITLS) {
	fs.StringVar(&t.CertFile, "tls-cert", env("ZW_TLS_CERT", ""), "the API's server certificate, PEM; empty: one issued by the cluster CA in --state-dir (env ZW_TLS_CERT)")
	fs.StringVar(&t.KeyFile, "tls-key", env("ZW_TLS_KEY", ""), "the key of --tls-cert, PEM (env ZW_TLS_KEY)")
	t.SANs = splitList(env("ZW_TLS_SAN", ""))
	fs.Var((*listFlag)(&t.SANs), "tls-san", "a DNS name or IP address the issued server certificate names besides the --listen and --advertise-url hosts; repeat or separate with commas (env ZW_TLS_SAN)")
	t.ClientCAFiles = splitList(env("ZW_CLIENT_CA", ""))
	fs.Var((*listFlag)(&t.ClientCAFiles), "client-ca", "a CA file whose client certificates the API accepts besides the cluster CA's; repeat or separate with commas (env ZW_CLIENT_CA)")
	t.ClientCAAdmins = splitList(env("ZW_CLIENT_CA_ADMIN", ""))
	fs.Var((*listFlag)(&t.ClientCAAdmins), "client-ca-admin", "the common name of a --client-ca certificate that is a cluster-admin; a --client-ca certificate is nothing else; repeat or separate with commas (env ZW_CLIENT_CA_ADMIN)")
}

// listFlag is a flag that repeats, each value a comma-separated list.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// envBool is env for a boolean; a malformed value is false.
func envBool(name string) bool {
	b, _ := strconv.ParseBool(os.Getenv(name))
	return b
}

// serviceCIDRFlag registers --service-cidr, shared by serve and dev.
func serviceCIDRFlag(fs *flag.FlagSet, c *controlplane.Config, def string) {
	fs.StringVar(&c.ServiceCIDR, "service-cidr", env("ZW_SERVICE_CIDR", def),
		"IPv4 range services' cluster IPs come from, /12 to /28; its base + 10 is the cluster DNS (env ZW_SERVICE_CIDR)")
}

// maxConnectionsFlag registers --max-connections and
// --max-unauthenticated-connections, shared by serve and dev.
func maxConnectionsFlag(fs *flag.FlagSet, c *controlplane.Config) {
	fs.IntVar(&c.MaxConnections, "max-connections", envInt("ZW_MAX_CONNECTIONS", controlplane.DefaultMaxConnections),
		"API connections held open at once; more wait to be accepted, so that clients that connect and stall cannot use up the process's file descriptors (env ZW_MAX_CONNECTIONS)")
	fs.IntVar(&c.MaxUnauthenticated, "max-unauthenticated-connections", envInt("ZW_MAX_UNAUTHENTICATED_CONNECTIONS", 0),
		"of those, the ones held before their client is authenticated; one more closes the one that has waited longest, so that clients that connect and stall cannot keep out those with credentials; 0: a quarter of --max-connections (env ZW_MAX_UNAUTHENTICATED_CONNECTIONS)")
}

// streamBoundsFlags registers --min-request-timeout and
// --streaming-connection-idle-timeout, shared by serve and dev.
func streamBoundsFlags(fs *flag.FlagSet, c *controlplane.Config) {
	fs.DurationVar(&c.MinRequestTimeout, "min-request-timeout", envDuration("ZW_MIN_REQUEST_TIMEOUT", api.DefaultMinRequestTimeout),
		"a watch without timeoutSeconds ends after between this and twice this, at random, and its client watches again; timeoutSeconds may ask for at most twice this (env ZW_MIN_REQUEST_TIMEOUT)")
	fs.DurationVar(&c.StreamIdleTimeout, "streaming-connection-idle-timeout", envDuration("ZW_STREAMING_CONNECTION_IDLE_TIMEOUT", api.DefaultStreamIdleTimeout),
		"an exec session, port-forward or pod log that carries nothing either way for this long is ended (env ZW_STREAMING_CONNECTION_IDLE_TIMEOUT)")
}

// podCIDRFlags registers --cluster-cidr and --node-cidr-mask-size, shared
// by serve and dev: the control plane assigns each node a pod CIDR of
// that size from that range.
func podCIDRFlags(fs *flag.FlagSet, c *controlplane.Config, def string) {
	fs.StringVar(&c.ClusterCIDR, "cluster-cidr", env("ZW_CLUSTER_CIDR", def),
		"IPv4 range nodes' pod CIDRs are assigned from, one block per node, never overlapping (env ZW_CLUSTER_CIDR)")
	fs.IntVar(&c.NodeCIDRMaskSize, "node-cidr-mask-size", envInt("ZW_NODE_CIDR_MASK_SIZE", podcidr.DefaultNodeMaskSize),
		"prefix length of each node's pod CIDR, e.g. 24: 253 pod addresses (env ZW_NODE_CIDR_MASK_SIZE)")
}

// capacityFlag registers --capacity, shared by serve and dev; the
// function returned parses it once the flags are parsed.
func capacityFlag(fs *flag.FlagSet, c *controlplane.Config) func() error {
	text := fs.String("capacity", env("ZW_CAPACITY", ""),
		"pods carrying a label or naming an image that run at once across the cluster, e.g. image=omnios-r151054:4,size=large:2; more wait Pending (CapacityExceeded), first come first served (env ZW_CAPACITY)")
	return func() error {
		capacity, err := scheduler.ParseCapacity(*text)
		if err != nil {
			return fmt.Errorf("--capacity: %w", err)
		}
		c.Capacity = capacity
		return nil
	}
}

// dnsFlags registers the cluster DNS's flags, shared by serve and dev;
// the function returned completes c once the flags are parsed.
func dnsFlags(fs *flag.FlagSet, c *clusterdns.Config, defListen string) func() error {
	fs.StringVar(&c.Addr, "dns-listen", env("ZW_DNS_LISTEN", defListen),
		"address the cluster DNS answers on, UDP and TCP; empty serves none (env ZW_DNS_LISTEN)")
	fs.StringVar(&c.Domain, "cluster-domain", env("ZW_CLUSTER_DOMAIN", clusterdns.DefaultDomain),
		"the cluster's DNS domain: <service>.<namespace>.svc.<domain> (env ZW_CLUSTER_DOMAIN)")
	upstream := fs.String("dns-upstream", env("ZW_DNS_UPSTREAM", ""),
		"resolvers for names outside the cluster domain, comma-separated; empty: those of /etc/resolv.conf; none: refuse such names (env ZW_DNS_UPSTREAM)")
	return func() error {
		if err := clusterdns.CheckDomain(c.Domain); err != nil {
			return fmt.Errorf("--cluster-domain: %w", err)
		}
		c.Upstreams = clusterdns.ParseUpstreams(*upstream)
		return nil
	}
}

// upstreamFlag is the --dns-upstream value that parses back to upstreams.
func upstreamFlag(upstreams []string) string {
	if upstreams != nil && len(upstreams) == 0 {
		return "none"
	}
	return strings.Join(upstreams, ",")
}

// openAuditLog opens --audit-log: "" none (a nil writer), "-" stderr,
// else a file appended to (mode 0600: it names who did what).
func openAuditLog(path string) (io.Writer, func() error, error) {
	switch path {
	case "":
		return nil, func() error { return nil }, nil
	case "-":
		return os.Stderr, func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("--audit-log: %w", err)
	}
	return f, f.Close, nil
}

// envDuration is env for a duration; a malformed value keeps def.
func envDuration(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

// envInt is env for a number; a malformed value keeps def.
func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// temporalFlags registers the Temporal connection flags shared by serve and agent.
func temporalFlags(fs *flag.FlagSet, c *controlplane.Config) {
	fs.StringVar(&c.TemporalAddress, "temporal-address", env("ZW_TEMPORAL_ADDRESS", "127.0.0.1:7233"), "Temporal frontend host:port (env ZW_TEMPORAL_ADDRESS)")
	fs.StringVar(&c.TemporalNamespace, "temporal-namespace", env("ZW_TEMPORAL_NAMESPACE", "default"), "Temporal namespace (env ZW_TEMPORAL_NAMESPACE)")
	fs.StringVar(&c.TemporalTLS.CertFile, "temporal-tls-cert", env("ZW_TEMPORAL_TLS_CERT", ""), "client certificate for Temporal mTLS (env ZW_TEMPORAL_TLS_CERT)")
	fs.StringVar(&c.TemporalTLS.KeyFile, "temporal-tls-key", env("ZW_TEMPORAL_TLS_KEY", ""), "client key for Temporal mTLS (env ZW_TEMPORAL_TLS_KEY)")
	fs.StringVar(&c.TemporalTLS.CAFile, "temporal-tls-ca", env("ZW_TEMPORAL_TLS_CA", ""), "CA bundle that signed the Temporal server certificate (env ZW_TEMPORAL_TLS_CA)")
	fs.StringVar(&c.TemporalTLS.ServerName, "temporal-tls-server-name", env("ZW_TEMPORAL_TLS_SERVER_NAME", ""), "expected Temporal server name (env ZW_TEMPORAL_TLS_SERVER_NAME)")
	fs.BoolVar(&c.TemporalInsecure, "temporal-insecure", envBool("ZW_TEMPORAL_INSECURE"), "reach Temporal in plaintext, where anyone on the path reads and drives the cluster's workflows; without a --temporal-tls-* option it is refused unless this is set (env ZW_TEMPORAL_INSECURE)")
}

// warnIfInsecureTemporal logs, at every start, that Temporal is reached
// in plaintext.
func warnIfInsecureTemporal(log *slog.Logger, c controlplane.Config) {
	if c.TemporalInsecure {
		log.Warn("Temporal is reached in plaintext (--temporal-insecure): anyone who reaches it can start, signal and complete the cluster's workflows")
	}
}

func migrate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ExitOnError)
	dbURL := fs.String("database-url", env("ZW_DATABASE_URL", ""), "PostgreSQL URL (env ZW_DATABASE_URL)")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: zonewright migrate [--database-url URL] up|down|status")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if *dbURL == "" {
		return fmt.Errorf("--database-url (or ZW_DATABASE_URL) is required")
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want exactly one of up, down, status")
	}
	m, err := store.NewMigrator(*dbURL)
	if err != nil {
		return err
	}
	defer m.Close()
	switch fs.Arg(0) {
	case "up":
		res, err := m.Up(ctx)
		for _, r := range res {
			fmt.Printf("applied %05d %s (%s)\n", r.Source.Version, r.Source.Path, r.Duration.Round(time.Millisecond))
		}
		if err == nil && len(res) == 0 {
			fmt.Println("database is up to date")
		}
		return err
	case "down":
		r, err := m.Down(ctx)
		if r != nil {
			fmt.Printf("rolled back %05d %s\n", r.Source.Version, r.Source.Path)
		}
		return err
	case "status":
		return m.Status(ctx, os.Stdout)
	}
	return fmt.Errorf("unknown migrate action %q: want up, down or status", fs.Arg(0))
}
