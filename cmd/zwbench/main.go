// Command zwbench measures pod lifecycles on a whole zonewright stack
// started for the run (private PostgreSQL, embedded Temporal, the control
// plane, simulated nodes each with a real agent, no added command latency):
//
//   - idle: pods created one at a time, create→Running p50/p99;
//   - burst: pods created at once, throughput and create→Running
//     p50/p95/p99 and the CPU each part of the stack spent per pod, then
//     delete→gone p50/p99;
//   - peak RSS of every process of the stack;
//   - the ceiling: a no-op workflow with as many local activities and
//     activities as a pod's start, at the same concurrency on the same
//     Temporal server,
//     and the burst throughput as a ratio of it;
//   - the host floor: the burst's provisions done by the host library alone
//     over fresh simulated nodes (no Temporal), and the machine ceiling,
//     the rate at which the machine does both that and the no-op
//     workflows, with the burst throughput as a ratio of it;
//   - steady state: pods Running and Ready, each with an exec readiness
//     probe, measured over a window: history events per pod per minute,
//     Temporal requests per second and the CPU of the whole stack (also
//     without pods), against the floor, the CPU of the probe executions
//     alone, run by the supervisor's exec-probe code in a process of its
//     own (and the probe commands alone, the floor as measured before);
//   - scale (--scale): on a stack of its own, pods added in steps up to
//     --scale on --scale-nodes nodes, each Running and Ready with an exec
//     readiness probe; at every step, and on the stack without pods, the
//     CPU and memory of every process of the stack, history events per pod
//     per minute and Temporal requests per second, so that what a pod
//     costs can be seen to stay the same as pods are added; then a steady
//     stream of pods with the API measured under it, a drain, the whole
//     stack stopped and started again (every pod adopted) and a kill -9
//     of its control plane (every lifecycle back, nothing replaced);
//   - api-get (--api-get): a GET of the API over HTTPS and over plain
//     HTTP (a second replica with --insecure-http), on kept-alive and on
//     new connections: p50/p99 and what TLS adds;
//   - heartbeats (--heartbeat-nodes): on a private PostgreSQL with the API
//     in process, what node heartbeats write (change-feed rows, rows
//     written, WAL) per 1,000 nodes per minute, the way agents wrote their
//     Node row every 10 s and the lease way. It needs no stack either;
//   - dns (--dns-seconds): the cluster DNS server alone on loopback with
//     a synthetic snapshot of 1,000 services, UDP clients querying at
//     once: queries/s served and latency p50/p99. It needs no stack, so
//     --idle 0 --burst 0 --steady 0 runs it alone;
//   - store (--store-seconds): on a private PostgreSQL, pod creates and
//     status updates through the store with 1, 16 and 64 writers, and 64
//     with a 5 s deadline on each request: writes/s and latency p50/p99,
//     while watchers started from different versions check that the
//     change feed carries every write once, in order. It needs no stack.
//   - isolation (--isolation): what isolation mode costs a pod: pods
//     created one at a time on a fresh shared-loopback stack and on a
//     fresh isolated one (nodes and zones in namespaces of their own):
//     create→Running p50/p99, the stack's CPU a pod, the zones' memory a
//     pod. The isolated half needs root, and says why when it cannot run.
//
// It prints a table and writes the same figures as JSON (--json).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	if asFloor() {
		return
	}
	o := options{scaleStreamRates: []float64{5}, scaleSettle: steadySettle}
	flag.IntVar(&o.idle, "idle", 50, "pods created one at a time")
	flag.IntVar(&o.burst, "burst", 200, "pods created at once")
	flag.IntVar(&o.steady, "steady", 60, "pods kept running for the steady-state section (0 skips it)")
	flag.DurationVar(&o.steadyWindow, "steady-window", 60*time.Second, "how long each steady-state window measures")
	flag.IntVar(&o.nodes, "nodes", 3, "simulated nodes")
	flag.IntVar(&o.isolation, "isolation", 20, "pods created one at a time on a shared-loopback stack and on an isolated one, comparing what a pod costs (0 skips it; isolation mode needs root)")
	flag.IntVar(&o.scale, "scale", 0, "pods the scale section ends with, on a stack of its own (0 skips it)")
	flag.IntVar(&o.scaleNodes, "scale-nodes", 10, "simulated nodes of the scale section's stack")
	flag.IntVar(&o.scaleSteps, "scale-steps", 4, "steps the scale section adds its pods in, measuring after each")
	flag.BoolVar(&o.scaleIsolated, "scale-isolation", false, "run the scale section's stack in isolation mode (needs root)")
	flag.BoolVar(&o.scaleCPUSplit, "scale-cpu-split", true, "give the scale section's control plane and its nodes a cpu cgroup each, of equal shares, as if each had hosts of its own (needs root and cgroup v1's cpu hierarchy; false: they share the machine as the kernel shares it)")
	flag.DurationVar(&o.scaleWindow, "scale-window", 60*time.Second, "how long each scale step measures")
	flag.DurationVar(&o.scaleProbePeriod, "scale-probe-period", steadyProbePeriod, "how often each scale pod's exec readiness probe runs")
	flag.Func("scale-stream", "after the steps, pods created at these steady rates (pods/s, comma-separated; empty skips it) while the API is measured (default 5)", func(v string) (err error) {
		o.scaleStreamRates, err = parseRates(v)
		return err
	})
	flag.DurationVar(&o.scaleStreamFor, "scale-stream-for", 5*time.Minute, "how long each rate of the scale stream lasts")
	flag.IntVar(&o.scaleWatchers, "scale-watchers", 50, "watches of the pods held open during the scale stream, each timing its events")
	flag.BoolVar(&o.scaleDrain, "scale-drain", true, "after the stream, drain the node with the most pods and time their move")
	flag.BoolVar(&o.scaleRestart, "scale-restart", true, "at the end, stop the whole stack with every pod running, start it again with its control plane in processes and time the adoption of every pod, then kill -9 serve, Temporal and PostgreSQL and time their return")
	flag.BoolVar(&o.scaleTemporalPG, "scale-temporal-postgres", true, "keep the scale stack's Temporal state in its PostgreSQL, as production does (false: the dev stack's SQLite file)")
	flag.IntVar(&o.scaleShards, "scale-history-shards", 8, "history shards of the scale stack's Temporal on PostgreSQL")
	flag.IntVar(&o.scaleTaskWorkers, "scale-task-workers", 0, "how many of history's timer and transfer tasks the scale stack's Temporal runs at once (zonewright temporal --task-workers; 0: Temporal's default, 512)")
	flag.IntVar(&o.dnsSeconds, "dns-seconds", 5, "seconds the cluster DNS section queries for (0 skips it)")
	flag.IntVar(&o.dnsClients, "dns-clients", 8, "UDP clients querying the cluster DNS at once")
	flag.IntVar(&o.nat, "nat", 20, "pods added to and removed from a service, measuring when every node's NAT rules have it (0 skips it)")
	flag.IntVar(&o.apiGet, "api-get", 300, "GETs of the API per mode (HTTPS and plain HTTP, kept-alive and new connections) measuring what TLS adds (0 skips it)")
	flag.IntVar(&o.heartbeatNodes, "heartbeat-nodes", 200, "nodes whose heartbeats are measured, the Node-row way and the lease way, on a private PostgreSQL (0 skips it)")
	flag.IntVar(&o.storeSeconds, "store-seconds", 5, "seconds each writer count of the store section writes for, on a private PostgreSQL (0 skips it)")
	flag.StringVar(&o.binDir, "bin", "bin", "directory holding zonewright and illumos-sim")
	flag.StringVar(&o.jsonOut, "json", "bench.json", "where to write the results as JSON")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := run(ctx, o, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zwbench:", err)
		os.Exit(1)
	}
	res.print(os.Stdout)
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "zwbench:", err)
		os.Exit(1)
	}
	abs, _ := filepath.Abs(o.jsonOut)
	fmt.Printf("\nJSON: %s\n", abs)
}

// asFloor runs this process as the floor mode its first argument names,
// if it names one (runFloor starts it so), and reports whether it did.
func asFloor() bool {
	if len(os.Args) < 2 {
		return false
	}
	floor, ok := floorModes[os.Args[1]]
	if !ok {
		return false
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := floor(ctx, os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "zwbench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	return true
}

type options struct {
	idle, burst, steady, nodes    int
	steadyWindow                  time.Duration
	scale, scaleNodes, scaleSteps int
	scaleIsolated                 bool
	scaleCPUSplit                 bool
	scaleWindow                   time.Duration
	scaleProbePeriod              time.Duration
	scaleSettle                   time.Duration // before each window
	scaleStreamRates              []float64
	scaleStreamFor                time.Duration
	scaleWatchers                 int
	scaleDrain                    bool
	scaleRestart                  bool
	scaleTemporalPG               bool
	scaleShards                   int
	scaleTaskWorkers              int
	dnsSeconds, dnsClients        int
	nat                           int
	apiGet                        int
	heartbeatNodes                int
	storeSeconds                  int
	isolation                     int
	binDir, jsonOut               string
}

// Results are the figures of one run.
type Results struct {
	Date             time.Time   `json:"date"`
	Nodes            int         `json:"nodes"`
	IdlePods         int         `json:"idlePods"`
	IdleCreateToRun  Percentiles `json:"idleCreateToRunningMs"`
	BurstPods        int         `json:"burstPods"`
	BurstThroughput  float64     `json:"burstPodsPerSecond"`
	BurstCreateToRun Percentiles `json:"burstCreateToRunningMs"`
	BurstDelete      Percentiles `json:"burstDeleteToGoneMs"`
	// BurstCPU is what each part of the stack spent from the burst's first
	// create to its last pod Running, in CPU milliseconds per pod.
	BurstCPU     map[string]float64 `json:"burstCPUMsPerPod"`
	Ceiling      float64            `json:"ceilingWorkflowsPerSecond"`
	CeilingShape ceilingShape       `json:"ceilingShape"`
	Ratio        float64            `json:"burstToCeilingRatio"`
	// HostFloor is the host work of the burst's provisions alone, and
	// MachineCeiling the rate at which the machine does both that and the
	// no-op orchestration of Ceiling (see machineCeiling).
	HostFloor      *HostFloor        `json:"hostFloor,omitempty"`
	MachineCeiling float64           `json:"machineCeilingPodsPerSecond,omitempty"`
	MachineRatio   float64           `json:"burstToMachineCeilingRatio,omitempty"`
	PeakRSS        map[string]int64  `json:"peakRSSKiB"`
	Steady         *SteadyResults    `json:"steady,omitempty"`
	Scale          *ScaleResults     `json:"scale,omitempty"`
	DNS            *DNSResults       `json:"dns,omitempty"`
	NAT            *NATResults       `json:"nat,omitempty"`
	APIGet         *APIGetResults    `json:"apiGet,omitempty"`
	Heartbeats     *HeartbeatResults `json:"heartbeats,omitempty"`
	Store          *StoreResults     `json:"store,omitempty"`
	Isolation      *IsolationResults `json:"isolation,omitempty"`
}

// Percentiles of a latency sample, in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}
