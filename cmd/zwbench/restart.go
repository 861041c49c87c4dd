package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tclient "go.temporal.io/sdk/client"

	"github.com/zonewright/zonewright/internal/devcluster"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/sim"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

const (
	// leftoverSettle is how long after a stop its leftovers are counted:
	// a zone boot in flight when its agent stopped comes up seconds later.
	leftoverSettle = 5 * time.Second
	// restartBound fails the restart section's waits: 2,600 pods on 20
	// nodes took more than 10 minutes to run again.
	restartBound = 30 * time.Minute
	// queriesInFlight bounds the lifecycles' status queries at once.
	queriesInFlight = 16
)

// StopResults are the whole stack stopped with every pod running, as
// Ctrl-C of make dev stops it: agents, zones, control plane, Temporal and
// PostgreSQL, and how many of its processes were still there
// leftoverSettle later.
type StopResults struct {
	Seconds       float64 `json:"seconds"`
	ProcessesLeft int     `json:"processesLeft"`
	// NodesSeconds is the part of Seconds the nodes took (agents stopped,
	// zones halted), before the control plane, Temporal and PostgreSQL.
	NodesSeconds float64 `json:"nodesSeconds"`
}

// RestartResults are the stopped stack started again on its directory in
// production's shape (a `zonewright serve` and a `zonewright temporal`
// process), its memory by process with every pod running, and a kill -9
// of its whole control plane.
type RestartResults struct {
	Pods int `json:"pods"`
	// From the build until the API was ready, and until every pod's zone
	// ran again with every pod Running and Ready; zones installed anew
	// and pods replaced (new uid) in between: adopted, none is.
	StartSeconds     float64 `json:"startSeconds"`
	AllRunSeconds    float64 `json:"allRunningAndReadySeconds"`
	ZonesReinstalled int     `json:"zonesReinstalled"`
	PodsReplaced     int     `json:"podsReplaced"`
	// Memory by part of the stack, read once every pod ran again.
	Memory map[string]Memory `json:"memoryByPart"`
	Kill   *KillResults      `json:"kill,omitempty"`
	// Error is what stopped the section short, if anything did.
	Error string `json:"error,omitempty"`
}

// KillResults are the serve process, the Temporal server and PostgreSQL
// killed with SIGKILL at once and started again, as a host's crash and
// its service manager would: from the kill until the API was ready,
// until every pod's lifecycle answered a status query (reattached to a
// worker), until the API listed every pod Running and Ready again, and
// from then until a pod created anew ran. Zones booted again and pods
// replaced in between: the kill replaces nothing, so none is.
type KillResults struct {
	APIReadySeconds      float64 `json:"apiReadySeconds"`
	LifecyclesSeconds    float64 `json:"lifecyclesAnsweredSeconds"`
	LifecyclesUnanswered int     `json:"lifecyclesUnanswered"`
	AllReadySeconds      float64 `json:"allReadySeconds"`
	NewPodRunningSeconds float64 `json:"newPodRunningSeconds"`
	ZonesRebooted        int     `json:"zonesRebooted"`
	PodsReplaced         int     `json:"podsReplaced"`
}

// cleanStop stops the whole stack as make dev's Ctrl-C does, leaving its
// directory for a start again.
func cleanStop(s *stack) *StopResults {
	start := time.Now()
	s.nodes.Stop() // as the cluster's stop does first
	nodes := time.Since(start).Seconds()
	s.cluster.Stop()
	res := &StopResults{Seconds: time.Since(start).Seconds(), NodesSeconds: nodes}
	time.Sleep(leftoverSettle)
	res.ProcessesLeft = processesUnder(s.dir)
	return res
}

// restartSection starts the stack, stopped with the pods of uids (name →
// uid) running, again in production's shape, times its adoption of every
// pod, reads its memory, and kills its control plane.
func restartSection(ctx context.Context, s *stack, cfg stackConfig, uids map[string]string, log *slog.Logger) *RestartResults {
	res := &RestartResults{Pods: len(uids)}
	if err := restart(ctx, s, cfg, uids, log, res); err != nil {
		res.Error = err.Error()
	}
	return res
}

// restart fills in res as it goes.
func restart(ctx context.Context, s *stack, cfg stackConfig, uids map[string]string, log *slog.Logger, res *RestartResults) error {
	simBin := filepath.Join(cfg.binDir, "illumos-sim")
	before, err := zonesOf(s, simBin)
	if err != nil {
		return err
	}
	opts, err := s.options(cfg, log)
	if err != nil {
		return err
	}
	// The in-process control plane's ranges, as the serve process's flags.
	cp := opts.ControlPlane
	opts.ServeArgs = []string{"--service-cidr", cp.ServiceCIDR, "--cluster-cidr", cp.ClusterCIDR,
		"--node-cidr-mask-size", strconv.Itoa(cp.NodeCIDRMaskSize), "--log-level", "warn"}
	opts.Replicas, opts.CountRequests = 1, false
	fmt.Fprintf(stderr, "scale: starting the stack again with %d pods, its control plane in processes\n", len(uids))
	start := time.Now()
	c, err := devcluster.Build(ctx, opts)
	if err != nil {
		return fmt.Errorf("start again: %w", err)
	}
	s.took(c)
	res.StartSeconds = time.Since(start).Seconds()
	api := c.APIURLs[0]
	if err := until(ctx, func() (bool, error) { return allRunAgain(s, simBin, api, len(uids)) }); err != nil {
		return fmt.Errorf("every pod running again: %w (%s)", err, howFarAgain(s, simBin, api))
	}
	res.AllRunSeconds = time.Since(start).Seconds()
	after, err := zonesOf(s, simBin)
	if err != nil {
		return err
	}
	res.ZonesReinstalled, _ = zoneChanges(before, after)
	if res.PodsReplaced, err = podsReplaced(api, uids); err != nil {
		return err
	}
	res.Memory = map[string]Memory{}
	for label, m := range s.memory() {
		if strings.HasPrefix(label, "agent ") {
			label = agentsLabel
		}
		sum := res.Memory[label]
		res.Memory[label] = Memory{RSS: sum.RSS + m.RSS, PSS: sum.PSS + m.PSS, Processes: sum.Processes + m.Processes}
	}
	res.Kill = &KillResults{}
	if err := killControlPlane(ctx, s, simBin, api, uids, log, res.Kill); err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	return nil
}

// killControlPlane kills serve, Temporal and PostgreSQL at once, and
// times the control plane's return.
func killControlPlane(ctx context.Context, s *stack, simBin, api string, uids map[string]string, log *slog.Logger, res *KillResults) error {
	before, err := zonesOf(s, simBin)
	if err != nil {
		return err
	}
	c := s.cluster
	fmt.Fprintf(stderr, "scale: kill -9 of serve, Temporal and PostgreSQL\n")
	start := time.Now()
	var wg sync.WaitGroup
	var pgErr error
	wg.Go(func() { pgErr = c.RestartPostgres(ctx, true) })
	wg.Go(c.TemporalProcess.Kill)
	wg.Go(c.Replicas[0].Kill)
	wg.Wait()
	if pgErr != nil {
		return pgErr
	}
	if err := until(ctx, func() (bool, error) { return devcluster.Ready(apiHTTP, api), nil }); err != nil {
		return fmt.Errorf("API ready again: %w", err)
	}
	res.APIReadySeconds = time.Since(start).Seconds()
	tc, err := c.DialOperator(log)
	if err != nil {
		return err
	}
	defer tc.Close()
	if res.LifecyclesUnanswered = queryLifecycles(ctx, tc, uids); res.LifecyclesUnanswered > 0 {
		return fmt.Errorf("%d lifecycles did not answer within %s", res.LifecyclesUnanswered, restartBound)
	}
	res.LifecyclesSeconds = time.Since(start).Seconds()
	if err := until(ctx, func() (bool, error) { return allReady(api, len(uids)) }); err != nil {
		return fmt.Errorf("every pod Ready again: %w", err)
	}
	res.AllReadySeconds = time.Since(start).Seconds()
	created := time.Now()
	tr, err := watchPods(ctx, api)
	if err != nil {
		return err
	}
	if err := createPod(api, "after-kill", podBody("after-kill")); err != nil {
		return err
	}
	if _, err := tr.wait(ctx, "after-kill", tr.running, restartBound); err != nil {
		return err
	}
	res.NewPodRunningSeconds = time.Since(created).Seconds()
	after, err := zonesOf(s, simBin)
	if err != nil {
		return err
	}
	_, res.ZonesRebooted = zoneChanges(before, after)
	res.PodsReplaced, err = podsReplaced(api, uids)
	return err
}

// queryLifecycles asks every pod's lifecycle for its status until each
// has answered, queriesInFlight at once, for at most restartBound; it
// returns how many never did. An answer needs a worker to have taken the
// workflow up again.
func queryLifecycles(ctx context.Context, tc tclient.Client, uids map[string]string) int {
	ctx, cancel := context.WithTimeout(ctx, restartBound)
	defer cancel()
	names := make([]string, 0, len(uids))
	for name := range uids {
		names = append(names, name)
	}
	var unanswered atomic.Int64
	_ = parallel(len(names), queriesInFlight, func(i int) error {
		id := podcontract.WorkflowID(model.DefaultNamespace, names[i])
		for ctx.Err() == nil {
			qctx, qcancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := tc.QueryWorkflow(qctx, id, "", podcontract.QueryStatus)
			qcancel()
			if err == nil {
				return nil
			}
			_ = sleep(ctx, time.Second)
		}
		unanswered.Add(1)
		return nil
	})
	return int(unanswered.Load())
}

// zone is one incarnation of a zone: its install (UUID) and its boot
// (zone id and supervisor).
type zone struct {
	uuid       string
	id, superv int
	running    bool
}

// zonesOf reads every node's zones from its simulator, by node and name.
func zonesOf(s *stack, simBin string) (map[string]zone, error) {
	out := map[string]zone{}
	for _, n := range s.nodes.Nodes {
		b, err := exec.Command(simBin, "state", "--root", n.Root).Output()
		if err != nil {
			return nil, fmt.Errorf("state of %s: %w", n.Name, err)
		}
		var st sim.State
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("state of %s: %w", n.Name, err)
		}
		for _, z := range st.Zones {
			if z.Name != "global" {
				out[n.Name+"/"+z.Name] = zone{uuid: z.UUID, id: z.ID, superv: z.SupervisorPID, running: z.State == "running"}
			}
		}
	}
	return out, nil
}

// zoneChanges counts the zones of before that are gone or installed anew
// in after, and those booted again.
func zoneChanges(before, after map[string]zone) (reinstalled, rebooted int) {
	for key, b := range before {
		a, ok := after[key]
		switch {
		case !ok || a.uuid != b.uuid:
			reinstalled++
		case a.id != b.id || a.superv != b.superv:
			rebooted++
		}
	}
	return reinstalled, rebooted
}

// allRunAgain reports whether every node's zones run and the API lists
// want pods, each Running and Ready.
func allRunAgain(s *stack, simBin, api string, want int) (bool, error) {
	if ok, err := allReady(api, want); !ok || err != nil {
		return false, nil //nolint:nilerr // not yet: the API may still be coming up
	}
	zones, err := zonesOf(s, simBin)
	if err != nil {
		return false, err
	}
	for _, z := range zones {
		if !z.running {
			return false, nil
		}
	}
	return true, nil
}

// howFarAgain says how many zones run and pods are Running and Ready, for
// a start again that did not end.
func howFarAgain(s *stack, simBin, api string) string {
	zones, err := zonesOf(s, simBin)
	if err != nil {
		return err.Error()
	}
	running := 0
	for _, z := range zones {
		if z.running {
			running++
		}
	}
	ready, n, err := readyPods(api)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d of %d zones running, %d of %d pods Running and Ready", running, len(zones), ready, n)
}

// allReady reports whether the API lists want pods or more, every one
// Running and Ready.
func allReady(api string, want int) (bool, error) {
	ready, n, err := readyPods(api)
	if err != nil {
		return false, nil //nolint:nilerr // not yet: asked again
	}
	return ready == n && n >= want, nil
}

// readyPods counts the pods the API lists and those Running and Ready.
func readyPods(api string) (ready, n int, err error) {
	_, err = eachPodPage(api, func(pods []model.Pod) {
		for i := range pods {
			n++
			if pods[i].RunningAndReady() {
				ready++
			}
		}
	})
	return ready, n, err
}

// podUIDs are the API's pods, name → uid.
func podUIDs(api string) (map[string]string, error) {
	out := map[string]string{}
	_, err := eachPodPage(api, func(pods []model.Pod) {
		for _, p := range pods {
			out[p.Metadata.Name] = p.Metadata.UID
		}
	})
	return out, err
}

// podsReplaced counts the pods of uids the API no longer lists with the
// same uid.
func podsReplaced(api string, uids map[string]string) (int, error) {
	now, err := podUIDs(api)
	if err != nil {
		return 0, err
	}
	n := 0
	for name, uid := range uids {
		if now[name] != uid {
			n++
		}
	}
	return n, nil
}

// until polls cond every 2 s until it holds, fails, or restartBound has
// passed.
func until(ctx context.Context, cond func() (bool, error)) error {
	deadline := time.Now().Add(restartBound)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", restartBound)
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
	}
}
