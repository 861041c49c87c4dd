package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/zonewright/zonewright/internal/fabric"
)

// IsolationResults are what isolation mode costs a pod: the same pods,
// created one at a time, on a stack whose nodes share the loopback and on
// one whose nodes and zones are namespaces of their own.
type IsolationResults struct {
	Pods     int           `json:"pods"`
	Nodes    int           `json:"nodes"`
	Shared   *IsolationRun `json:"shared,omitempty"`
	Isolated *IsolationRun `json:"isolated,omitempty"`
	// Skipped says why the isolated run could not be made here.
	Skipped string `json:"skipped,omitempty"`
}

// IsolationRun is one mode's figures.
type IsolationRun struct {
	CreateToRun Percentiles `json:"createToRunningMs"`
	// CPUMsPerPod is what each part of the stack spent from the first
	// create to the last pod Running, in CPU milliseconds per pod.
	CPUMsPerPod map[string]float64 `json:"cpuMsPerPod"`
	// Zones is the zones' processes' memory with every pod running, per
	// pod.
	ZoneRSSKiB float64 `json:"zoneRSSKiBPerPod"`
	ZonePSSKiB float64 `json:"zonePSSKiBPerPod"`
}

// isolationSection runs n pods one at a time in each mode, each on a
// fresh stack of nodes nodes.
func isolationSection(ctx context.Context, o options, log *slog.Logger) (*IsolationResults, error) {
	res := &IsolationResults{Pods: o.isolation, Nodes: o.nodes}
	var err error
	if res.Shared, err = isolationRun(ctx, o, false, log); err != nil {
		return nil, fmt.Errorf("shared loopback: %w", err)
	}
	if err := fabric.DirectIsolationSupported(); err != nil {
		res.Skipped = err.Error()
		return res, nil
	}
	if res.Isolated, err = isolationRun(ctx, o, true, log); err != nil {
		return nil, fmt.Errorf("isolation mode: %w", err)
	}
	return res, nil
}

func isolationRun(ctx context.Context, o options, isolated bool, log *slog.Logger) (*IsolationRun, error) {
	s, err := startStack(ctx, stackConfig{binDir: o.binDir, nodes: o.nodes, maxPods: 250, isolated: isolated}, log)
	defer s.stop()
	if err != nil {
		return nil, err
	}
	api := s.cp.URL()
	if err := waitNodes(ctx, api, o.nodes); err != nil {
		return nil, err
	}
	tr, err := watchPods(ctx, api)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "isolation: %d pods one at a time (isolated %v)\n", o.isolation, isolated)
	cpu0 := s.cpuTicks()
	took, err := oneAtATime(ctx, api, tr, "iso-", o.isolation)
	if err != nil {
		return nil, err
	}
	cpu1 := s.cpuTicks()
	run := &IsolationRun{CreateToRun: percentiles(took), CPUMsPerPod: map[string]float64{}}
	for part, t := range cpu1 {
		run.CPUMsPerPod[part] = float64(t-cpu0[part]) * 1000 / clockTicks / float64(o.isolation)
	}
	zones := s.memory()[zonesLabel]
	run.ZoneRSSKiB, run.ZonePSSKiB = float64(zones.RSS)/float64(o.isolation), float64(zones.PSS)/float64(o.isolation)
	return run, deleteAll(ctx, api, tr, "iso-", o.isolation)
}

// oneAtATime creates n pods named prefix0… one after the other, each once
// the one before runs, and returns each one's create→Running.
func oneAtATime(ctx context.Context, api string, tr *tracker, prefix string, n int) ([]time.Duration, error) {
	var took []time.Duration
	for i := range n {
		name := fmt.Sprintf("%s%d", prefix, i)
		start := time.Now()
		if err := createPod(api, name, podBody(name)); err != nil {
			return nil, err
		}
		at, err := tr.wait(ctx, name, tr.running, 2*time.Minute)
		if err != nil {
			return nil, err
		}
		took = append(took, at.Sub(start))
	}
	return took, nil
}

func (r *IsolationResults) print(w io.Writer) {
	fmt.Fprintf(w, "\nisolation: %d pods one at a time on %d nodes, shared loopback against isolation mode\n", r.Pods, r.Nodes)
	if r.Isolated == nil {
		fmt.Fprintf(w, "  isolation mode not measured: %s\n", r.Skipped)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  mode\tcreate→Running p50\tp99\tstack CPU a pod\tof it zones\tzone memory a pod (RSS / PSS)\n")
	for _, m := range []struct {
		name string
		run  *IsolationRun
	}{{"shared loopback", r.Shared}, {"isolation mode", r.Isolated}} {
		if m.run == nil {
			continue
		}
		total := 0.0
		for _, v := range m.run.CPUMsPerPod {
			total += v
		}
		fmt.Fprintf(tw, "  %s\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f ms\t%.0f / %.0f KiB\n", m.name, m.run.CreateToRun.P50, m.run.CreateToRun.P99,
			total, m.run.CPUMsPerPod[zonesLabel], m.run.ZoneRSSKiB, m.run.ZonePSSKiB)
	}
	tw.Flush()
	if r.Shared != nil && r.Isolated != nil && r.Shared.CreateToRun.P50 > 0 {
		fmt.Fprintf(w, "  isolation / shared: create→Running p50 %.2f×, p99 %.2f×\n",
			r.Isolated.CreateToRun.P50/r.Shared.CreateToRun.P50, r.Isolated.CreateToRun.P99/r.Shared.CreateToRun.P99)
	}
}
