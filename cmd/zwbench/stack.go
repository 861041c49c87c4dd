package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zonewright/zonewright/deploy"
	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/devnodes"
	"github.com/zonewright/zonewright/internal/devstack"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/pgserver"
	"github.com/zonewright/zonewright/workflows"
)

// stack is the dev stack started for one run, in a temporary directory.
type stack struct {
	dir      string
	pg       *pgserver.Server
	temporal *devstack.Temporal
	cp       *controlplane.ControlPlane
	nodes    *devnodes.Nodes
}

func startStack(ctx context.Context, o options, log *slog.Logger) (*stack, error) {
	dir, err := os.MkdirTemp("", "zwbench-")
	if err != nil {
		return nil, err
	}
	s := &stack{dir: dir}
	if s.pg, err = pgserver.Start(ctx, pgserver.Config{DataDir: filepath.Join(dir, "postgres")}); err != nil {
		return s, err
	}
	url, err := s.pg.EnsureDatabase(ctx, "zonewright")
	if err != nil {
		return s, err
	}
	addr, err := freeAddr()
	if err != nil {
		return s, err
	}
	if s.temporal, err = devstack.StartTemporal(ctx, devstack.TemporalConfig{Address: addr, DataDir: filepath.Join(dir, "temporal"),
		SearchAttributes: devstack.KeywordAttributes(workflows.SearchAttributeNames...), Logger: log}); err != nil {
		return s, err
	}
	imgMap, err := imagemap.Parse(deploy.ImageMap)
	if err != nil {
		return s, err
	}
	if s.cp, err = controlplane.Start(ctx, controlplane.Config{DatabaseURL: url, Listen: "127.0.0.1:0",
		TemporalAddress: s.temporal.Address(), TemporalNamespace: "default", Logger: log,
		ImageStore: filepath.Join(dir, "images"), ImageDownloadSecret: "zwbench", ImageMap: imgMap}); err != nil {
		return s, err
	}
	bin, err := filepath.Abs(o.binDir)
	if err != nil {
		return s, err
	}
	s.nodes, err = devnodes.Start(ctx, devnodes.Config{Count: o.nodes, DataDir: filepath.Join(dir, "nodes"),
		Agent: filepath.Join(bin, "zonewright"), Sim: filepath.Join(bin, "illumos-sim"), DatabaseURL: url,
		Temporal: s.temporal.Address(), Namespace: "default", Logger: log,
		ExtraArgs: []string{"--max-pods", "250", "--heartbeat-interval", "2s"}})
	return s, err
}

func (s *stack) stop() {
	if s.nodes != nil {
		s.nodes.Stop()
	}
	if s.cp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = s.cp.Stop(ctx)
		cancel()
	}
	if s.temporal != nil {
		_ = s.temporal.Stop()
	}
	if s.pg != nil {
		_ = s.pg.Stop()
	}
	_ = os.RemoveAll(s.dir)
}

// peakRSS reads every process's high-water mark (VmHWM) in KiB.
func (s *stack) peakRSS() map[string]int64 {
	out := map[string]int64{"zwbench (Temporal server, API, control-plane worker)": hwm(os.Getpid())}
	for _, n := range s.nodes.Nodes {
		out["agent "+n.Name] = hwm(n.Pid())
	}
	pg := hwm(s.pg.Pid())
	for _, child := range children(s.pg.Pid()) {
		pg += hwm(child)
	}
	out["postgres (postmaster and backends, summed)"] = pg
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
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so split after ')'.
		rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}
