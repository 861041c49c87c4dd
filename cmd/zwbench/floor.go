package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// A floor is measured in a process of its own: zwbench runs itself again
// with the floor's name as its first argument, a request as JSON on
// stdin, and the figures as JSON on stdout. That process's rusage, its
// own and its children's, is then what the work cost, with nothing of the
// stack in it.
const (
	probeFloorMode = "probe-floor"
	hostFloorMode  = "host-floor"
)

// floorModes are the floors this binary measures when run as one.
var floorModes = map[string]func(ctx context.Context, in io.Reader, out io.Writer) error{
	probeFloorMode: probeFloorMain,
	hostFloorMode:  hostFloorMain,
}

// runFloor runs this binary as the floor mode with req, and decodes its
// answer into res.
func runFloor(ctx context.Context, mode string, req, res any) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s: find this program: %w", mode, err)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	var stdout, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, self, mode)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(b), &stdout, &errOut
	// Interrupted, the floor stops what it started (the host floor's
	// zones) before it exits; killed only if it does not.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", mode, err, bytes.TrimSpace(errOut.Bytes()))
	}
	if err := json.Unmarshal(stdout.Bytes(), res); err != nil {
		return fmt.Errorf("%s: its answer: %w", mode, err)
	}
	return nil
}

// usage is a process's CPU time: its own and its reaped children's.
type usage struct{ self, children time.Duration }

func rusage() (usage, error) {
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		return usage{}, fmt.Errorf("getrusage: %w", err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		return usage{}, fmt.Errorf("getrusage: %w", err)
	}
	cpu := func(ru syscall.Rusage) time.Duration { return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()) }
	return usage{cpu(self), cpu(children)}, nil
}

func (u usage) sub(v usage) usage { return usage{u.self - v.self, u.children - v.children} }

// ms is d in milliseconds, per n.
func ms(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }

// ProbeTarget is a zone that exec probes run in, on the node whose
// commands are in BinDir.
type ProbeTarget struct {
	BinDir string
	Zone   string
	IP     string
}

// probeFloorRequest asks for Probes exec probes of Command, one started
// every Interval, round-robin over Targets.
type probeFloorRequest struct {
	Targets  []ProbeTarget
	Command  []string
	Probes   int
	Interval time.Duration
}

// ProbeFloor is what the probes cost the process that ran them, in CPU
// ms per probe: the probe commands (its children) and the process's own
// side of every exec (fork and exec, pipes, wait, the goroutines).
type ProbeFloor struct {
	Probes     int     `json:"probes"`
	IntervalMs float64 `json:"intervalMs"`
	// NodeMs is the whole: what the node pays for a probe.
	NodeMs     float64 `json:"cpuMsPerProbe"`
	CommandsMs float64 `json:"commandsCPUMsPerProbe"`
	ProcessMs  float64 `json:"processCPUMsPerProbe"`
	Failed     int     `json:"failed"`
}

// probeFloorMain runs the probes the way the node's supervisor runs an
// exec probe (supervisor.RunProbe over zlogin), each on its own goroutine
// as the supervisor's probe workers are, and measures this process.
func probeFloorMain(ctx context.Context, in io.Reader, out io.Writer) error {
	var req probeFloorRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		return fmt.Errorf("request: %w", err)
	}
	if len(req.Targets) == 0 || req.Probes <= 0 {
		return fmt.Errorf("nothing to probe: %d targets, %d probes", len(req.Targets), req.Probes)
	}
	hosts := make([]supervisor.IllumosHost, len(req.Targets))
	for i, t := range req.Targets {
		hosts[i] = supervisor.IllumosHost{Host: illumos.Host{Runner: &illumos.Runner{BinDir: t.BinDir}}}
	}
	spec := &model.Probe{Exec: &model.ExecAction{Command: req.Command}}
	probe := func(i int) (bool, error) {
		t := req.Targets[i%len(req.Targets)]
		res, err := supervisor.RunProbe(ctx, hosts[i%len(hosts)], t.Zone, "", t.IP, nil, spec)
		return res.Success, err
	}
	// A probe in each zone first: the binary is then in the page cache,
	// and a zone that cannot be probed fails the floor instead of
	// lowering it.
	for i := range req.Targets {
		if ok, err := probe(i); err != nil || !ok {
			return fmt.Errorf("probe in zone %s: succeeded %t, %v", req.Targets[i].Zone, ok, err)
		}
	}
	before, err := rusage()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	tick := time.NewTicker(req.Interval)
	defer tick.Stop()
	for i := range req.Probes {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, err := probe(i); err != nil || !ok {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	after, err := rusage()
	if err != nil {
		return err
	}
	d := after.sub(before)
	return json.NewEncoder(out).Encode(ProbeFloor{Probes: req.Probes, IntervalMs: float64(req.Interval.Microseconds()) / 1000,
		NodeMs: ms(d.self+d.children, req.Probes), CommandsMs: ms(d.children, req.Probes), ProcessMs: ms(d.self, req.Probes), Failed: failed})
}
