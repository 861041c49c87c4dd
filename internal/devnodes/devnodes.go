// Package devnodes runs the dev stack's simulated nodes: for each, a state
// root and command directory of illumos-sim, and a real `zonewright agent`
// child process pointed at them. Agents get the control plane's API URL
// and nothing of its database: not on their command line, not in their
// environment.
package devnodes

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/childproc"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/fabric"
)

// Config describes the nodes to run.
type Config struct {
	Count     int
	DataDir   string // nodes live in DataDir/node-N
	Agent     string // the zonewright binary
	Sim       string // the illumos-sim binary
	Temporal  string
	Namespace string
	// TemporalMTLS says the Temporal server runs mutual TLS with the
	// cluster CA (APICAFile): each agent presents the node certificate it
	// joined with (CN=node:<name>), which lets it work only its own task
	// queue.
	TemporalMTLS bool
	// TemporalServerName is the name the agents check the Temporal
	// server's certificate for; empty: the embedded server's.
	TemporalServerName string
	// APIURL is the control plane's base URL: the agents register there,
	// get their pod CIDRs, renew their leases and follow the service
	// network.
	APIURL string
	// APIURLs, when set, replace APIURL: node i talks to replica
	// APIURLs[i mod len], so that the nodes spread over API replicas.
	APIURLs []string
	// APICAFile is the CA the agents trust for the API (the cluster CA).
	APICAFile string
	// Tokens issues each agent that holds no certificate yet a join token
	// for its node alone (a join token is spent by its join); each keeps
	// its certificate in its StateDir, so a restarted agent does not join
	// again. Nil: agents join with nothing and fail unless they joined.
	Tokens JoinTokens
	// ExtraArgs are added to every agent's command line.
	ExtraArgs []string
	// Underlay, when set, runs the nodes in isolation mode (root only;
	// see fabric.IsolationSupported): each node a network namespace of its own
	// on a fabric, with an address in Underlay (fabric.IsolatedUnderlay). The
	// control plane's pod range must then be one that stays inside the
	// namespaces (fabric.IsolatedClusterCIDR).
	Underlay netip.Prefix
	// CPUGroups, when set, are cgroup directories every agent is put in
	// as it starts (its cgroup.procs), with everything it starts after:
	// the nodes then share the CPU the cgroups are given.
	CPUGroups []string
	Logger    *slog.Logger
}

// JoinTokens issues join tokens bound to a node: the store's
// (*auth.Tokens), or a client of the API's POST /api/v1/nodejointokens.
type JoinTokens interface {
	IssueJoin(ctx context.Context, issuer auth.Identity, nodeName string, ttl time.Duration) (string, auth.Token, error)
}

// Node is one running simulated node.
type Node struct {
	Name string
	Root string // illumos-sim state root
	// StateDir is the agent's --state-dir: its key and certificate.
	StateDir string
	BinDir   string // its illumos commands
	// PidFile holds the running agent's process id, rewritten at every
	// start.
	PidFile string
	// Netns is the path of the node's network namespace and Address its
	// underlay address, in isolation mode; empty otherwise.
	Netns   string
	Address netip.Prefix

	mu   sync.Mutex // guards cmd and done, replaced when the agent restarts
	cmd  *exec.Cmd
	done chan struct{}
}

// process is the agent's current process and the channel closed when it
// exits.
func (n *Node) process() (*exec.Cmd, chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd, n.done
}

// Nodes are the running nodes.
type Nodes struct {
	cfg      Config
	fab      *fabric.Fabric // nil unless in isolation mode
	Nodes    []*Node
	stopOnce sync.Once
}

// ClusterCIDR is the control plane's pod range for simulated nodes whose
// pod networks are 127.<network>.<n>.0/24 (with NodeCIDRMaskSize): in
// 127.0.0.0/8, so the agent's HTTP and TCP probes reach the containers'
// real processes on this machine. Stacks running side by side on one
// machine need their own network, or their pods' servers would bind the
// same addresses.
func ClusterCIDR(network int) string { return fmt.Sprintf("127.%d.0.0/16", network) }

// ClusterCIDROf is the pod range of a dev stack keeping its data in
// dataDir (an absolute path): 127.<n>.0.0/16 with n from a hash of the
// path, in 128-254, so that stacks in different directories hand out
// different pod addresses, clear of 127.0.0.0/16 and of the networks
// tests and benchmarks number from 10 up. A range overlapping one of
// avoid (the service range) moves on to the next n.
func ClusterCIDROf(dataDir string, avoid ...netip.Prefix) string {
	const first, count = 128, 127
	h := fnv.New32a()
	_, _ = h.Write([]byte(dataDir))
	start := int(h.Sum32() % count)
	for i := range count {
		n := first + (start+i)%count
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(n), 0, 0}), 16)
		if !slices.ContainsFunc(avoid, p.Overlaps) {
			return p.String()
		}
	}
	return ClusterCIDR(10) // every candidate overlaps: avoid covers 127.128.0.0/9
}

// NodeCIDRMaskSize is the size of each simulated node's pod network.
const NodeCIDRMaskSize = 24

// agentEnv is the environment of an agent: this process's, without any
// database setting (an agent holds no database credential).
func agentEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.Contains(name, "DATABASE_URL") || strings.HasPrefix(name, "PG") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// FindSim locates illumos-sim: beside the running binary, else on PATH.
func FindSim() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "illumos-sim")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("illumos-sim"); err == nil {
		return p, nil
	}
	return "", errors.New("illumos-sim not found beside zonewright or on PATH; run `make build` (or pass --nodes 0)")
}

// Start prepares and starts every node.
func Start(ctx context.Context, cfg Config) (*Nodes, error) {
	ns := &Nodes{cfg: cfg}
	if cfg.Underlay.IsValid() {
		dir, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		if ns.fab, err = fabric.New(dir, cfg.Underlay, cfg.Logger); err != nil {
			return nil, err
		}
	}
	for i := 1; i <= cfg.Count; i++ {
		n, err := ns.start(ctx, i)
		if err != nil {
			ns.Stop()
			return nil, err
		}
		ns.Nodes = append(ns.Nodes, n)
	}
	return ns, nil
}

func (ns *Nodes) start(ctx context.Context, i int) (*Node, error) {
	cfg := ns.cfg
	name := fmt.Sprintf("node-%d", i)
	dir, err := filepath.Abs(filepath.Join(cfg.DataDir, name))
	if err != nil {
		return nil, err
	}
	n := &Node{Name: name, Root: filepath.Join(dir, "state"), StateDir: filepath.Join(dir, "agent"), BinDir: filepath.Join(dir, "bin"),
		PidFile: filepath.Join(dir, "agent.pid")}
	if out, err := exec.CommandContext(ctx, cfg.Sim, "install", n.BinDir, "--root", n.Root).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("prepare simulated node %s: %v: %s", name, err, out)
	}
	if ns.fab != nil {
		if err := ns.isolate(n, i); err != nil {
			return nil, err
		}
	}
	if err := ns.run(n); err != nil {
		return nil, err
	}
	return n, nil
}

// joinToken writes a join token for n beside its state directory.
func (ns *Nodes) joinToken(n *Node) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, _, err := ns.cfg.Tokens.IssueJoin(ctx, auth.Identity{}, n.Name, time.Hour)
	if err != nil {
		return "", fmt.Errorf("join token for %s: %w", n.Name, err)
	}
	file := filepath.Join(filepath.Dir(n.StateDir), "join.token")
	return file, os.WriteFile(file, []byte(tok+"\n"), 0o600)
}

// run starts n's agent process.
func (ns *Nodes) run(n *Node) error {
	cfg := ns.cfg
	name := n.Name
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(n.Root), "agent.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	apiURL := cfg.APIURL
	if len(cfg.APIURLs) > 0 {
		i, _ := strconv.Atoi(strings.TrimPrefix(name, "node-"))
		apiURL = cfg.APIURLs[i%len(cfg.APIURLs)]
	}
	args := append([]string{"agent", "--node", name, "--api-url", apiURL,
		"--temporal-address", cfg.Temporal, "--temporal-namespace", cfg.Namespace, "--bin-dir", n.BinDir,
		// The simulator keeps an illumos path P at <root>/fs/P; the agent
		// writes images, volume data and zones' files there itself.
		"--image-dir", filepath.Join(n.Root, "fs/var/zonewright/images"),
		"--zones-dir", filepath.Join(n.Root, "fs", agent.DefaultZonesPath),
		"--zvol-dir", filepath.Join(n.Root, "fs/dev/zvol/rdsk"),
		// The endpoint (logs, exec) on a free port of loopback (of the
		// underlay address in isolation mode), which the node reports in
		// its status.
		"--listen", listenAddr(n)}, cfg.ExtraArgs...)
	if cfg.APICAFile != "" {
		args = append(args, "--api-ca", cfg.APICAFile)
	}
	if cfg.TemporalMTLS {
		// The agent presents the certificate it joined with.
		serverName := cmp.Or(cfg.TemporalServerName, devstack.TemporalServerName)
		args = append(args, "--temporal-tls-ca", cfg.APICAFile, "--temporal-tls-server-name", serverName)
	} else {
		args = append(args, "--temporal-insecure")
	}
	args = append(args, "--state-dir", n.StateDir)
	if _, err := os.Stat(filepath.Join(n.StateDir, agent.NodeCertFile)); err != nil && cfg.Tokens != nil {
		file, err := ns.joinToken(n)
		if err != nil {
			return err
		}
		args = append(args, "--join-token-file", file)
	}
	cmd := exec.Command(cfg.Agent, args...)
	if n.Netns != "" {
		// nsenter executes the agent: the same process, in the node's
		// network.
		cmd = ns.fab.CommandIn(n.Netns, cfg.Agent, args...)
	}
	cmd.Env = agentEnv()
	// The agents die with the dev stack, even if it is killed.
	done, err := childproc.Start(cmd, logf, syscall.SIGTERM)
	if err != nil {
		return fmt.Errorf("agent %s: %w", name, err)
	}
	// At once, before the agent (which joins and registers first) runs
	// a command: its commands and zones are born in the cgroups.
	pid := []byte(strconv.Itoa(cmd.Process.Pid))
	for _, dir := range cfg.CPUGroups {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0); err != nil {
			_ = cmd.Process.Kill()
			return fmt.Errorf("agent %s: into cgroup %s: %w", name, dir, err)
		}
	}
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return writeRenamed(n.PidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"))
}

// writeRenamed writes file whole under another name and renames it into
// place: a reader (the simulator, an operator's kill $(cat agent.pid))
// never finds it empty or half written.
func writeRenamed(file string, b []byte) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// Restart back-off of Supervise: the first wait, and its bound while an
// agent keeps dying within healthyRun of its start.
const (
	firstRestartWait = time.Second
	maxRestartWait   = 30 * time.Second
	healthyRun       = time.Minute
)

// Supervise restarts every agent that exits, as SMF restarts a service,
// until ctx ends: a second after it died, the wait doubling up to 30 s
// while it keeps dying within a minute of its start. Stop the supervision
// (end ctx) before Stop.
func (ns *Nodes) Supervise(ctx context.Context) {
	for _, n := range ns.Nodes {
		go ns.supervise(ctx, n)
	}
}

func (ns *Nodes) supervise(ctx context.Context, n *Node) {
	wait := firstRestartWait
	for {
		started := time.Now()
		cmd, done := n.process()
		select {
		case <-ctx.Done():
			return
		case <-done:
		}
		if time.Since(started) >= healthyRun {
			wait = firstRestartWait
		}
		if ns.cfg.Logger != nil {
			ns.cfg.Logger.Warn("agent exited; restarting it", "node", n.Name, "exit", cmd.ProcessState.String(), "in", wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := ns.run(n); err != nil && ns.cfg.Logger != nil {
			ns.cfg.Logger.Error("restart agent", "node", n.Name, "err", err)
		} else if ns.cfg.Logger != nil {
			ns.cfg.Logger.Info("agent restarted", "node", n.Name, "pid", n.Pid())
		}
		wait = min(2*wait, maxRestartWait)
	}
}

// Stop stops every agent (SIGTERM, then SIGKILL after 15s) and halts every
// simulated zone, so no process outlives the dev stack. The nodes stop
// side by side: one after another, a stack of many nodes took minutes.
// Only the first call does anything.
func (ns *Nodes) Stop() { ns.stopOnce.Do(ns.stop) }

// haltsPerCPU bounds the zones the nodes halt at once across the
// machine when they stop, shared between the nodes: every node's
// stop-all runs at once, and 50 nodes halting 16 zones each starved the
// zones' supervisors (1,500 zones took 124–165 s to stop).
const haltsPerCPU = 32

// slowStop is how long a stop of the nodes may take before it is logged
// with its parts: the agents' exits, then their zones' halts.
const slowStop = 20 * time.Second

func (ns *Nodes) stop() {
	began := time.Now()
	for _, n := range ns.Nodes {
		cmd, _ := n.process()
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	atOnce := strconv.Itoa(max(1, haltsPerCPU*runtime.NumCPU()/max(len(ns.Nodes), 1)))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var agentsOut time.Duration // when the slowest agent had exited
	for _, n := range ns.Nodes {
		wg.Go(func() {
			cmd, done := n.process()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			mu.Lock()
			agentsOut = max(agentsOut, time.Since(began))
			mu.Unlock()
			// What the agent started and left running (a zoneadm boot in
			// flight) ends with it, as SMF ends a stopped service's
			// contract: a boot finishing after stop-all would leave its
			// zone running.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if out, err := ns.fab.Command(ns.cfg.Sim, "stop-all", "--root", n.Root, "--at-once", atOnce).CombinedOutput(); err != nil && ns.cfg.Logger != nil {
				ns.cfg.Logger.Warn("stop simulated zones", "node", n.Name, "err", err, "output", string(out))
			}
		})
	}
	wg.Wait()
	if took := time.Since(began); took > slowStop && ns.cfg.Logger != nil {
		ns.cfg.Logger.Warn("stopping the nodes was slow", "nodes", len(ns.Nodes), "took", took.Round(time.Millisecond),
			"agentsExitedIn", agentsOut.Round(time.Millisecond))
	}
	if ns.fab != nil {
		ns.fab.Remove()
	}
}

// Kill ends node i's agent at once (SIGKILL), as a crash would; its zones
// keep running.
func (ns *Nodes) Kill(i int) {
	cmd, done := ns.Nodes[i].process()
	_ = cmd.Process.Kill()
	<-done
}

// Terminate sends node i's agent SIGTERM, as SMF's stop method does, and
// waits for it to exit; it returns the agent's exit code. Its zones keep
// running.
func (ns *Nodes) Terminate(i int) int {
	cmd, done := ns.Nodes[i].process()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-done
	return cmd.ProcessState.ExitCode()
}

// Restart starts node i's agent again after Kill or Terminate.
func (ns *Nodes) Restart(ctx context.Context, i int) error {
	return ns.run(ns.Nodes[i])
}

// Exited reports agents that are no longer running.
func (ns *Nodes) Exited() []string {
	var out []string
	for _, n := range ns.Nodes {
		_, done := n.process()
		select {
		case <-done:
			out = append(out, n.Name)
		default:
		}
	}
	return out
}

// Pid is the agent's process id.
func (n *Node) Pid() int {
	cmd, _ := n.process()
	return cmd.Process.Pid
}

// Add starts one more node, as a host that joins the cluster later.
func (ns *Nodes) Add(ctx context.Context) (*Node, error) {
	n, err := ns.start(ctx, len(ns.Nodes)+1)
	if err != nil {
		return nil, err
	}
	ns.Nodes = append(ns.Nodes, n)
	return n, nil
}

// listenAddr is where n's agent endpoint listens.
func listenAddr(n *Node) string {
	if n.Netns != "" {
		return netip.AddrPortFrom(n.Address.Addr(), 0).String()
	}
	return "127.0.0.1:0"
}

// setSimFact sets one of the host facts of the simulator root.
func setSimFact(root, name string, value any) error {
	file := filepath.Join(root, simFactsFile)
	facts := map[string]any{}
	if b, err := os.ReadFile(file); err == nil {
		if err := json.Unmarshal(b, &facts); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	facts[name] = value
	b, err := json.MarshalIndent(facts, "", "  ")
	if err != nil {
		return err
	}
	return writeRenamed(file, append(b, '\n'))
}

// simFactsFile, in a simulator root, holds the host's facts (the
// simulator's hostFactsFile).
const simFactsFile = "host.json"

// Fabric is the nodes' network in isolation mode, nil otherwise.
func (ns *Nodes) Fabric() *fabric.Fabric { return ns.fab }

// simNetnsFile, in a simulator root, names the node's network namespace:
// the simulator then realises the node's network in it (its NetnsFile).
const simNetnsFile = "netns"

// isolate gives node n (the i-th) its network on the fabric: the
// namespace, the underlay address on net0 (set with the node's ipadm, so
// the global zone shows it and the simulator puts it in the kernel), and
// relays to the control plane's addresses.
func (ns *Nodes) isolate(n *Node, i int) error {
	path, addr, err := ns.fab.AddNode(i)
	if err != nil {
		return err
	}
	n.Netns, n.Address = path, addr
	if err := os.WriteFile(filepath.Join(n.Root, simNetnsFile), []byte(path+"\n"), 0o644); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		// In the stack's user namespace its nodes are the machine: they
		// count their zones' uids in a file of the stack's, not the
		// machine's (which only its root may write).
		if err := setSimFact(n.Root, "zone_uid_counter", filepath.Join(filepath.Dir(filepath.Dir(n.Root)), "zone-uids")); err != nil {
			return err
		}
	}
	// A node kept from an earlier run has net0 already: plumb it anew.
	_ = ns.fab.Command(filepath.Join(n.BinDir, "ipadm"), "delete-if", "net0").Run()
	for _, args := range [][]string{{"create-if", "net0"}, {"create-addr", "-T", "static", "-a", addr.String(), "net0/v4"}} {
		if out, err := ns.fab.Command(filepath.Join(n.BinDir, "ipadm"), args...).CombinedOutput(); err != nil {
			return fmt.Errorf("underlay address of %s: ipadm %s: %v: %s", n.Name, strings.Join(args, " "), err, out)
		}
	}
	urls := ns.cfg.APIURLs
	if len(urls) == 0 {
		urls = []string{ns.cfg.APIURL}
	}
	addrs, err := hostPorts(urls, ns.cfg.Temporal)
	if err != nil {
		return err
	}
	slices.Sort(addrs)
	return ns.fab.Relay(path, slices.Compact(addrs)...)
}
