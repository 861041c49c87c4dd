package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devcluster"
	"github.com/zonewright/zonewright/internal/devnodes"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/pgserver"
	"github.com/zonewright/zonewright/internal/store"
)

// stack is the dev stack started for one run, in a temporary directory.
type stack struct {
	dir      string
	cluster  *devcluster.Cluster
	temporal *devstack.Temporal
	cp       *controlplane.ControlPlane
	cpConfig controlplane.Config // how cp was started
	nodes    *devnodes.Nodes
}

// apiHTTP is the client of the running stack's API, trusting its CA and
// sending its cluster-admin token.
var apiHTTP = http.DefaultClient

// stackConfig sizes a stack: its simulated nodes and the pods each takes.
type stackConfig struct {
	binDir  string // holds zonewright and illumos-sim
	nodes   int
	maxPods int // the agents' --max-pods
	// isolated: every node and zone in namespaces of its own (fabric),
	// as make dev runs where the machine allows it.
	isolated bool
	// temporalOnPostgres keeps Temporal's state in the stack's PostgreSQL
	// with historyShards shards, as production runs it, instead of the
	// dev stack's SQLite file with one.
	temporalOnPostgres bool
	historyShards      int
	// taskWorkers bounds Temporal's history tasks at once (0: its default).
	taskWorkers int
	// nodeCPUGroups are the cgroups the agents run in (cpuSplit).
	nodeCPUGroups []string
}

func startStack(ctx context.Context, cfg stackConfig, log *slog.Logger) (*stack, error) {
	dir, err := os.MkdirTemp("", "zwbench-")
	if err != nil {
		return nil, err
	}
	s := &stack{dir: dir}
	opts, err := s.options(cfg, log)
	if err != nil {
		return s, err
	}
	if s.cluster, err = devcluster.Build(ctx, opts); err != nil {
		return s, err
	}
	s.took(s.cluster)
	return s, nil
}

// options are the build options of the stack cfg describes, in its
// directory.
func (s *stack) options(cfg stackConfig, log *slog.Logger) (devcluster.Options, error) {
	bin, err := filepath.Abs(cfg.binDir)
	if err != nil {
		return devcluster.Options{}, err
	}
	// On loopback, so the simulated nodes' NAT can listen on ClusterIPs.
	cpConfig := controlplane.Config{ServiceCIDR: "127.94.0.0/16", ClusterCIDR: devnodes.ClusterCIDR(10), NodeCIDRMaskSize: devnodes.NodeCIDRMaskSize}
	var underlay netip.Prefix
	if cfg.isolated {
		// Off loopback, inside the namespaces; the network number this
		// process's own, clear of a dev stack's or a test's.
		n := 100 + os.Getpid()%100
		underlay = fabric.IsolatedUnderlay(n)
		cpConfig.ServiceCIDR, cpConfig.ClusterCIDR = clusterip.DefaultCIDR, fabric.IsolatedClusterCIDR(n)
	}
	// Temporal runs mutual TLS with the authorizer, as in the dev stack,
	// so that what is measured includes it. The agents' other settings
	// are their defaults (a 10 s heartbeat): the stack measured is the
	// one operators run.
	return devcluster.Options{Dir: s.dir, Logger: log, CountRequests: true, ControlPlane: cpConfig,
		TemporalOnPostgres: cfg.temporalOnPostgres, HistoryShards: cfg.historyShards, TemporalTaskWorkers: cfg.taskWorkers,
		Zonewright: filepath.Join(bin, "zonewright"), Sim: filepath.Join(bin, "illumos-sim"), Nodes: cfg.nodes,
		AgentArgs: []string{"--max-pods", strconv.Itoa(cfg.maxPods)}, Underlay: underlay, NodeCPUGroups: cfg.nodeCPUGroups, OperatorName: "zwbench"}, nil
}

// took makes c the stack's cluster, and the API client its admin's.
func (s *stack) took(c *devcluster.Cluster) {
	s.cluster = c
	s.temporal, s.cp, s.cpConfig, s.nodes = c.Temporal, c.ControlPlane, c.ControlPlaneConfig, c.Nodes
	apiHTTP = &http.Client{Transport: auth.Bearer{Token: c.AdminToken, Next: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: c.CA.Pool(), MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 64}}}
}

// dialTemporal is a Temporal client of the stack's server, as an operator.
func (s *stack) dialTemporal(log *slog.Logger) (tclient.Client, error) {
	return s.cluster.DialOperator(log)
}

func (s *stack) stop() {
	if s.cluster != nil {
		s.cluster.Stop()
	}
	_ = os.RemoveAll(s.dir)
}

// Labels of the parts of the stack, for peak RSS and CPU.
const (
	selfLabel     = "zwbench (Temporal server, API, control-plane worker)"
	postgresLabel = "postgres (postmaster and backends, summed)"
	// With the control plane in processes of its own (Replicas), this
	// process is the bench's client alone.
	clientLabel   = "zwbench (the bench's client)"
	serveLabel    = "serve (API, control-plane worker)"
	temporalLabel = "temporal (server)"
)

// peakRSS reads every process's high-water mark (VmHWM) in KiB.
func (s *stack) peakRSS() map[string]int64 {
	out := map[string]int64{selfLabel: hwm(os.Getpid())}
	for _, n := range s.nodes.Nodes {
		out["agent "+n.Name] = hwm(n.Pid())
	}
	pgPid := s.cluster.Postgres().Pid() // restarted by a kill: the one running now
	pg := hwm(pgPid)
	for _, child := range children(pgPid) {
		pg += hwm(child)
	}
	out[postgresLabel] = pg
	return out
}

func hwm(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func children(pid int) []int {
	var out []int
	for _, p := range pids() {
		if f, ok := stat(p); ok && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on
// Linux whatever the kernel's own tick rate.
const clockTicks = 100

// zonesLabel names the simulated zones' processes: their supervisors
// (zoneadmd, started in a session of their own and so no longer below an
// agent) and the containers they run.
const zonesLabel = "simulated zones (zoneadmd and containers)"

// commandsLabel names the commands the agents run (zoneadm, zlogin, svcs,
// ipnat, …: on this machine the simulator's), apart from the agents' own
// CPU: with zonesLabel, the simulator's share of the stack.
const commandsLabel = "simulator commands (the agents' zoneadm, zlogin, svcs, …)"

// cpuTicks sums the CPU time (user and system, in clockTicks) of every
// process of the stack, by the part it belongs to (the labels of peakRSS,
// zonesLabel and commandsLabel). Each process counts with its exited and
// reaped children (cutime, cstime): a process that exits between two
// samples is reaped by a parent that is itself counted, so the difference
// of two samples holds every process's CPU in between once, short-lived
// commands included. An agent's reaped children are its commands.
func (s *stack) cpuTicks() map[string]int64 {
	out := map[string]int64{zonesLabel: 0, commandsLabel: 0}
	for _, p := range s.procs() {
		out[p.label] += p.own
		if strings.HasPrefix(p.label, "agent ") {
			out[commandsLabel] += p.reaped
		} else {
			out[p.label] += p.reaped
		}
	}
	return out
}

// stackProc is a process of the stack: the part it belongs to, its own
// CPU time and its reaped children's, in clockTicks.
type stackProc struct {
	label       string
	own, reaped int64
}

// procs finds every process of the stack: the descendants of this process,
// of postgres and of each agent, and the simulated zones' supervisors with
// theirs.
func (s *stack) procs() map[int]stackProc {
	roots := map[int]string{os.Getpid(): selfLabel, s.cluster.Postgres().Pid(): postgresLabel}
	for _, n := range s.nodes.Nodes {
		roots[n.Pid()] = "agent " + n.Name
	}
	if c := s.cluster; len(c.Replicas) > 0 {
		roots[os.Getpid()] = clientLabel
		roots[c.TemporalProcess.Pid()] = temporalLabel
		for _, r := range c.Replicas {
			roots[r.Pid()] = serveLabel
		}
	}
	procs := processTable()
	label := func(pid int) string {
		for p := pid; p > 1; p = procs[p].ppid {
			if l, ok := roots[p]; ok {
				return l
			}
			if _, ok := procs[p]; !ok {
				break
			}
		}
		return ""
	}
	// Zone supervisors are known by their command line, which names their
	// node's state directory inside the stack's directory.
	for p := range procs {
		if label(p) == "" && mentions(p, s.dir+"/") {
			roots[p] = zonesLabel
		}
	}
	out := map[int]stackProc{}
	for p, pr := range procs {
		l := label(p)
		if _, root := roots[p]; !root && strings.HasPrefix(l, "agent ") {
			l = commandsLabel // a command an agent runs now
		}
		if l != "" {
			out[p] = stackProc{l, pr.own, pr.reaped}
		}
	}
	return out
}

// processInfo is a process's parent and its CPU time and its reaped
// children's, in clockTicks.
type processInfo struct {
	ppid        int
	own, reaped int64
}

// ticks is the process's CPU time with its reaped children's.
func (p processInfo) ticks() int64 { return p.own + p.reaped }

// processTable reads every process of the machine.
func processTable() map[int]processInfo {
	procs := map[int]processInfo{}
	for _, p := range pids() {
		f, ok := stat(p)
		// After the comm: state ppid … utime(11) stime cutime cstime.
		if !ok || len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		t := make([]int64, 4)
		for i, v := range f[11:15] {
			t[i], _ = strconv.ParseInt(v, 10, 64)
		}
		procs[p] = processInfo{ppid, t[0] + t[1], t[2] + t[3]}
	}
	return procs
}

// Memory is what the processes of a part of the stack hold, summed: their
// resident set (shared pages counted in every process that maps them) and
// their proportional set (shared pages split between those processes, so
// that the sum is what they hold together), in KiB.
type Memory struct {
	RSS       int64 `json:"rssKiB"`
	PSS       int64 `json:"pssKiB"`
	Processes int   `json:"processes"`
}

// memory reads the memory of every process of the stack, by the part it
// belongs to (the labels of cpuTicks).
func (s *stack) memory() map[string]Memory {
	out := map[string]Memory{}
	for pid, p := range s.procs() {
		rss, pss, ok := rollup(pid)
		if !ok {
			continue // it exited meanwhile
		}
		m := out[p.label]
		m.RSS += rss
		m.PSS += pss
		m.Processes++
		out[p.label] = m
	}
	return out
}

// rollup reads a process's Rss and Pss, in KiB, from smaps_rollup.
func rollup(pid int) (rss, pss int64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Rss:":
			rss, _ = strconv.ParseInt(f[1], 10, 64)
			ok = true
		case "Pss:":
			pss, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	return rss, pss, ok
}

// mentions reports whether an argument of process pid contains s.
func mentions(pid int, s string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), s)
}

func pids() []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if p, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// stat returns the fields of /proc/<pid>/stat after the command name
// (state, ppid, …); the name may hold spaces, so the split is after ')'.
func stat(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 > len(b) {
		return nil, false
	}
	return strings.Fields(string(b[i+2:])), true
}

// privateStore is a migrated store on a PostgreSQL of its own, for the
// sections that need no stack; done closes it and removes the cluster.
func privateStore(ctx context.Context, section string, log *slog.Logger) (st *store.Store, done func(), err error) {
	dir, err := os.MkdirTemp("", "zwbench-"+section+"-")
	if err != nil {
		return nil, nil, err
	}
	var pg *pgserver.Server
	done = func() {
		if st != nil {
			st.Close()
		}
		if pg != nil {
			_ = pg.Stop()
		}
		_ = os.RemoveAll(dir)
	}
	defer func() {
		if err != nil {
			done()
		}
	}()
	if pg, err = pgserver.Start(ctx, pgserver.Config{DataDir: filepath.Join(dir, "postgres")}); err != nil {
		return nil, nil, err
	}
	url, err := pg.EnsureDatabase(ctx, "zonewright")
	if err != nil {
		return nil, nil, err
	}
	if err = store.MigrateUp(ctx, url, log); err != nil {
		return nil, nil, err
	}
	st, err = store.Open(ctx, url)
	return st, done, err
}
