package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

const (
	// steadyProbePeriod is the period of the steady pods' exec readiness
	// probe, and so the rate the floor is computed at.
	steadyProbePeriod = 10 * time.Second
	// steadySettle lets the stack finish what the previous step started
	// (creations, deletions, first probes) before a window opens.
	steadySettle = 15 * time.Second
	// floorProbes is how many exec probes the floor is measured over, at
	// most: at the pods' rate, the floor takes no longer than a window
	// (and at least minFloorProbes).
	floorProbes    = 200
	minFloorProbes = 20
	// Targets of a healthy running pod: no history at all, and a stack
	// that costs little more than running the probes themselves.
	targetEventsPerPodMinute = 0
	targetStackToFloor       = 1.5
)

// SteadyResults are what healthy running pods cost, measured over a window.
// The stack is measured once without pods too, so that the pods' share can
// be told from what the stack costs on its own.
type SteadyResults struct {
	Pods               int     `json:"pods"`
	ProbePeriodSeconds float64 `json:"probePeriodSeconds"`
	WindowSeconds      float64 `json:"windowSeconds"`
	PodsReadyAtEnd     int     `json:"podsReadyAtEnd"`

	// History events each pod workflow added in the window, per minute.
	EventsPerPodMinuteMedian float64 `json:"historyEventsPerPodPerMinuteMedian"`
	EventsPerPodMinuteMean   float64 `json:"historyEventsPerPodPerMinuteMean"`
	EventsPerPodMinuteMax    float64 `json:"historyEventsPerPodPerMinuteMax"`
	EventsTotal              int64   `json:"historyEventsTotal"`
	PodsContinuedAsNew       int     `json:"podsContinuedAsNew"`

	// Calls served by the Temporal frontend, per second.
	RequestsPerSecond       float64            `json:"temporalRequestsPerSecond"`
	RequestsPerSecondNoPods float64            `json:"temporalRequestsPerSecondNoPods"`
	RequestsByMethod        map[string]float64 `json:"temporalRequestsPerSecondByMethod"`
	RequestsByMethodNoPods  map[string]float64 `json:"temporalRequestsPerSecondByMethodNoPods"`

	// CPU of every process of the stack, in % of one core.
	StackCPU                float64            `json:"stackCPUPercent"`
	StackCPUNoPods          float64            `json:"stackCPUPercentNoPods"`
	StackCPUByProcess       map[string]float64 `json:"stackCPUPercentByProcess"`
	StackCPUByProcessNoPods map[string]float64 `json:"stackCPUPercentByProcessNoPods"`
	StackCPUPer100Pods      float64            `json:"stackCPUPercentPer100Pods"`
	PodsCPUPer100Pods       float64            `json:"podsShareOfStackCPUPercentPer100Pods"`

	// The floor: the CPU of the probe executions alone, run by the
	// supervisor's exec-probe code in a process of its own at the steady
	// pods' rate, at one probe per pod per period. A probe costs that
	// process its command (zlogin and what it runs: ProbeCommandsCPUMs)
	// and its own side of the exec (ProbeProcessCPUMs); ProbeCPUMs is both.
	ProbeCPUMs         float64 `json:"probeCPUMs"`
	ProbeCommandsCPUMs float64 `json:"probeCommandsCPUMs"`
	ProbeProcessCPUMs  float64 `json:"probeProcessCPUMs"`
	FloorProbes        int     `json:"floorProbes"`
	FloorCPUPer100Pods float64 `json:"floorCPUPercentPer100Pods"`
	StackToFloor       float64 `json:"stackToFloorRatio"`
	PodsToFloor        float64 `json:"podsShareToFloorRatio"`
	// The floor as measured before: the probe commands alone, without the
	// side of the process that runs them.
	CommandsFloorCPUPer100Pods float64 `json:"commandsFloorCPUPercentPer100Pods"`
	StackToCommandsFloor       float64 `json:"stackToCommandsFloorRatio"`

	TargetEventsPerPodMinute float64 `json:"targetHistoryEventsPerPodPerMinute"`
	TargetStackToFloor       float64 `json:"targetStackToFloorRatio"`
}

// steadyState measures the stack without pods, then with o.steady pods
// Running and Ready, each with one exec readiness probe, then the floor.
func steadyState(ctx context.Context, s *stack, api string, tr *tracker, c tclient.Client, o options) (*SteadyResults, error) {
	res := &SteadyResults{Pods: o.steady, ProbePeriodSeconds: steadyProbePeriod.Seconds(),
		TargetEventsPerPodMinute: targetEventsPerPodMinute, TargetStackToFloor: targetStackToFloor}

	if len(s.nodes.Nodes) == 0 {
		return nil, fmt.Errorf("%d pods need at least one node", o.steady)
	}
	fmt.Fprintf(stderr, "steady: the stack without pods for %s\n", o.steadyWindow)
	if err := sleep(ctx, steadySettle); err != nil {
		return nil, err
	}
	idle, err := s.measureWindow(ctx, o.steadyWindow)
	if err != nil {
		return nil, err
	}
	res.StackCPUNoPods = idle.cpuPercent()
	res.RequestsPerSecondNoPods = idle.requestsPerSecond()
	res.RequestsByMethodNoPods = idle.requestsPerSecondByMethod()
	res.StackCPUByProcessNoPods = idle.cpuPercentByProcess()

	fmt.Fprintf(stderr, "steady: %d pods with an exec readiness probe\n", o.steady)
	names := make([]string, o.steady)
	if err := parallel(o.steady, 32, func(i int) error {
		names[i] = fmt.Sprintf("steady-%d", i)
		node := s.nodes.Nodes[i%len(s.nodes.Nodes)].Name
		return createPod(api, names[i], steadyPodBody(names[i], node))
	}); err != nil {
		return nil, err
	}
	for _, name := range names {
		if _, err := tr.wait(ctx, name, tr.ready, 10*time.Minute); err != nil {
			return nil, fmt.Errorf("waiting for Ready: %w", err)
		}
	}
	if err := sleep(ctx, steadySettle); err != nil {
		return nil, err
	}

	fmt.Fprintf(stderr, "steady: measuring %d Ready pods for %s\n", o.steady, o.steadyWindow)
	// The history marks enclose the stack window, so that the bench's own
	// describes are in neither its CPU nor its request count.
	marks, err := markHistories(ctx, c, names)
	if err != nil {
		return nil, err
	}
	busy, err := s.measureWindow(ctx, o.steadyWindow)
	if err != nil {
		return nil, err
	}
	rates, events, newRuns, err := historyRates(ctx, c, names, marks)
	if err != nil {
		return nil, err
	}
	res.EventsTotal, res.PodsContinuedAsNew = events, newRuns
	res.PodsReadyAtEnd = tr.count(tr.ready, names)
	res.WindowSeconds = busy.seconds()
	res.EventsPerPodMinuteMedian, res.EventsPerPodMinuteMean, res.EventsPerPodMinuteMax = summarize(rates)
	res.RequestsPerSecond = busy.requestsPerSecond()
	res.RequestsByMethod = busy.requestsPerSecondByMethod()
	res.StackCPU = busy.cpuPercent()
	res.StackCPUByProcess = busy.cpuPercentByProcess()
	perPods := 100 / float64(o.steady)
	res.StackCPUPer100Pods = res.StackCPU * perPods
	res.PodsCPUPer100Pods = (res.StackCPU - res.StackCPUNoPods) * perPods

	fmt.Fprintf(stderr, "steady: the floor, exec probes at the pods' rate for up to %s\n", o.steadyWindow)
	f, err := probeFloor(ctx, s, api, names, steadyProbePeriod, o.steadyWindow)
	if err != nil {
		return nil, err
	}
	res.FloorProbes = f.Probes
	res.ProbeCPUMs, res.ProbeCommandsCPUMs, res.ProbeProcessCPUMs = f.NodeMs, f.CommandsMs, f.ProcessMs
	res.FloorCPUPer100Pods = floorPer100Pods(res.ProbeCPUMs, steadyProbePeriod)
	res.CommandsFloorCPUPer100Pods = floorPer100Pods(res.ProbeCommandsCPUMs, steadyProbePeriod)
	res.StackToFloor = res.StackCPUPer100Pods / res.FloorCPUPer100Pods
	res.PodsToFloor = res.PodsCPUPer100Pods / res.FloorCPUPer100Pods
	res.StackToCommandsFloor = res.StackCPUPer100Pods / res.CommandsFloorCPUPer100Pods
	return res, nil
}

// steadyPodBody is a pod like podBody's, placed on node, with one exec
// readiness probe.
func steadyPodBody(name, node string) []byte {
	return []byte(fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"nodeName":%q,"terminationGracePeriodSeconds":0,"containers":[{"name":"app","image":"base",
	  "command":["sleep","3600"],"resources":{"requests":{"cpu":"10m","memory":"16Mi"}},
	  "readinessProbe":{"exec":{"command":["true"]},"periodSeconds":%d}}]}}`, name, node, int(steadyProbePeriod.Seconds())))
}

// stackWindow is the stack's CPU and Temporal requests, and the whole
// machine's busy CPU time, at the start and end of a window.
type stackWindow struct {
	start, end   time.Time
	cpu0, cpu1   map[string]int64
	reqs0, reqs1 map[string]uint64
	busy0, busy1 int64
}

// measureWindow samples the stack, waits d and samples it again. Requests
// are read outside the CPU samples, so that reading them is not measured.
func (s *stack) measureWindow(ctx context.Context, d time.Duration) (*stackWindow, error) {
	w := &stackWindow{reqs0: s.temporal.FrontendRequests(), busy0: machineBusyTicks()}
	w.start, w.cpu0 = time.Now(), s.cpuTicks()
	if err := sleep(ctx, d); err != nil {
		return nil, err
	}
	w.cpu1, w.end = s.cpuTicks(), time.Now()
	w.reqs1, w.busy1 = s.temporal.FrontendRequests(), machineBusyTicks()
	return w, nil
}

func (w *stackWindow) seconds() float64 { return w.end.Sub(w.start).Seconds() }

// machineCPUPercent is the whole machine's busy CPU in the window, in % of
// one core: the stack's and whatever else runs beside it.
func (w *stackWindow) machineCPUPercent() float64 {
	return float64(w.busy1-w.busy0) / clockTicks / w.seconds() * 100
}

func (w *stackWindow) cpuPercentByProcess() map[string]float64 {
	out := map[string]float64{}
	for name := range w.cpu1 {
		out[name] = float64(w.cpu1[name]-w.cpu0[name]) / clockTicks / w.seconds() * 100
	}
	return out
}

func (w *stackWindow) cpuPercent() float64 {
	total := 0.0
	for _, p := range w.cpuPercentByProcess() {
		total += p
	}
	return total
}

// requestsPerSecondByMethod names methods by their last element
// ("PollActivityTaskQueue").
func (w *stackWindow) requestsPerSecondByMethod() map[string]float64 {
	out := map[string]float64{}
	for method, n := range w.reqs1 {
		if d := n - w.reqs0[method]; d > 0 {
			out[method[strings.LastIndexByte(method, '/')+1:]] += float64(d) / w.seconds()
		}
	}
	return out
}

func (w *stackWindow) requestsPerSecond() float64 {
	total := 0.0
	for _, r := range w.requestsPerSecondByMethod() {
		total += r
	}
	return total
}

// historyMark is where a pod workflow's history stood at a moment.
type historyMark struct {
	run    string
	length int64
	at     time.Time
}

func markHistories(ctx context.Context, c tclient.Client, names []string) ([]historyMark, error) {
	marks := make([]historyMark, len(names))
	err := parallel(len(names), 8, func(i int) error {
		id := podcontract.WorkflowID("default", names[i])
		d, err := c.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return fmt.Errorf("describe %s: %w", id, err)
		}
		info := d.GetWorkflowExecutionInfo()
		marks[i] = historyMark{run: info.GetExecution().GetRunId(), length: info.GetHistoryLength(), at: time.Now()}
		return nil
	})
	return marks, err
}

// historyRates counts the events each of names added since its mark, per
// minute, and the events and new runs of them all.
func historyRates(ctx context.Context, c tclient.Client, names []string, marks []historyMark) (rates []float64, events int64, newRuns int, err error) {
	rates = make([]float64, len(names))
	counts := make([]int64, len(names))
	runs := make([]int, len(names))
	err = parallel(len(names), 8, func(i int) error {
		n, r, at, err := eventsSince(ctx, c, podcontract.WorkflowID("default", names[i]), marks[i])
		if err != nil {
			return err
		}
		counts[i], runs[i] = n, r
		rates[i] = float64(n) / at.Sub(marks[i].at).Minutes()
		return nil
	})
	for i := range names {
		events += counts[i]
		if runs[i] > 0 {
			newRuns++
		}
	}
	return rates, events, newRuns, err
}

// eventsSince counts the events workflow id added since mark, across
// continue-as-new: the current run's events, every run in between whole,
// and the rest of the marked run. It returns the number of new runs too.
func eventsSince(ctx context.Context, c tclient.Client, id string, mark historyMark) (events int64, newRuns int, at time.Time, err error) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return 0, 0, at, fmt.Errorf("describe %s: %w", id, err)
	}
	at = time.Now()
	run, length := d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), d.GetWorkflowExecutionInfo().GetHistoryLength()
	for run != mark.run {
		events += length
		newRuns++
		// A run started by continue-as-new names its predecessor in its
		// first event.
		h, err := c.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace: "default", Execution: d.GetWorkflowExecutionInfo().GetExecution(), MaximumPageSize: 1})
		if err != nil {
			return 0, 0, at, fmt.Errorf("history of %s run %s: %w", id, run, err)
		}
		first := h.GetHistory().GetEvents()
		if len(first) == 0 {
			return 0, 0, at, fmt.Errorf("history of %s run %s is empty", id, run)
		}
		prev := first[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if prev == "" {
			return 0, 0, at, fmt.Errorf("%s run %s does not continue run %s", id, run, mark.run)
		}
		if d, err = c.DescribeWorkflowExecution(ctx, id, prev); err != nil {
			return 0, 0, at, fmt.Errorf("describe %s run %s: %w", id, prev, err)
		}
		run, length = prev, d.GetWorkflowExecutionInfo().GetHistoryLength()
	}
	return events + length - mark.length, newRuns, at, nil
}

// probeFloor runs exec probes of the steady pods' command (round-robin
// over the zones of names, which have one probe each every
// steadyProbePeriod) in a process of its own, the way their nodes run
// them and at the rate they do, for about window (see floorProbeCount),
// and returns what they cost that process.
func probeFloor(ctx context.Context, s *stack, api string, podNames []string, period, window time.Duration) (ProbeFloor, error) {
	var pods model.List[model.Pod]
	if err := getJSON(api+"/api/v1/namespaces/default/pods", &pods); err != nil {
		return ProbeFloor{}, fmt.Errorf("list pods: %w", err)
	}
	binDirs := map[string]string{}
	for _, n := range s.nodes.Nodes {
		binDirs[n.Name] = n.BinDir
	}
	want := map[string]bool{}
	for _, n := range podNames {
		want[n] = true
	}
	interval := period / time.Duration(len(podNames))
	req := probeFloorRequest{Command: []string{"true"}, Probes: floorProbeCount(interval, window), Interval: interval}
	for _, p := range pods.Items {
		if !want[p.Metadata.Name] {
			continue
		}
		bin, ok := binDirs[p.Spec.NodeName]
		if !ok {
			return ProbeFloor{}, fmt.Errorf("pod %s is on unknown node %q", p.Metadata.Name, p.Spec.NodeName)
		}
		req.Targets = append(req.Targets, ProbeTarget{BinDir: bin, Zone: names.ZoneName("default", p.Metadata.Name, p.Metadata.UID), IP: p.Status.PodIP})
	}
	if len(req.Targets) != len(podNames) {
		return ProbeFloor{}, fmt.Errorf("%d of %d pods found to probe", len(req.Targets), len(podNames))
	}
	var f ProbeFloor
	if err := runFloor(ctx, probeFloorMode, req, &f); err != nil {
		return ProbeFloor{}, err
	}
	if f.Failed > 0 {
		return ProbeFloor{}, fmt.Errorf("%d of %d floor probes failed", f.Failed, f.Probes)
	}
	return f, nil
}

// floorProbeCount is how many probes, one every interval, the floor runs
// to last about window: floorProbes at most, minFloorProbes at least.
func floorProbeCount(interval, window time.Duration) int {
	return int(max(minFloorProbes, min(floorProbes, window/interval)))
}

// floorPer100Pods is, in %% of a core, what 100 pods' probes cost at one
// probe of cpuMs each per period.
func floorPer100Pods(cpuMs float64, period time.Duration) float64 {
	return cpuMs / 1000 * (100 / period.Seconds()) * 100
}

// machineBusyTicks is the CPU time, in clockTicks, that every CPU of the
// machine has spent on anything but idling since boot.
func machineBusyTicks() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is already in user
			continue
		}
		busy += n
	}
	return busy
}

// summarize returns the median, mean and max of xs.
func summarize(xs []float64) (median, mean, maximum float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Sorted(slices.Values(xs))
	median = s[len(s)/2]
	if len(s)%2 == 0 {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	for _, x := range s {
		mean += x
	}
	return median, mean / float64(len(s)), s[len(s)-1]
}

// topMethods are the n busiest methods, busiest first.
func topMethods(byMethod map[string]float64, n int) []string {
	names := slices.Collect(maps.Keys(byMethod))
	sort.Slice(names, func(i, j int) bool { return byMethod[names[i]] > byMethod[names[j]] })
	return names[:min(n, len(names))]
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
