package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/agent"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/worker/nodeworker"
)

// podShape is what takes a pod from created to Running: local activities
// (load, schedule, status, allocate, resolve the image, status, status)
// and one activity on the node (ProvisionPod).
var podShape = ceilingShape{Local: 7, Remote: 1}

// targetBurstToCeiling is the burst throughput asked for, as a share of
// the no-op ceiling measured in the same run.
const targetBurstToCeiling = 0.7

// ceilingShape is a no-op workflow's local activities and activities.
type ceilingShape struct{ Local, Remote int }

func run(ctx context.Context, o options, log *slog.Logger) (*Results, error) {
	res := &Results{Date: time.Now().UTC()}
	if o.dnsSeconds > 0 {
		// First, on a machine no stack of this run is loading yet.
		var err error
		if res.DNS, err = dnsSection(ctx, time.Duration(o.dnsSeconds)*time.Second, o.dnsClients, log); err != nil {
			return nil, fmt.Errorf("dns: %w", err)
		}
	}
	if o.heartbeatNodes > 0 {
		var err error
		if res.Heartbeats, err = heartbeatSection(ctx, o.heartbeatNodes, 3, log); err != nil {
			return nil, fmt.Errorf("heartbeats: %w", err)
		}
	}
	if o.storeSeconds > 0 {
		var err error
		if res.Store, err = storeSection(ctx, time.Duration(o.storeSeconds)*time.Second, log); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	if o.idle > 0 || o.burst > 0 || o.steady > 0 || o.nat > 0 || o.apiGet > 0 || (o.scale <= 0 && o.dnsSeconds <= 0 && o.heartbeatNodes <= 0 && o.storeSeconds <= 0 && o.isolation <= 0) {
		if err := sections(ctx, o, res, log); err != nil {
			return nil, err
		}
	}
	if o.isolation > 0 {
		debug.FreeOSMemory()
		var err error
		if res.Isolation, err = isolationSection(ctx, o, log); err != nil {
			return nil, fmt.Errorf("isolation: %w", err)
		}
	}
	if o.scale > 0 {
		// The scale section runs on a stack of its own. What the previous
		// one held goes back to the system first, so that this process's
		// memory is the new stack's.
		debug.FreeOSMemory()
		start := time.Now()
		var err error
		if res.Scale, err = scale(ctx, o, log); err != nil {
			return nil, fmt.Errorf("scale: %w", err)
		}
		res.Scale.ElapsedSeconds = time.Since(start).Seconds()
	}
	return res, nil
}

// sections runs idle, burst, the ceiling and the steady state on one stack
// of o.nodes nodes.
func sections(ctx context.Context, o options, res *Results, log *slog.Logger) error {
	res.Nodes, res.IdlePods, res.BurstPods, res.CeilingShape = o.nodes, o.idle, o.burst, podShape
	s, err := startStack(ctx, stackConfig{binDir: o.binDir, nodes: o.nodes, maxPods: 250}, log)
	defer s.stop()
	if err != nil {
		return err
	}
	api := s.cp.URL()
	if err := waitNodes(ctx, api, o.nodes); err != nil {
		return err
	}
	if o.apiGet > 0 {
		// First, on a stack that is doing nothing else.
		fmt.Fprintf(stderr, "api-get: %d GETs per mode\n", o.apiGet)
		if res.APIGet, err = apiGetSection(ctx, s, o.apiGet); err != nil {
			return fmt.Errorf("api-get: %w", err)
		}
	}
	tr, err := watchPods(ctx, api)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "idle: %d pods one at a time\n", o.idle)
	idle, err := oneAtATime(ctx, api, tr, "idle-", o.idle)
	if err != nil {
		return err
	}
	res.IdleCreateToRun = percentiles(idle)
	if err := deleteAll(ctx, api, tr, "idle-", o.idle); err != nil {
		return err
	}

	if o.burst > 0 {
		if err := burst(ctx, s, api, tr, o, res, log); err != nil {
			return err
		}
	}
	if o.nat > 0 {
		if res.NAT, err = natSection(ctx, api, o.nodes, o.nat); err != nil {
			return fmt.Errorf("nat: %w", err)
		}
	}
	if o.steady > 0 {
		c, err := s.dialTemporal(log)
		if err != nil {
			return err
		}
		defer c.Close()
		if res.Steady, err = steadyState(ctx, s, api, tr, c, o); err != nil {
			return fmt.Errorf("steady state: %w", err)
		}
	}
	res.PeakRSS = s.peakRSS()
	return nil
}

// burst creates o.burst pods at once, deletes them, and runs the ceiling at
// the same concurrency.
func burst(ctx context.Context, s *stack, api string, tr *tracker, o options, res *Results, log *slog.Logger) error {
	fmt.Fprintf(stderr, "burst: %d pods at once\n", o.burst)
	start, before := time.Now(), s.cpuTicks()
	created := make([]time.Time, o.burst)
	if err := parallel(o.burst, 32, func(i int) error {
		created[i] = time.Now()
		name := fmt.Sprintf("burst-%d", i)
		return createPod(api, name, podBody(name))
	}); err != nil {
		return err
	}
	var running []time.Duration
	last := start
	for i := range o.burst {
		at, err := tr.wait(ctx, fmt.Sprintf("burst-%d", i), tr.running, 10*time.Minute)
		if err != nil {
			return err
		}
		running = append(running, at.Sub(created[i]))
		if at.After(last) {
			last = at
		}
	}
	res.BurstThroughput = float64(o.burst) / last.Sub(start).Seconds()
	res.BurstCPU = map[string]float64{}
	for part, t := range s.cpuTicks() {
		res.BurstCPU[part] = float64(t-before[part]) * 1000 / clockTicks / float64(o.burst)
	}
	res.BurstCreateToRun = percentiles(running)

	fmt.Fprintf(stderr, "burst: deleting %d pods\n", o.burst)
	deleted := make([]time.Time, o.burst)
	if err := parallel(o.burst, 32, func(i int) error {
		deleted[i] = time.Now()
		return deletePod(api, fmt.Sprintf("burst-%d", i))
	}); err != nil {
		return err
	}
	var gone []time.Duration
	for i := range o.burst {
		at, err := tr.wait(ctx, fmt.Sprintf("burst-%d", i), tr.gone, 10*time.Minute)
		if err != nil {
			return err
		}
		gone = append(gone, at.Sub(deleted[i]))
	}
	res.BurstDelete = percentiles(gone)

	fmt.Fprintf(stderr, "ceiling: %d no-op workflows of %d local activities and %d activities\n", o.burst, podShape.Local, podShape.Remote)
	var err error
	if res.Ceiling, err = ceiling(ctx, s, o.burst, log); err != nil {
		return err
	}
	res.Ratio = res.BurstThroughput / res.Ceiling

	fmt.Fprintf(stderr, "host floor: %d provisions on %d fresh simulated nodes, no Temporal\n", o.burst, o.nodes)
	if res.HostFloor, err = hostFloor(ctx, o); err != nil {
		return err
	}
	res.MachineCeiling = machineCeiling(res.Ceiling, res.HostFloor.PodsPerSecond)
	res.MachineRatio = res.BurstThroughput / res.MachineCeiling
	return nil
}

// hostFloor provisions o.burst pods over o.nodes fresh simulated nodes
// with the host library alone, as the agents would with nothing else to
// do, in a process of its own.
func hostFloor(ctx context.Context, o options) (*HostFloor, error) {
	bin, err := filepath.Abs(o.binDir)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "zwbench-hostfloor-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var f HostFloor
	err = runFloor(ctx, hostFloorMode, hostFloorRequest{Sim: filepath.Join(bin, "illumos-sim"), Dir: dir, Nodes: o.nodes, Pods: o.burst,
		PerNode: nodeworker.DefaultMaxConcurrentActivities, Installs: agent.DefaultMaxConcurrentInstalls}, &f)
	return &f, err
}

// machineCeiling is the rate at which one machine does two kinds of work
// for every pod when they share its CPU, each of which alone it does at
// its own rate: a pod costs the machine 1/a + 1/b of its time.
func machineCeiling(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return 1 / (1/a + 1/b)
}

func waitNodes(ctx context.Context, api string, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var list model.List[model.Node]
		if err := getJSON(api+"/api/v1/nodes", &list); err == nil {
			ready := 0
			for _, node := range list.Items {
				if node.Ready() {
					ready++
				}
			}
			if ready == n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%d nodes did not become Ready", n)
}

func podBody(name string) []byte {
	return []byte(fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"terminationGracePeriodSeconds":0,"containers":[{"name":"app","image":"base",
	  "command":["sleep","3600"],"resources":{"requests":{"cpu":"10m","memory":"16Mi"}}}]}}`, name))
}

// createPod creates a pod, retrying while the API answers 503 (it then
// changed nothing and asks to retry shortly), as a client should.
func createPod(api, name string, body []byte) error {
	for attempt := 1; ; attempt++ {
		resp, err := apiHTTP.Post(api+"/api/v1/namespaces/default/pods", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusCreated:
			return nil
		case resp.StatusCode == http.StatusServiceUnavailable && attempt < 10:
			time.Sleep(time.Duration(attempt) * time.Second)
		default:
			return fmt.Errorf("create %s: %d %s", name, resp.StatusCode, b)
		}
	}
}

func deletePod(api, name string) error {
	req, _ := http.NewRequest("DELETE", api+"/api/v1/namespaces/default/pods/"+name+"?gracePeriodSeconds=0", nil)
	resp, err := apiHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("delete %s: %d %s", name, resp.StatusCode, b)
	}
	return nil
}

func deleteAll(ctx context.Context, api string, tr *tracker, prefix string, n int) error {
	if err := parallel(n, 16, func(i int) error { return deletePod(api, fmt.Sprintf("%s%d", prefix, i)) }); err != nil {
		return err
	}
	for i := range n {
		if _, err := tr.wait(ctx, fmt.Sprintf("%s%d", prefix, i), tr.gone, 5*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

func getJSON(url string, into any) error {
	resp, err := apiHTTP.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(into)
}

// parallel runs fn(0..n-1) with at most width in flight.
func parallel(n, width int, fn func(int) error) error {
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// tracker timestamps, from the API's watch, when each pod first runs, since
// when it is Ready (only while it is) and when it is gone.
type tracker struct {
	mu      sync.Mutex
	running map[string]time.Time
	ready   map[string]time.Time
	gone    map[string]time.Time
	changed chan struct{}
}

func watchPods(ctx context.Context, api string) (*tracker, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", api+"/api/v1/pods?watch=true", nil)
	resp, err := apiHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	tr := &tracker{running: map[string]time.Time{}, ready: map[string]time.Time{}, gone: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			now := time.Now()
			var ev struct {
				Type   string
				Object model.Pod
			}
			if json.Unmarshal([]byte(line[6:]), &ev) != nil {
				continue
			}
			name := ev.Object.Metadata.Name
			tr.mu.Lock()
			switch {
			case ev.Type == "DELETED":
				tr.gone[name] = now
				delete(tr.running, name)
				delete(tr.ready, name)
			case ev.Object.Status.Phase == model.PodRunning:
				if _, seen := tr.running[name]; !seen {
					tr.running[name] = now
				}
			}
			if ev.Type != "DELETED" && ev.Object.RunningAndReady() {
				if _, seen := tr.ready[name]; !seen {
					tr.ready[name] = now
				}
			} else {
				delete(tr.ready, name)
			}
			tr.mu.Unlock()
			select {
			case tr.changed <- struct{}{}:
			default:
			}
		}
	}()
	return tr, nil
}

func (tr *tracker) wait(ctx context.Context, name string, m map[string]time.Time, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		tr.mu.Lock()
		at, ok := m[name]
		tr.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-deadline:
			return time.Time{}, fmt.Errorf("pod %s: timed out after %s", name, timeout)
		case <-tr.changed:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// count is how many of names m holds.
func (tr *tracker) count(m map[string]time.Time, names []string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, name := range names {
		if _, ok := m[name]; ok {
			n++
		}
	}
	return n
}

func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(q float64) float64 {
		i := int(q*float64(len(d))+0.5) - 1
		i = max(0, min(i, len(d)-1))
		return float64(d[i].Microseconds()) / 1000
	}
	return Percentiles{P50: at(0.5), P95: at(0.95), P99: at(0.99), Max: float64(d[len(d)-1].Microseconds()) / 1000}
}

// ceiling runs n no-op workflows shaped like a pod's start (podShape),
// all at once, on the same server with the same worker settings as the
// control plane, and returns workflows per second.
func ceiling(ctx context.Context, s *stack, n int, log *slog.Logger) (float64, error) {
	c, err := s.dialTemporal(log)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	const queue = "zwbench-ceiling"
	w := worker.New(c, queue, worker.Options{MaxConcurrentWorkflowTaskPollers: 8, MaxConcurrentActivityTaskPollers: 8})
	w.RegisterWorkflowWithOptions(ceilingWorkflow, workflow.RegisterOptions{Name: "Ceiling"})
	w.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "Noop"})
	if err := w.Start(); err != nil {
		return 0, err
	}
	defer w.Stop()
	start := time.Now()
	runs := make([]tclient.WorkflowRun, n)
	if err := parallel(n, 32, func(i int) error {
		r, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: fmt.Sprintf("ceiling-%d-%d", start.UnixNano(), i), TaskQueue: queue}, "Ceiling", podShape)
		runs[i] = r
		return err
	}); err != nil {
		return 0, err
	}
	// Completion is read from visibility-free describes, not run.Get's long poll.
	for _, r := range runs {
		for {
			d, err := c.DescribeWorkflowExecution(ctx, r.GetID(), r.GetRunID())
			if err != nil {
				return 0, err
			}
			if d.WorkflowExecutionInfo.CloseTime != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var last time.Time
	for _, r := range runs {
		d, _ := c.DescribeWorkflowExecution(ctx, r.GetID(), r.GetRunID())
		if ct := d.WorkflowExecutionInfo.CloseTime.AsTime(); ct.After(last) {
			last = ct
		}
	}
	return float64(n) / last.Sub(start).Seconds(), nil
}

func ceilingWorkflow(ctx workflow.Context, shape ceilingShape) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 30 * time.Second})
	for range shape.Local {
		if err := workflow.ExecuteLocalActivity(ctx, "Noop").Get(ctx, nil); err != nil {
			return err
		}
	}
	for range shape.Remote {
		if err := workflow.ExecuteActivity(ctx, "Noop").Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}
