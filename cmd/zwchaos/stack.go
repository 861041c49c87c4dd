package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/deploy"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/devcluster"
	"github.com/zonewright/zonewright/internal/devnodes"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/fabric"
)

// loopbackServiceCIDR is the service range on the shared loopback, where
// the simulated nodes' NAT listens on ClusterIPs: apart from the ranges of
// the dev stack and of the benchmark. In isolation mode services get
// serve's default range, inside the nodes' namespaces.
const loopbackServiceCIDR = "127.93.0.0/16"

// stack is every process of the system, each on its own, as in
// production: PostgreSQL, the Temporal server, API replicas and agents.
type stack struct {
	*devcluster.Cluster
	dir string
	sim string
	log *slog.Logger

	clusterCIDR string
	serviceCIDR string

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
	s := &stack{dir: dir, sim: filepath.Join(bin, "illumos-sim"), log: log}
	s.clusterCIDR, s.serviceCIDR = devnodes.ClusterCIDROf(dir), loopbackServiceCIDR
	var underlay netip.Prefix
	if isolated {
		// The network number the directory picks, on 10/8 inside the
		// namespaces.
		n := int(netip.MustParsePrefix(s.clusterCIDR).Addr().As4()[1])
		underlay, s.clusterCIDR, s.serviceCIDR = fabric.IsolatedUnderlay(n), fabric.IsolatedClusterCIDR(n), clusterip.DefaultCIDR
	}
	serveArgs, err := s.serveArgs()
	if err != nil {
		return s, err
	}
	if s.Cluster, err = devcluster.Build(ctx, devcluster.Options{Dir: dir, Logger: log, Replicas: replicas, ServeArgs: serveArgs,
		Zonewright: filepath.Join(bin, "zonewright"), Sim: s.sim, Nodes: nodes, Underlay: underlay, SuperviseAgents: true,
		AgentArgs: []string{"--heartbeat-interval", "2s", "--dns-upstream", "none"}, OperatorName: "zwchaos"}); err != nil {
		return s, err
	}
	s.client = &http.Client{Timeout: 30 * time.Second, Transport: auth.Bearer{Token: s.AdminToken, Next: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: s.CA.Pool(), MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 16}}}
	s.temporal, err = s.DialOperator(slog.New(slog.DiscardHandler))
	return s, err
}

// serveArgs are the API replicas' flags besides those that wire them to
// the rest: they share the image store, the image map and the encryption
// key.
func (s *stack) serveArgs() ([]string, error) {
	imageMap := filepath.Join(s.dir, "images.yaml")
	if err := os.WriteFile(imageMap, deploy.ImageMap, 0o644); err != nil {
		return nil, err
	}
	keyFile := filepath.Join(s.dir, "encryption.key")
	if _, err := encryption.EnsureKeyFile(keyFile); err != nil {
		return nil, err
	}
	return []string{"--image-store", filepath.Join(s.dir, "images"), "--image-map", imageMap, "--encryption-key-file", keyFile,
		"--service-cidr", s.serviceCIDR, "--cluster-cidr", s.clusterCIDR, "--node-cidr-mask-size", strconv.Itoa(devnodes.NodeCIDRMaskSize),
		"--dns-upstream", "none", "--node-grace-period", "20s", "--node-eviction-timeout", "60s", "--log-level", "warn"}, nil
}

// Kinds of processes, as the kill counts name them.
const (
	kindAgent    = "agent"
	kindServe    = "serve"
	kindTemporal = "temporal"
	kindPostgres = "postgres"
)

// ready reports whether the API at base says it is ready (database and
// Temporal reachable).
func (s *stack) ready(base string) bool { return devcluster.Ready(s.client, base) }

// simCmd runs illumos-sim on node i's state root.
func (s *stack) simCmd(ctx context.Context, i int, args ...string) ([]byte, error) {
	full := append(args[:1:1], append([]string{"--root", s.Nodes.Nodes[i].Root}, args[1:]...)...)
	out, err := exec.CommandContext(ctx, s.sim, full...).Output()
	if err != nil {
		return out, fmt.Errorf("illumos-sim %s: %w", strings.Join(full, " "), err)
	}
	return out, nil
}

// allUp reports whether every process runs and every API is ready.
func (s *stack) allUp() bool {
	if len(s.Nodes.Exited()) > 0 || !s.TemporalProcess.Running() {
		return false
	}
	for i, r := range s.Replicas {
		if !r.Running() || !s.ready(s.APIURLs[i]) {
			return false
		}
	}
	return true
}

// stop stops every process; the stack's directory is removed unless
// keep.
func (s *stack) stop(keep bool) {
	if s.temporal != nil {
		s.temporal.Close()
		s.temporal = nil
	}
	if s.Cluster != nil {
		s.Cluster.Stop()
	}
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
	_ = devcluster.WaitFor(context.Background(), 10*time.Second, func() bool {
		out = fabric.Leftovers(s.NodesDir())
		for _, pid := range devcluster.ProcessesNaming(s.dir) {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			out = append(out, fmt.Sprintf("process %d: %s", pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
		}
		return len(out) == 0
	})
	return out
}
