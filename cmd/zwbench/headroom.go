package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Finite resources, read at a step: what the stack holds of each, so that
// their lines through the steps say which runs out first, and at how many
// pods.
type Finite struct {
	// Tasks are the threads of the stack's processes; MachineTasks every
	// thread on the machine, which kernel.pid_max bounds.
	Tasks        int `json:"tasks"`
	MachineTasks int `json:"machineTasks"`
	// The process of the stack with the most open files, how many, and its
	// own limit (RLIMIT_NOFILE).
	FilesMost      int    `json:"openFilesMost"`
	FilesMostLabel string `json:"openFilesMostProcess"`
	FilesLimit     int    `json:"openFilesLimit"`
	// PostgreSQL's connections in use and its max_connections.
	PGConnections    int `json:"postgresConnections"`
	PGMaxConnections int `json:"postgresMaxConnections"`
}

// finite reads what the stack holds of the finite resources now.
func (s *stack) finite(ctx context.Context) Finite {
	var f Finite
	procs := s.procs()
	for _, p := range pids() {
		threads, fdLimit := taskFacts(p)
		f.MachineTasks += threads
		sp, ours := procs[p]
		if !ours {
			continue
		}
		f.Tasks += threads
		if n := openFiles(p); n > f.FilesMost {
			f.FilesMost, f.FilesMostLabel, f.FilesLimit = n, sp.label, fdLimit
		}
	}
	pool := s.cp.Store.Pool()
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'`).Scan(&f.PGConnections)
	var max string
	if pool.QueryRow(ctx, `SHOW max_connections`).Scan(&max) == nil {
		f.PGMaxConnections, _ = strconv.Atoi(max)
	}
	return f
}

// taskFacts reads a process's thread count and its soft limit of open
// files from /proc.
func taskFacts(pid int) (threads, fileLimit int) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
				break
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(strings.TrimPrefix(line, "Max open files")); strings.HasPrefix(line, "Max open files") && len(f) > 0 {
				fileLimit, _ = strconv.Atoi(f[0])
			}
		}
	}
	return threads, fileLimit
}

func openFiles(pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(entries)
}

// Headroom is one finite resource: its limit on this machine, the line
// through the steps of what the stack uses of it, and the pod count at
// which that line reaches the limit (0: it does not grow with pods).
type Headroom struct {
	Resource string    `json:"resource"`
	Limit    float64   `json:"limit"`
	Unit     string    `json:"unit"`
	Fit      LinearFit `json:"fit"`
	RunsOut  int       `json:"runsOutAtPods"`
}

// headroom fits each finite resource through the steps and orders them
// by the pod count at which they run out, the first first.
func (r *ScaleResults) headroom() {
	pidMax := readInt("/proc/sys/kernel/pid_max")
	var pods, cpu, pss, tasks, files, conns []float64
	last := r.Steps[len(r.Steps)-1]
	for _, st := range r.Steps {
		pods = append(pods, float64(st.Pods))
		cpu = append(cpu, st.CPUPercent)
		pss = append(pss, float64(st.PSSKiB))
		// The machine's other threads count against pid_max as they are.
		tasks = append(tasks, float64(st.Finite.Tasks+last.Finite.MachineTasks-last.Finite.Tasks))
		files = append(files, float64(st.Finite.FilesMost))
		conns = append(conns, float64(st.Finite.PGConnections))
	}
	add := func(name, unit string, limit float64, ys []float64) {
		h := Headroom{Resource: name, Unit: unit, Limit: limit, Fit: fitLine(pods, ys, "pod")}
		if h.Fit.Slope > 0 && limit > 0 {
			h.RunsOut = int(math.Max(0, (limit-h.Fit.Intercept)/h.Fit.Slope))
		}
		r.Headroom = append(r.Headroom, h)
	}
	add("CPU (the whole stack)", "% of a core", float64(100*r.MachineCPUs), cpu)
	add("memory (PSS of the whole stack)", "KiB", float64(r.MachineMemKiB), pss)
	add("threads (kernel.pid_max)", "tasks", float64(pidMax), tasks)
	add("open files of one process ("+last.Finite.FilesMostLabel+")", "files", float64(last.Finite.FilesLimit), files)
	add("PostgreSQL connections", "connections", float64(last.Finite.PGMaxConnections), conns)
	first := -1
	for i, h := range r.Headroom {
		if h.RunsOut > 0 && (first < 0 || h.RunsOut < r.Headroom[first].RunsOut) {
			first = i
		}
	}
	if first >= 0 {
		r.FirstToRunOut = r.Headroom[first].Resource
		r.FirstRunsOutAtPods = r.Headroom[first].RunsOut
	}
}

func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// tasksPerSimulatedPod is about how many threads a pod's zone holds in
// the simulator (its zoneadmd and init are Go programs; measured 10.3),
// with room to spare. illumos does not count threads against its process
// limit; Linux counts every thread against kernel.pid_max.
const tasksPerSimulatedPod = 12

const pidMaxFile = "/proc/sys/kernel/pid_max"

// roomForTasks makes kernel.pid_max hold pods' simulated zones besides
// what the machine runs now, raising it as root, and returns what undoes
// that. Without root it says what to raise.
func roomForTasks(pods int) (restore func(), err error) {
	was := readInt(pidMaxFile)
	machine := 0
	for _, p := range pids() {
		threads, _ := taskFacts(p)
		machine += threads
	}
	need := machine + pods*tasksPerSimulatedPod + 4096
	if was == 0 || need <= was {
		return func() {}, nil
	}
	const most = 1 << 22 // Linux's largest on 64-bit
	if need > most {
		return nil, fmt.Errorf("%d pods need about %d threads, past Linux's %d", pods, need, most)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%d pods' simulated zones need about %d threads and kernel.pid_max is %d: raise it (sysctl kernel.pid_max=%d) or run as root", pods, need, was, most)
	}
	if err := os.WriteFile(pidMaxFile, []byte(strconv.Itoa(most)), 0o644); err != nil {
		return nil, fmt.Errorf("raise kernel.pid_max for %d pods: %w", pods, err)
	}
	fmt.Fprintf(stderr, "scale: kernel.pid_max raised from %d to %d for the section (%d pods need about %d threads)\n", was, most, pods, need)
	return func() { _ = os.WriteFile(pidMaxFile, []byte(strconv.Itoa(was)), 0o644) }, nil
}
