package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/fabric"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/scheduler"
)

const (
	// scaleInFlight bounds the scale section's creations in flight.
	scaleInFlight = 32
	// podCIDRPods is how many pods a node's pod network holds: a /24 has
	// 254 host addresses and the node keeps the first as its gateway.
	podCIDRPods = 253
	// scaleStall fails a step when no pod of it became Ready for so long.
	scaleStall = 5 * time.Minute
	// agentsLabel sums the agents of every node.
	agentsLabel = "agents (every node, summed)"
)

// ScaleResults are what pods cost as more are added: the same stack is
// measured without pods, then after each step of pods added, all Running
// and Ready, each with one exec readiness probe.
type ScaleResults struct {
	Pods               int     `json:"pods"`
	Nodes              int     `json:"nodes"`
	Isolated           bool    `json:"isolated"`
	MaxPodsPerNode     int     `json:"maxPodsPerNode"`
	PodsTheNodesFit    int     `json:"podsTheNodesFit"`
	PodsPerNodeMin     int     `json:"podsPerNodeMin"`
	PodsPerNodeMax     int     `json:"podsPerNodeMax"`
	ProbePeriodSeconds float64 `json:"probePeriodSeconds"`
	CreateInFlight     int     `json:"createInFlight"`

	// From each pod's creation request to its first Running and Ready, and
	// pods per second from each step's first request to its last pod
	// Running.
	CreateToRunning      Percentiles `json:"createToRunningMs"`
	CreateToReady        Percentiles `json:"createToReadyMs"`
	RunningPodsPerSecond float64     `json:"runningPodsPerSecond"`

	// Steps[0] is the stack without pods.
	Steps []ScaleStep `json:"steps"`

	// Straight lines through the steps: cost = intercept + slope × pods.
	CPUFit LinearFit `json:"stackCPUPercentFit"`
	RSSFit LinearFit `json:"rssKiBFit"`
	PSSFit LinearFit `json:"pssKiBFit"`

	// The floor with every pod running: the CPU of the probe executions
	// alone (see SteadyResults).
	ProbeCPUMs         float64 `json:"probeCPUMs"`
	FloorCPUPer100Pods float64 `json:"floorCPUPercentPer100Pods"`

	// TemporalStore is where Temporal kept its state, with how many
	// history shards.
	TemporalStore string `json:"temporalStore"`
	// CPU is how the control plane and the nodes shared the machine.
	CPU           string `json:"cpu"`
	MachineCPUs   int    `json:"machineCPUs"`
	MachineMemKiB int64  `json:"machineMemTotalKiB"`
	// The whole section, from starting its stack to having stopped it.
	ElapsedSeconds float64 `json:"elapsedSeconds"`
	// Stop is the whole stack stopped with every pod running, and
	// Restart its start again, with a kill of its control plane.
	Stop    *StopResults    `json:"stop,omitempty"`
	Restart *RestartResults `json:"restart,omitempty"`

	// Headroom is every finite resource's line through the steps, and
	// FirstToRunOut the one that reaches its limit at the fewest pods.
	Headroom           []Headroom `json:"headroom"`
	FirstToRunOut      string     `json:"firstToRunOut,omitempty"`
	FirstRunsOutAtPods int        `json:"firstRunsOutAtPods,omitempty"`

	Stream *StreamResults `json:"stream,omitempty"`
	Drain  *DrainResults  `json:"drain,omitempty"`
}

// ScaleStep is the stack measured over one window with Pods pods. The
// "aboveEmpty" figures are less the stack without pods, per pod: if they
// stay the same from step to step, the cost is linear in pods.
type ScaleStep struct {
	Pods      int `json:"pods"`
	PodsReady int `json:"podsReadyAtEnd"`
	// From the step's first creation to its last pod Running, and Ready.
	RunningSeconds float64 `json:"runningSeconds"`
	ReadySeconds   float64 `json:"readySeconds"`
	WindowSeconds  float64 `json:"windowSeconds"`
	// The CPU of one exec probe, run after the window as the node runs it
	// (see SteadyResults.ProbeCPUMs), and of its command alone: if it
	// grows with pods, so does the cost of every command.
	ProbeCPUMs         float64 `json:"probeCPUMs"`
	ProbeCommandsCPUMs float64 `json:"probeCommandsCPUMs"`
	// The size of a simulated node's state, the mean of the nodes.
	SimStateKiB float64 `json:"simStateKiBPerNode"`

	// The CPU the step's creation took, from its first creation to its
	// last pod Ready (the pods before it at rest included), per pod created
	// and by part of the stack, in ms.
	CreationCPUMsPerPodByGroup map[string]float64 `json:"creationCPUMsPerPodByGroup"`

	// CPU in % of one core.
	CPUPercent               float64            `json:"stackCPUPercent"`
	CPUPercentByGroup        map[string]float64 `json:"stackCPUPercentByGroup"`
	CPUPer100Pods            float64            `json:"stackCPUPercentPer100Pods"`
	CPUPer100PodsAboveEmpty  float64            `json:"aboveEmptyStackCPUPercentPer100Pods"`
	MachineCPUPercent        float64            `json:"machineCPUPercent"`
	RequestsPerSecond        float64            `json:"temporalRequestsPerSecond"`
	RequestsByMethod         map[string]float64 `json:"temporalRequestsPerSecondByMethod"`
	EventsPerPodMinuteMedian float64            `json:"historyEventsPerPodPerMinuteMedian"`
	EventsPerPodMinuteMean   float64            `json:"historyEventsPerPodPerMinuteMean"`
	EventsPerPodMinuteMax    float64            `json:"historyEventsPerPodPerMinuteMax"`
	EventsTotal              int64              `json:"historyEventsTotal"`
	PodsContinuedAsNew       int                `json:"podsContinuedAsNew"`

	// Memory, read at the end of the window, in KiB.
	Memory                 map[string]Memory `json:"memoryByGroup"`
	RSSKiB                 int64             `json:"rssKiB"`
	PSSKiB                 int64             `json:"pssKiB"`
	Processes              int               `json:"processes"`
	RSSKiBPerPod           float64           `json:"rssKiBPerPod"`
	RSSKiBPerPodAboveEmpty float64           `json:"aboveEmptyStackRSSKiBPerPod"`
	PSSKiBPerPodAboveEmpty float64           `json:"aboveEmptyStackPSSKiBPerPod"`
	MemAvailableKiB        int64             `json:"machineMemAvailableKiB"`
	Finite                 Finite            `json:"finite"`
}

// LinearFit is the least-squares line y = Intercept + Slope × x through the
// steps, x in pods or hundreds of pods (SlopePer), and how straight they
// lie on it (R2, 1 for a straight line).
type LinearFit struct {
	Intercept float64 `json:"intercept"`
	Slope     float64 `json:"slope"`
	SlopePer  string  `json:"slopePer"`
	R2        float64 `json:"r2"`
}

// scale starts a stack of o.scaleNodes nodes, measures it without pods,
// adds o.scale pods in o.scaleSteps steps and measures it after each,
// then streams pods at steady rates while measuring the API, drains the
// node with the most pods, and stops the nodes with every pod running.
func scale(ctx context.Context, o options, log *slog.Logger) (*ScaleResults, error) {
	run, err := startScale(ctx, o, log)
	if run != nil {
		defer run.restore()
	}
	if run != nil && run.s != nil {
		defer run.s.stop()
	}
	if err != nil {
		return nil, err
	}
	defer run.temporal.Close()
	res := run.res
	fmt.Fprintf(stderr, "scale: the stack without pods for %s\n", o.scaleWindow)
	if err := sleep(ctx, run.o.scaleSettle); err != nil {
		return nil, err
	}
	empty, err := run.measure(ctx, 0)
	if err != nil {
		return nil, err
	}
	res.Steps = append(res.Steps, *empty)
	steps := min(max(o.scaleSteps, 1), o.scale)
	for k, from := 1, 0; k <= steps; k++ {
		to := o.scale * k / steps
		fmt.Fprintf(stderr, "scale: step %d/%d, %d → %d pods\n", k, steps, from, to)
		st, err := run.addStep(ctx, from, to, empty)
		if err != nil {
			return nil, err
		}
		res.Steps = append(res.Steps, *st)
		from = to
	}
	if err := run.summarize(); err != nil {
		return nil, err
	}
	if len(o.scaleStreamRates) > 0 {
		st := stream{api: run.api, tr: run.tr, existing: run.names, rates: o.scaleStreamRates, each: o.scaleStreamFor,
			watchers: o.scaleWatchers, probePeriod: o.scaleProbePeriod}
		if res.Stream, err = streamSection(ctx, st); err != nil {
			return nil, fmt.Errorf("stream: %w", err)
		}
	}
	if o.scaleDrain {
		if res.Drain, err = drainSection(ctx, run.api); err != nil {
			return nil, fmt.Errorf("drain: %w", err)
		}
	}
	var uids map[string]string
	if o.scaleRestart {
		if uids, err = podUIDs(run.api); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(stderr, "scale: stopping the stack with every pod running\n")
	res.Stop = cleanStop(run.s)
	if o.scaleRestart {
		// What it measured before a failure is kept, as the drain's is.
		res.Restart = restartSection(ctx, run.s, run.cfg, uids, log)
	}
	return res, nil
}

// scaleRun is the scale section's stack and what it has seen so far.
type scaleRun struct {
	o        options
	cfg      stackConfig
	res      *ScaleResults
	s        *stack
	api      string
	tr       *tracker
	temporal tclient.Client
	names    []string
	// When each pod's creation was asked for, and when it was first Ready.
	created, readyAt []time.Time
	adding           time.Duration // the steps' time to Running, summed
	// restore gives back kernel.pid_max and the CPU split.
	restore func()
}

// startScale checks that the section's pods fit, starts its stack and
// waits for its nodes.
func startScale(ctx context.Context, o options, log *slog.Logger) (*scaleRun, error) {
	n, m := o.scale, o.scaleNodes
	if m < 1 {
		return nil, fmt.Errorf("--scale-nodes %d: want at least one node", m)
	}
	if o.scaleRestart && !o.scaleTemporalPG {
		return nil, errors.New("--scale-restart keeps Temporal's state across the start again: it needs --scale-temporal-postgres")
	}
	total := n + streamPods(o)
	if per := (total + m - 1) / m; per > podCIDRPods {
		return nil, fmt.Errorf("%d pods (%d, and %d streamed) on %d nodes is %d a node, and a node's /24 pod network holds %d: add nodes (--scale-nodes)",
			total, n, total-n, m, per, podCIDRPods)
	}
	if o.scaleIsolated {
		if err := fabric.DirectIsolationSupported(); err != nil {
			return nil, fmt.Errorf("--scale-isolation: %w", err)
		}
	}
	restore, err := roomForTasks(total)
	if err != nil {
		return nil, err
	}
	nodeGroups, cpu := []string(nil), "one machine, shared as the kernel shares it"
	if o.scaleCPUSplit {
		split, err := splitCPU()
		if err != nil {
			fmt.Fprintf(stderr, "scale: the control plane and the nodes share the CPU: no cgroups of their own: %v\n", err)
		} else {
			nodeGroups, cpu = []string{split.nodes}, "the control plane and the nodes in cpu cgroups of equal shares"
			// After the stack stopped (deferred before its stop).
			restorePidMax := restore
			restore = func() { split.undo(); restorePidMax() }
		}
	}
	run := &scaleRun{o: o, names: make([]string, n), created: make([]time.Time, n), readyAt: make([]time.Time, n), restore: restore}
	for i := range run.names {
		run.names[i] = fmt.Sprintf("scale-%d", i)
	}
	run.res = &ScaleResults{Pods: n, Nodes: m, Isolated: o.scaleIsolated, MaxPodsPerNode: podCIDRPods, ProbePeriodSeconds: o.scaleProbePeriod.Seconds(),
		CreateInFlight: scaleInFlight, MachineCPUs: machineCPUs(), MachineMemKiB: meminfo("MemTotal"), TemporalStore: "SQLite, 1 history shard", CPU: cpu}
	if o.scaleTemporalPG {
		run.res.TemporalStore = fmt.Sprintf("PostgreSQL, %d history shards", o.scaleShards)
	}
	fmt.Fprintf(stderr, "scale: a stack of %d nodes\n", m)
	run.cfg = stackConfig{binDir: o.binDir, nodes: m, maxPods: podCIDRPods, isolated: o.scaleIsolated,
		temporalOnPostgres: o.scaleTemporalPG, historyShards: o.scaleShards, taskWorkers: o.scaleTaskWorkers, nodeCPUGroups: nodeGroups}
	if run.s, err = startStack(ctx, run.cfg, log); err != nil {
		return run, err
	}
	for _, dir := range nodeGroups {
		if n, err := processesIn(dir); err != nil || n < m {
			return run, fmt.Errorf("the nodes' cgroup %s holds %d processes, fewer than the %d agents (%v)", dir, n, m, err)
		}
	}
	run.api = run.s.cp.URL()
	if err := waitNodes(ctx, run.api, m); err != nil {
		return run, err
	}
	if run.res.PodsTheNodesFit, err = podsTheNodesFit(run.api, o.scaleProbePeriod); err != nil {
		return run, err
	}
	if run.res.PodsTheNodesFit < total {
		req := scalePodRequests(o.scaleProbePeriod)
		return run, fmt.Errorf("the nodes' allocatable resources fit %d pods of %dm CPU and %d MiB, not %d",
			run.res.PodsTheNodesFit, req.MilliCPU, req.Memory>>20, total)
	}
	if run.tr, err = watchPods(ctx, run.api); err != nil {
		return run, err
	}
	run.temporal, err = run.s.dialTemporal(log)
	return run, err
}

// streamPods is how many pods the stream adds at all its rates.
func streamPods(o options) int {
	n := 0
	for _, r := range o.scaleStreamRates {
		n += max(1, int(r*o.scaleStreamFor.Seconds()))
	}
	return n
}

// measure measures the stack with its first pods pods over a window.
func (run *scaleRun) measure(ctx context.Context, pods int) (*ScaleStep, error) {
	st, err := measureScaleStep(ctx, run.s, run.temporal, run.tr, run.names[:pods], run.o.scaleWindow)
	if err != nil {
		return nil, err
	}
	st.Finite = run.s.finite(ctx)
	return st, nil
}

// addStep creates the pods from..to, waits for them to be Ready, and
// measures the stack with every pod so far and their probes alone.
func (run *scaleRun) addStep(ctx context.Context, from, to int, empty *ScaleStep) (*ScaleStep, error) {
	start, cpu0 := time.Now(), run.s.cpuTicks()
	if err := parallel(to-from, scaleInFlight, func(i int) error {
		run.created[from+i] = time.Now()
		return createPod(run.api, run.names[from+i], scalePodBody(run.names[from+i], run.o.scaleProbePeriod))
	}); err != nil {
		return nil, err
	}
	if err := waitAll(ctx, run.tr, run.tr.ready, "Ready", run.names[from:to], run.readyAt[from:to]); err != nil {
		return nil, err
	}
	creation := creationCPU(cpu0, run.s.cpuTicks(), to-from)
	lastRunning, lastReady := start, start
	for i, name := range run.names[from:to] {
		if at, ok := run.tr.at(run.tr.running, name); ok && at.After(lastRunning) {
			lastRunning = at
		}
		if at := run.readyAt[from+i]; at.After(lastReady) {
			lastReady = at
		}
	}
	run.adding += lastRunning.Sub(start)
	if err := sleep(ctx, run.o.scaleSettle); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "scale: measuring %d pods for %s\n", to, run.o.scaleWindow)
	st, err := run.measure(ctx, to)
	if err != nil {
		return nil, err
	}
	st.RunningSeconds, st.ReadySeconds = lastRunning.Sub(start).Seconds(), lastReady.Sub(start).Seconds()
	st.CreationCPUMsPerPodByGroup = creation
	st.perPod(empty)
	fmt.Fprintf(stderr, "scale: exec probes at the pods' rate for up to %s\n", run.o.scaleWindow)
	f, err := probeFloor(ctx, run.s, run.api, run.names[:to], run.o.scaleProbePeriod, run.o.scaleWindow)
	if err != nil {
		return nil, err
	}
	st.ProbeCPUMs, st.ProbeCommandsCPUMs = f.NodeMs, f.CommandsMs
	return st, nil
}

// summarize derives the section's figures from its steps.
func (run *scaleRun) summarize() error {
	res := run.res
	res.RunningPodsPerSecond = float64(len(run.names)) / run.adding.Seconds()
	var running, ready []time.Duration
	for i, name := range run.names {
		if at, ok := run.tr.at(run.tr.running, name); ok {
			running = append(running, at.Sub(run.created[i]))
		}
		ready = append(ready, run.readyAt[i].Sub(run.created[i]))
	}
	res.CreateToRunning, res.CreateToReady = percentiles(running), percentiles(ready)
	var err error
	if res.PodsPerNodeMin, res.PodsPerNodeMax, err = podsPerNode(run.api, run.s); err != nil {
		return err
	}
	res.fit()
	res.headroom()
	res.ProbeCPUMs = res.Steps[len(res.Steps)-1].ProbeCPUMs
	res.FloorCPUPer100Pods = floorPer100Pods(res.ProbeCPUMs, run.o.scaleProbePeriod)
	return nil
}

// scalePodBody is a pod like steadyPodBody's, placed by the scheduler,
// probed every period.
func scalePodBody(name string, period time.Duration) []byte {
	return []byte(fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"terminationGracePeriodSeconds":0,"containers":[{"name":"app","image":"base",
	  "command":["sleep","3600"],"resources":{"requests":{"cpu":"10m","memory":"16Mi"}},
	  "readinessProbe":{"exec":{"command":["true"]},"periodSeconds":%d}}]}}`, name, int(period.Seconds())))
}

func scalePodRequests(period time.Duration) scheduler.Resources {
	var p model.Pod
	_ = json.Unmarshal(scalePodBody("p", period), &p)
	return scheduler.PodRequests(&p)
}

// podsTheNodesFit is how many scale pods the nodes' allocatable resources
// (as the agents registered them) take, as the scheduler counts.
func podsTheNodesFit(api string, period time.Duration) (int, error) {
	var list model.List[model.Node]
	if err := getJSON(api+"/api/v1/nodes", &list); err != nil {
		return 0, fmt.Errorf("list nodes: %w", err)
	}
	req := scalePodRequests(period)
	total := 0
	for i := range list.Items {
		a := scheduler.Allocatable(&list.Items[i])
		fit := a.Pods
		if req.MilliCPU > 0 {
			fit = min(fit, a.MilliCPU/req.MilliCPU)
		}
		if req.Memory > 0 {
			fit = min(fit, a.Memory/req.Memory)
		}
		total += int(fit)
	}
	return total, nil
}

// podsPerNode is the fewest and most pods the scheduler put on a node.
func podsPerNode(api string, s *stack) (lo, hi int, err error) {
	on, err := podsByNode(api)
	if err != nil {
		return 0, 0, err
	}
	lo = math.MaxInt
	for _, n := range s.nodes.Nodes {
		lo, hi = min(lo, len(on[n.Name])), max(hi, len(on[n.Name]))
	}
	return lo, hi, nil
}

// waitAll waits until m holds every one of names and records when in at.
// It fails when none has arrived for scaleStall, and reports progress.
func waitAll(ctx context.Context, tr *tracker, m map[string]time.Time, what string, names []string, at []time.Time) error {
	done, progress, report := 0, time.Now(), time.Now()
	for {
		tr.mu.Lock()
		for i, name := range names {
			if t, ok := m[name]; ok && at[i].IsZero() {
				at[i], done, progress = t, done+1, time.Now()
			}
		}
		tr.mu.Unlock()
		if done == len(names) {
			return nil
		}
		if time.Since(progress) > scaleStall {
			var missing []string
			for i, name := range names {
				if at[i].IsZero() && len(missing) < 5 {
					missing = append(missing, name)
				}
			}
			return fmt.Errorf("%d of %d pods not %s, none for %s (%s …)", len(names)-done, len(names), what, scaleStall, strings.Join(missing, ", "))
		}
		if time.Since(report) >= 10*time.Second {
			fmt.Fprintf(stderr, "scale: %d/%d %s\n", done, len(names), what)
			report = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tr.changed:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// at is when m recorded name.
func (tr *tracker) at(m map[string]time.Time, name string) (time.Time, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t, ok := m[name]
	return t, ok
}

// measureScaleStep measures the stack with the pods names over a window:
// CPU, Temporal requests and the pods' history events in it, memory at
// its end. History marks enclose the window, and memory is read after it,
// so that neither is in the window's CPU.
func measureScaleStep(ctx context.Context, s *stack, c tclient.Client, tr *tracker, names []string, window time.Duration) (*ScaleStep, error) {
	marks, err := markHistories(ctx, c, names)
	if err != nil {
		return nil, err
	}
	w, err := s.measureWindow(ctx, window)
	if err != nil {
		return nil, err
	}
	st := &ScaleStep{Pods: len(names), PodsReady: tr.count(tr.ready, names), WindowSeconds: w.seconds(),
		CPUPercent: w.cpuPercent(), CPUPercentByGroup: map[string]float64{}, MachineCPUPercent: w.machineCPUPercent(),
		RequestsPerSecond: w.requestsPerSecond(), RequestsByMethod: w.requestsPerSecondByMethod(), Memory: map[string]Memory{}}
	for l, p := range w.cpuPercentByProcess() {
		st.CPUPercentByGroup[group(l)] += p
	}
	rates, events, newRuns, err := historyRates(ctx, c, names, marks)
	if err != nil {
		return nil, err
	}
	st.EventsTotal, st.PodsContinuedAsNew = events, newRuns
	st.EventsPerPodMinuteMedian, st.EventsPerPodMinuteMean, st.EventsPerPodMinuteMax = summarize(rates)
	for l, mem := range s.memory() {
		g := st.Memory[group(l)]
		g.RSS, g.PSS, g.Processes = g.RSS+mem.RSS, g.PSS+mem.PSS, g.Processes+mem.Processes
		st.Memory[group(l)] = g
		st.RSSKiB, st.PSSKiB, st.Processes = st.RSSKiB+mem.RSS, st.PSSKiB+mem.PSS, st.Processes+mem.Processes
	}
	st.MemAvailableKiB = meminfo("MemAvailable")
	// The simulator keeps a node's state in one file, which its commands
	// and zone supervisors read.
	for _, node := range s.nodes.Nodes {
		if fi, err := os.Stat(filepath.Join(node.Root, "state.json")); err == nil {
			st.SimStateKiB += float64(fi.Size()) / 1024 / float64(len(s.nodes.Nodes))
		}
	}
	return st, nil
}

// perPod derives the per-pod figures of a step from its totals and those
// of the stack without pods.
func (st *ScaleStep) perPod(empty *ScaleStep) {
	pods := float64(st.Pods)
	st.CPUPer100Pods = st.CPUPercent / pods * 100
	st.CPUPer100PodsAboveEmpty = (st.CPUPercent - empty.CPUPercent) / pods * 100
	st.RSSKiBPerPod = float64(st.RSSKiB) / pods
	st.RSSKiBPerPodAboveEmpty = float64(st.RSSKiB-empty.RSSKiB) / pods
	st.PSSKiBPerPodAboveEmpty = float64(st.PSSKiB-empty.PSSKiB) / pods
}

func (r *ScaleResults) fit() {
	var pods, cpu, rss, pss []float64
	for _, st := range r.Steps {
		pods = append(pods, float64(st.Pods))
		cpu = append(cpu, st.CPUPercent)
		rss = append(rss, float64(st.RSSKiB))
		pss = append(pss, float64(st.PSSKiB))
	}
	r.RSSFit, r.PSSFit = fitLine(pods, rss, "pod"), fitLine(pods, pss, "pod")
	hundreds := make([]float64, len(pods))
	for i, p := range pods {
		hundreds[i] = p / 100
	}
	r.CPUFit = fitLine(hundreds, cpu, "100 pods")
}

// fitLine is the least-squares line through (xs, ys).
func fitLine(xs, ys []float64, per string) LinearFit {
	n := float64(len(xs))
	if n < 2 {
		return LinearFit{SlopePer: per}
	}
	var sx, sy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx, sxy, syy = sxx+dx*dx, sxy+dx*dy, syy+dy*dy
	}
	f := LinearFit{SlopePer: per, R2: 1}
	if sxx > 0 {
		f.Slope = sxy / sxx
	}
	f.Intercept = my - f.Slope*mx
	if syy > 0 {
		f.R2 = sxy * sxy / (sxx * syy)
	}
	return f
}

// creationCPU is the CPU between two samples by part of the stack (the
// agents together), in ms per pod of the pods created between them.
func creationCPU(before, after map[string]int64, pods int) map[string]float64 {
	out := map[string]float64{}
	if pods <= 0 {
		return out
	}
	for l, t := range after {
		out[group(l)] += float64(t-before[l]) * 1000 / clockTicks / float64(pods)
	}
	return out
}

// group is the part of the stack a process label belongs to, the agents
// of every node together.
func group(label string) string {
	if strings.HasPrefix(label, "agent ") {
		return agentsLabel
	}
	return label
}

// meminfo reads a field of /proc/meminfo, in KiB.
func meminfo(field string) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// machineCPUs counts the CPUs /proc/stat lists.
func machineCPUs() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "cpu") && !strings.HasPrefix(line, "cpu ") {
			n++
		}
	}
	return n
}

// processesUnder counts the processes that name dir on their command
// line (agents, supervisors) or work in it (a zone's init and containers
// work in its root).
func processesUnder(dir string) int {
	n := 0
	for _, p := range pids() {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", p))
		if strings.Contains(string(b), dir) || strings.HasPrefix(cwd, dir+"/") {
			n++
		}
	}
	return n
}
