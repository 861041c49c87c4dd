package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// hostFloorRequest asks for Pods provisions over Nodes fresh simulated
// nodes, made with the illumos-sim binary Sim in Dir, at most PerNode at
// once on a node and Installs zone installs among them, as an agent runs
// them.
type hostFloorRequest struct {
	Sim      string
	Dir      string
	Nodes    int
	Pods     int
	PerNode  int
	Installs int
}

// HostFloor is the host's own work of the burst: what a pod's provision
// costs when nothing else is done, no Temporal, no control plane.
type HostFloor struct {
	Pods             int     `json:"pods"`
	Nodes            int     `json:"nodes"`
	PodsPerSecond    float64 `json:"podsPerSecond"`
	CPUMsPerPod      float64 `json:"cpuMsPerPod"`
	CommandsMsPerPod float64 `json:"commandsCPUMsPerPod"`
	// CommandsPerPod counts the illumos commands one provision runs, by
	// command and subcommand ("zoneadm boot").
	CommandsPerPod float64            `json:"commandsPerPod"`
	CommandsByName map[string]float64 `json:"commandsPerPodByName"`
}

// hostFloorPod is the sandbox the workflow makes of the burst's pod
// (podBody) on node n: the default brand and image, one container.
func hostFloorPod(i, n int) hostapi.PodSandbox {
	return hostapi.PodSandbox{Namespace: "default", Name: fmt.Sprintf("floor-%d", i), UID: fmt.Sprintf("floor-uid-%d", i),
		Brand: model.BrandSparse, Image: "base", ImageKind: model.ImageZoneTemplate, MilliCPU: 10, MemoryBytes: 16 << 20,
		IP: fmt.Sprintf("127.%d.%d.%d", 90+n, 1+i/250, 2+i%250), PrefixLen: 16, Gateway: fmt.Sprintf("127.%d.0.1", 90+n),
		Containers: []hostapi.ContainerSpec{{Name: "app", Argv: []string{"sleep", "3600"}}}}
}

// hostFloorMain provisions the pods with hostops, as an agent's host
// activities do, and measures this process (the zones' supervisors,
// started in sessions of their own, are not in it).
func hostFloorMain(ctx context.Context, in io.Reader, out io.Writer) error {
	var req hostFloorRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	if req.Nodes <= 0 || req.Pods <= 0 || req.PerNode <= 0 || req.Installs <= 0 {
		return fmt.Errorf("nothing to provision: %+v", req)
	}
	count := &commandCounts{counts: map[string]int{}}
	hosts := make([]*hostops.Host, req.Nodes)
	for n := range hosts {
		root := filepath.Join(req.Dir, fmt.Sprintf("node-%d", n))
		h, err := hostFloorNode(ctx, req, root, count)
		// Every zone booted here stops with the run, whatever happens.
		defer func() { _ = exec.Command(req.Sim, "stop-all", "--root", filepath.Join(root, "state")).Run() }()
		if err != nil {
			return fmt.Errorf("node %d: %w", n, err)
		}
		hosts[n] = h
	}
	count.reset()
	before, err := rusage()
	if err != nil {
		return err
	}
	start := time.Now()
	slots := make([]chan struct{}, req.Nodes)
	for n := range slots {
		slots[n] = make(chan struct{}, req.PerNode)
	}
	err = parallel(req.Pods, req.Pods, func(i int) error {
		n := i % req.Nodes
		slots[n] <- struct{}{}
		defer func() { <-slots[n] }()
		if _, err := hosts[n].ProvisionPod(ctx, hostapi.ProvisionInput{Sandbox: hostFloorPod(i, n)}); err != nil {
			return fmt.Errorf("provision pod %d on node %d: %w", i, n, err)
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	after, err := rusage()
	if err != nil {
		return err
	}
	d := after.sub(before)
	res := HostFloor{Pods: req.Pods, Nodes: req.Nodes, PodsPerSecond: float64(req.Pods) / elapsed.Seconds(),
		CPUMsPerPod: ms(d.self+d.children, req.Pods), CommandsMsPerPod: ms(d.children, req.Pods), CommandsByName: map[string]float64{}}
	for name, c := range count.counts {
		res.CommandsByName[name] = float64(c) / float64(req.Pods)
		res.CommandsPerPod += float64(c) / float64(req.Pods)
	}
	return json.NewEncoder(out).Encode(res)
}

// hostFloorNode makes a simulated node in root and prepares it as an
// agent prepares its host, with the agent's default names.
func hostFloorNode(ctx context.Context, req hostFloorRequest, root string, count *commandCounts) (*hostops.Host, error) {
	bin, state := filepath.Join(root, "bin"), filepath.Join(root, "state")
	if out, err := exec.CommandContext(ctx, req.Sim, "install", bin, "--root", state).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("illumos-sim install: %v: %s", err, out)
	}
	ih := illumos.Host{Runner: counting{next: &illumos.Runner{BinDir: bin}, counts: count}}
	pool := agent.DefaultStoragePool
	zones := agent.ZonesDataset(pool)
	if err := ih.ZFS().Create(ctx, zones, map[string]string{"mountpoint": agent.DefaultZonesPath}); err != nil {
		return nil, err
	}
	if err := ih.Dladm().CreateEtherstub(ctx, agent.DefaultEtherstub); err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return &hostops.Host{Host: ih, Node: filepath.Base(root), Etherstub: agent.DefaultEtherstub,
		ZonesDataset: zones, ZonesPath: agent.DefaultZonesPath, ZonesDir: filepath.Join(state, "fs", agent.DefaultZonesPath),
		Installs: make(chan struct{}, req.Installs), StepRetry: agent.DefaultProvisionRetry, Log: log,
		ZoneDNS: &hostops.ZoneDNS{Nameserver: hostFloorPod(0, 0).Gateway, Domain: "cluster.local"},
		// The node's own supervisor takes the pods over; it is not run,
		// as observing them is the steady state's cost, not the burst's.
		Supervisor: supervisor.New(supervisor.Config{Node: filepath.Base(root), Host: supervisor.IllumosHost{Host: ih}, Log: log}),
	}, nil
}

// commandCounts are the commands run on the floor's nodes, by name and
// subcommand.
type commandCounts struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *commandCounts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[string]int{}
}

// counting runs a node's commands with next and counts them in counts.
type counting struct {
	next   illumos.Executor
	counts *commandCounts
}

func (c counting) Run(ctx context.Context, cmd illumos.Cmd) (illumos.Result, error) {
	c.counts.mu.Lock()
	c.counts.counts[commandName(cmd)]++
	c.counts.mu.Unlock()
	return c.next.Run(ctx, cmd)
}

// commandName is a command's name and subcommand: "zoneadm boot" of
// zoneadm -z Z boot, "zlogin svcs" of zlogin Z svcs ….
func commandName(cmd illumos.Cmd) string {
	name, args := path.Base(cmd.Path), cmd.Args
	if name == "zlogin" && len(args) > 0 {
		args = args[1:]
	}
	for len(args) >= 2 && (args[0] == "-z" || args[0] == "-u") {
		args = args[2:]
	}
	if len(args) > 0 {
		name += " " + args[0]
	}
	return name
}
