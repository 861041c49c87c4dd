package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	tclient "go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/zonewright/zonewright/deploy"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devnodes"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/pgserver"
	"github.com/zonewright/zonewright/internal/pki"
)

// loopbackServiceCIDR is the service range on the shared loopback, where
// the simulated nodes' NAT listens on ClusterIPs: apart from the ranges of
// the dev stack and of the benchmark. In isolation mode services get
// serve's default range, inside the nodes' namespaces.
const loopbackServiceCIDR = "127.93.0.0/16"

// stack is every process of the system, each on its own, as in
// production: PostgreSQL, the Temporal server, API replicas and agents.
type stack struct {
	dir      string
	stateDir string // the replicas' shared --state-dir: cluster CA, admin token
	bin      string
	sim      string
	log      *slog.Logger

	pgMu  sync.Mutex // guards pg across restarts
	pg    *pgserver.Server
	pgDir string
	dbURL string
	db    *pgxpool.Pool // the harness's own view of the tables

	temporalProc *proc
	temporalAddr string
	replicas     []*proc
	apiURLs      []string
	dnsAddrs     []string
	clusterCIDR  string
	serviceCIDR  string
	// nodesDir holds the nodes' data; in isolation mode it names their
	// namespaces (fabric.Leftovers).
	nodesDir  string
	nodes     *devnodes.Nodes
	stopNodes context.CancelFunc

	stopped bool

	token    string
	client   *http.Client
	temporal tclient.Client // as an operator, to list workflows
}

func startStack(ctx context.Context, binDir string, replicas, nodes int, isolated bool, log *slog.Logger) (*stack, error) {
	bin, err := filepath.Abs(binDir)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "zwchaos-")
	if err != nil {
		return nil, err
	}
	s := &stack{dir: dir, stateDir: filepath.Join(dir, "state"), bin: bin, sim: filepath.Join(bin, "illumos-sim"), log: log,
		pgDir: filepath.Join(dir, "postgres")}
	s.clusterCIDR, s.serviceCIDR, s.nodesDir = devnodes.ClusterCIDROf(dir), loopbackServiceCIDR, filepath.Join(dir, "nodes")
	var underlay netip.Prefix
	if isolated {
		// The network number the directory picks, on 10/8 inside the
		// namespaces.
		n := int(netip.MustParsePrefix(s.clusterCIDR).Addr().As4()[1])
		underlay, s.clusterCIDR, s.serviceCIDR = fabric.IsolatedUnderlay(n), fabric.IsolatedClusterCIDR(n), clusterip.DefaultCIDR
	}
	ca, err := pki.LoadOrCreateCA(filepath.Join(s.stateDir, "tls"), controlplane.CACommonName)
	if err != nil {
		return s, err
	}
	if s.pg, err = pgserver.Start(ctx, pgserver.Config{DataDir: s.pgDir}); err != nil {
		return s, err
	}
	if s.dbURL, err = s.pg.EnsureDatabase(ctx, "zonewright"); err != nil {
		return s, err
	}
	if s.db, err = pgxpool.New(ctx, s.dbURL); err != nil {
		return s, err
	}

	if s.temporalAddr, err = devstack.FreeAddr(); err != nil {
		return s, err
	}
	s.temporalProc = &proc{kind: kindTemporal, name: "temporal", out: log, log: filepath.Join(dir, "temporal.log"),
		// Production's server: its state in the stack's PostgreSQL, with
		// its default history shards.
		args: []string{filepath.Join(bin, "zonewright"), "temporal", "--data-dir", filepath.Join(dir, "temporal"),
			"--temporal-database-url", s.pg.URL("temporal"), "--database-url", s.dbURL,
			"--state-dir", s.stateDir, "--address", s.temporalAddr, "--log-level", "warn"}}
	if err := s.temporalProc.start(); err != nil {
		return s, err
	}
	go s.temporalProc.supervise()
	cpCert, err := devstack.EnsureClientTLS(ca, filepath.Join(s.stateDir, "tls"), "temporal-control-plane", devstack.ControlPlaneName)
	if err != nil {
		return s, err
	}
	opCert, err := devstack.EnsureClientTLS(ca, filepath.Join(s.stateDir, "tls"), "temporal-operator", "zwchaos", devstack.AdminOrg)
	if err != nil {
		return s, err
	}
	opTLS, err := controlplane.TLSConfig(opCert).ClientTLS()
	if err != nil {
		return s, err
	}
	if s.temporal, err = tclient.NewLazyClient(tclient.Options{HostPort: s.temporalAddr, Namespace: devstack.DefaultNamespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)), ConnectionOptions: tclient.ConnectionOptions{TLS: opTLS}}); err != nil {
		return s, err
	}
	imageMap := filepath.Join(dir, "images.yaml")
	if err := os.WriteFile(imageMap, deploy.ImageMap, 0o644); err != nil {
		return s, err
	}
	keyFile := filepath.Join(dir, "encryption.key")
	if _, err := encryption.EnsureKeyFile(keyFile); err != nil {
		return s, err
	}
	// The replicas share the database, Temporal, the state directory
	// (cluster CA, admin token), the image store and the encryption key;
	// each has its own API and DNS address.
	for i := range replicas {
		listen, err := devstack.FreeAddr()
		if err != nil {
			return s, err
		}
		dnsAddr, err := devstack.FreeAddr()
		if err != nil {
			return s, err
		}
		name := fmt.Sprintf("serve-%d", i+1)
		p := &proc{kind: kindServe, name: name, out: log, log: filepath.Join(dir, name+".log"),
			args: []string{filepath.Join(bin, "zonewright"), "serve", "--database-url", s.dbURL, "--listen", listen,
				"--state-dir", s.stateDir, "--temporal-address", s.temporalAddr, "--temporal-namespace", devstack.DefaultNamespace,
				"--temporal-tls-cert", cpCert.CertFile, "--temporal-tls-key", cpCert.KeyFile, "--temporal-tls-ca", cpCert.CAFile,
				"--temporal-tls-server-name", cpCert.ServerName,
				"--image-store", filepath.Join(dir, "images"), "--image-map", imageMap, "--encryption-key-file", keyFile,
				"--service-cidr", s.serviceCIDR, "--cluster-cidr", s.clusterCIDR, "--node-cidr-mask-size", strconv.Itoa(devnodes.NodeCIDRMaskSize),
				"--dns-listen", dnsAddr, "--dns-upstream", "none",
				"--node-grace-period", "20s", "--node-eviction-timeout", "60s", "--log-level", "warn"}}
		if err := p.start(); err != nil {
			return s, err
		}
		go p.supervise()
		s.replicas = append(s.replicas, p)
		s.apiURLs = append(s.apiURLs, "https://"+listen)
		s.dnsAddrs = append(s.dnsAddrs, dnsAddr)
		// The first replica makes the admin token and the API
		// certificate the others then find in the state directory.
		if i == 0 {
			if err := waitFor(ctx, 3*time.Minute, func() bool {
				_, err := os.Stat(controlplane.AdminTokenFile(s.stateDir))
				return err == nil && s.healthy(s.apiURLs[0])
			}); err != nil {
				return s, fmt.Errorf("%s did not come up (see %s): %w", name, p.log, err)
			}
		}
	}
	tok, err := os.ReadFile(controlplane.AdminTokenFile(s.stateDir))
	if err != nil {
		return s, err
	}
	s.token = strings.TrimSpace(string(tok))
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: auth.Bearer{Token: s.token, Next: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 16}}}
	for _, u := range s.apiURLs {
		if err := waitFor(ctx, 3*time.Minute, func() bool { return s.ready(u) }); err != nil {
			return s, fmt.Errorf("API %s not ready: %w", u, err)
		}
	}

	if s.nodes, err = devnodes.Start(ctx, devnodes.Config{Count: nodes, DataDir: s.nodesDir, Tokens: &auth.Tokens{Pool: s.db}, Underlay: underlay,
		Agent: filepath.Join(bin, "zonewright"), Sim: s.sim, Temporal: s.temporalAddr, Namespace: devstack.DefaultNamespace, TemporalMTLS: true,
		Logger: log, APIURLs: s.apiURLs, APICAFile: controlplane.CAFile(s.stateDir),
		ExtraArgs: []string{"--heartbeat-interval", "2s", "--dns-upstream", "none"}}); err != nil {
		return s, err
	}
	superviseCtx, stopNodes := context.WithCancel(context.Background())
	s.stopNodes = stopNodes
	s.nodes.Supervise(superviseCtx)
	return s, nil
}

// Kinds of processes, as the kill counts name them.
const (
	kindAgent    = "agent"
	kindServe    = "serve"
	kindTemporal = "temporal"
	kindPostgres = "postgres"
)

// healthy reports whether the API at base answers /healthz.
func (s *stack) healthy(base string) bool {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only liveness is asked
	resp, err := c.Get(base + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// ready reports whether the API at base says it is ready (database and
// Temporal reachable).
func (s *stack) ready(base string) bool {
	resp, err := s.client.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// restartPostgres stops PostgreSQL, fast (SIGINT) or by SIGKILL of its
// whole process group, and starts it again on the same data directory
// and port.
func (s *stack) restartPostgres(ctx context.Context, hard bool) error {
	s.pgMu.Lock()
	defer s.pgMu.Unlock()
	port := s.pg.Port()
	if hard {
		_ = syscall.Kill(-s.pg.Pid(), syscall.SIGKILL)
	}
	_ = s.pg.Stop() // after a kill, only waits for the exit
	var err error
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		var pg *pgserver.Server
		if pg, err = pgserver.Start(ctx, pgserver.Config{DataDir: s.pgDir, Port: port}); err == nil {
			s.pg = pg
			s.log.Info("PostgreSQL restarted", "pid", pg.Pid(), "port", port)
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("start PostgreSQL again: %w", err)
}

// simCmd runs illumos-sim on node i's state root.
func (s *stack) simCmd(ctx context.Context, i int, args ...string) ([]byte, error) {
	full := append(args[:1:1], append([]string{"--root", s.nodes.Nodes[i].Root}, args[1:]...)...)
	out, err := exec.CommandContext(ctx, s.sim, full...).Output()
	if err != nil {
		return out, fmt.Errorf("illumos-sim %s: %w", strings.Join(full, " "), err)
	}
	return out, nil
}

// allUp reports whether every process runs and every API is ready.
func (s *stack) allUp() bool {
	if len(s.nodes.Exited()) > 0 || !s.temporalProc.running() {
		return false
	}
	for i, r := range s.replicas {
		if !r.running() || !s.ready(s.apiURLs[i]) {
			return false
		}
	}
	return true
}

func (s *stack) stop(keep bool) {
	if s.stopped {
		return
	}
	s.stopped = true
	if s.stopNodes != nil {
		s.stopNodes()
	}
	if s.nodes != nil {
		s.nodes.Stop()
	}
	var wg sync.WaitGroup
	for _, r := range s.replicas {
		wg.Add(1)
		go func() { defer wg.Done(); r.stop() }()
	}
	wg.Wait()
	if s.temporal != nil {
		s.temporal.Close()
	}
	if s.temporalProc != nil {
		s.temporalProc.stop()
	}
	if s.db != nil {
		s.db.Close()
	}
	s.pgMu.Lock()
	if s.pg != nil {
		_ = s.pg.Stop()
	}
	s.pgMu.Unlock()
	if !keep {
		_ = os.RemoveAll(s.dir)
	}
}

// leftovers is what the stopped stack left on this machine: processes
// naming its directory (agents, simulated zones, servers) and, in
// isolation mode, its namespaces and links. It waits up to 10 s for
// processes on their way out.
func (s *stack) leftovers() []string {
	var out []string
	_ = waitFor(context.Background(), 10*time.Second, func() bool {
		out = fabric.Leftovers(s.nodesDir)
		for _, pid := range pidsNaming(s.dir) {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			out = append(out, fmt.Sprintf("process %d: %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
		}
		return len(out) == 0
	})
	return out
}

// pidsNaming are the processes an argument of which contains s.
func pidsNaming(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), s) {
			out = append(out, pid)
		}
	}
	return out
}

// waitFor polls cond every half second until it holds or d has passed.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
