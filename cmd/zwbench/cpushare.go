package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zonewright/zonewright/internal/cgroups"
)

// cpuSplit gives the scale section's control plane (this process and
// what it starts: PostgreSQL, Temporal, serve) and its simulated nodes
// (the agents and what they start: commands, zones, probes) a cpu cgroup
// each, of equal shares: as on hosts of their own, neither can take the
// other's half of the machine. Without it the kernel shares the CPU
// between sessions (autogroup), of which every simulated zone is one:
// during a start again of 2,000 pods the Temporal server's threads
// waited for a CPU four times as long as they ran, and its persistence
// calls timed out by the tens of thousands a minute. With ten times the
// shares for the control plane the timeouts stopped, but the nodes,
// starved in turn, missed their heartbeats and were declared lost.
type cpuSplit struct {
	parent, control, nodes string
}

// splitCPU makes the two cgroups under this process's cpu cgroup (cgroup
// v1's cpu hierarchy, where the simulator's zone cgroups can nest under
// the nodes') and moves this process into the control plane's.
func splitCPU() (*cpuSplit, error) {
	own, err := cgroups.Own()
	if err != nil {
		return nil, err
	}
	if own.Unified {
		return nil, errors.New("cgroup v2: the split needs cgroup v1's cpu hierarchy")
	}
	parent := filepath.Join(own.CPU, "zwbench-"+strconv.Itoa(os.Getpid()))
	s := &cpuSplit{parent: parent, control: filepath.Join(parent, "control"), nodes: filepath.Join(parent, "nodes")}
	for _, d := range []string{parent, s.control, s.nodes} {
		if err := os.Mkdir(d, 0o755); err != nil {
			s.undo()
			return nil, err
		}
	}
	for _, d := range []string{s.control, s.nodes} {
		if err := os.WriteFile(filepath.Join(d, "cpu.shares"), []byte("1024"), 0); err != nil {
			s.undo()
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(s.control, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		s.undo()
		return nil, err
	}
	return s, nil
}

// undo moves this process back and removes the cgroups; the nodes' must
// be empty by then (the stack stopped).
func (s *cpuSplit) undo() {
	_ = os.WriteFile(filepath.Join(filepath.Dir(s.parent), "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
	for _, d := range []string{s.control, s.nodes, s.parent} {
		_ = os.Remove(d)
	}
}

// processesIn counts the processes a cgroup holds.
func processesIn(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return strings.Count(string(b), "\n"), err
}
