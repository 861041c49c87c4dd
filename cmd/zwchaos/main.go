// Command zwchaos measures zonewright's promise that a crash of any
// process leaves the system able to finish or roll back by itself. It
// starts every part as a process of its own, as production runs them
// (PostgreSQL, the Temporal server, two API replicas, three agents on
// simulated nodes), each restarted when it dies; churns the cluster
// through the API (pods, deployments scaled and rolled, jobs, services,
// claims, nodes cordoned and drained) while it kills processes, restarts
// PostgreSQL and injects command failures and latency on the nodes at
// seeded random moments; then stops, waits for the system to converge
// and checks invariants: every pod that should run runs with exactly its
// host resources, nothing deleted left anything behind (hosts, IPAM,
// NAT, DNS), ClusterIPs match services, claims kept their data, a
// deployment at rest kept its pods and recorded no failure, no workflow
// is stuck. It prints a table (and JSON with --json) and exits
// non-zero when an invariant misses its target.
//
//	go run ./cmd/zwchaos --bin bin --duration 2m --seed 7
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/zonewright/zonewright/internal/fabric"
)

type options struct {
	bin             string
	duration        time.Duration
	convergeTimeout time.Duration
	seed            uint64
	jsonOut         string
	keep            bool
	minGap, maxGap  time.Duration
	// isolated runs the nodes and zones in namespaces of their own.
	isolated bool
}

func main() {
	o := options{}
	flag.StringVar(&o.bin, "bin", "bin", "directory of zonewright and illumos-sim (make build)")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the churn and the kills last")
	flag.DurationVar(&o.convergeTimeout, "converge-timeout", 5*time.Minute, "how long the system may take to converge once they stop")
	flag.Uint64Var(&o.seed, "seed", 0, "seed of the churn and of the kills' schedule; 0 picks one from the time (printed)")
	flag.StringVar(&o.jsonOut, "json", "", "also write the results as JSON to this file")
	flag.BoolVar(&o.keep, "keep", false, "keep the stack's directory (logs, data) after the run")
	flag.DurationVar(&o.minGap, "min-gap", 8*time.Second, "shortest time between two chaos events")
	flag.DurationVar(&o.maxGap, "max-gap", 25*time.Second, "longest time between two chaos events")
	flag.BoolVar(&o.isolated, "isolation", false, "run the nodes and zones in namespaces of their own, as make dev does (unset: where the machine allows it; needs root)")
	flag.Parse()
	// Unset, isolation is probed (a namespace made and removed) only now,
	// not for --help or a bad flag.
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "isolation" })
	if !given {
		o.isolated = fabric.DirectIsolationSupported() == nil
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	if o.minGap <= 0 || o.maxGap < o.minGap {
		fmt.Fprintln(os.Stderr, "zwchaos: want 0 < --min-gap <= --max-gap")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Info: every kill and every restart.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	res, err := run(ctx, o, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "zwchaos:", err)
		os.Exit(1)
	}
	res.print(os.Stdout)
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "zwchaos:", err)
			os.Exit(1)
		}
	}
	if !res.Passed {
		os.Exit(1)
	}
}

// Results are the figures of one run.
type Results struct {
	Seed            uint64              `json:"seed"`
	Duration        string              `json:"duration"`
	Invariants      []Invariant         `json:"invariants"`
	Converged       bool                `json:"converged"`
	ConvergeSeconds float64             `json:"convergeSeconds"`
	Kills           map[string]int      `json:"chaosEvents"`
	ClaimsMoved     int                 `json:"claimsMoved"`
	Operations      map[string]*OpCount `json:"operations"`
	Details         []string            `json:"details,omitempty"`
	Passed          bool                `json:"passed"`
	Reproduce       string              `json:"reproduce"`
	Dir             string              `json:"dir,omitempty"`
}

// Invariant is one checked figure and the value it must have.
type Invariant struct {
	Name   string `json:"name"`
	Value  int    `json:"value"`
	Target int    `json:"target"`
	OK     bool   `json:"ok"`
}

func run(ctx context.Context, o options, log *slog.Logger) (*Results, error) {
	fmt.Printf("zwchaos: seed %d, duration %s, isolation %v (reproduce: make chaos CHAOS_FLAGS=\"--seed %d --duration %s --isolation=%v\")\n", o.seed, o.duration, o.isolated, o.seed, o.duration, o.isolated)
	started := time.Now()
	s, err := startStack(ctx, o.bin, 2, 3, o.isolated, log)
	if s != nil {
		defer s.stop(o.keep)
	}
	if err != nil {
		if s != nil {
			return nil, fmt.Errorf("%w (logs in %s; --keep keeps them)", err, s.dir)
		}
		return nil, err
	}
	fmt.Printf("zwchaos: stack up in %s (%s)\n", time.Since(started).Round(time.Second), s.dir)
	a := &api{s: s, ops: map[string]*OpCount{}}
	w := &world{pods: map[string]bool{}, unanswered: map[string]bool{}, deployments: map[string]int{}, services: map[string]bool{}, claims: map[string]string{}, drained: map[string]bool{},
		claimNodes: map[string]map[string]bool{}}
	var nodes []string
	for _, n := range s.Nodes.Nodes {
		nodes = append(nodes, n.Name)
	}
	// The deployment at rest runs on the first node, which the churn
	// never cordons or drains.
	if w.atRest, w.atRestSince, err = startAtRest(ctx, a, nodes[0]); err != nil {
		return nil, fmt.Errorf("%w (logs in %s; --keep keeps them)", err, s.dir)
	}
	ch := storm(ctx, o, s, a, w, nodes)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	fmt.Printf("zwchaos: churn and chaos over (%d chaos events); waiting for convergence\n", len(ch.events))
	// The operator's part after a storm: nodes back in service.
	for _, n := range nodes {
		a.do(ctx, "uncordon node", "POST", "/api/v1/nodes/"+n+"/uncordon", nil)
	}
	res := &Results{Seed: o.seed, Duration: o.duration.String(), Kills: ch.counts, Operations: a.ops,
		Reproduce: fmt.Sprintf("make chaos CHAOS_FLAGS=\"--seed %d --duration %s --isolation=%v\"", o.seed, o.duration, o.isolated)}
	if o.keep {
		res.Dir = s.dir
	}
	obs, err := awaitConvergence(ctx, o, s, a, w, res)
	if err != nil {
		return nil, err
	}
	finish(ctx, o, s, a, w, ch, obs, res)
	return res, nil
}

// storm churns the cluster through the API while the chaos kills its
// processes and faults its nodes, for o.duration; the churn leaves
// nodes[0] alone.
func storm(ctx context.Context, o options, s *stack, a *api, w *world, nodes []string) *chaos {
	ch := &chaos{s: s, rng: rand.New(rand.NewPCG(o.seed, 2)), minGap: o.minGap, maxGap: o.maxGap, counts: map[string]int{}}
	runCtx, stopRun := context.WithTimeout(ctx, o.duration)
	defer stopRun()
	done := make(chan struct{}, 2)
	go func() { churn(runCtx, a, w, rand.New(rand.NewPCG(o.seed, 1)), nodes[1:]); done <- struct{}{} }()
	go func() { ch.run(runCtx); done <- struct{}{} }()
	<-done
	<-done
	return ch
}

// awaitConvergence observes the cluster until it has converged or
// o.convergeTimeout has passed, and returns the last observation.
func awaitConvergence(ctx context.Context, o options, s *stack, a *api, w *world, res *Results) (*observation, error) {
	convergeStart := time.Now()
	var obs *observation
	for time.Since(convergeStart) < o.convergeTimeout && ctx.Err() == nil {
		if s.allUp() {
			if cur, err := observe(ctx, s, a); err == nil {
				obs = cur
				if converged(obs, w, s) {
					res.Converged = true
					break
				}
			}
		}
		time.Sleep(2 * time.Second)
	}
	res.ConvergeSeconds = time.Since(convergeStart).Seconds()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if obs == nil {
		return nil, fmt.Errorf("the system could not be observed within %s (logs in %s)", o.convergeTimeout, s.dir)
	}
	return obs, nil
}

// finish checks the invariants on the converged cluster's observation,
// stops the cluster as an operator would and checks it left nothing.
func finish(ctx context.Context, o options, s *stack, a *api, w *world, ch *chaos, obs *observation, res *Results) {
	w.sawClaims(obs.claims)
	res.ClaimsMoved = w.claimsMoved()
	res.check(ctx, obs, w, s)
	// The final stop, as an operator's: it leaves nothing behind.
	s.stop(o.keep)
	left := s.leftovers()
	res.add("processes, namespaces, links left after the stop", len(left), 0, left)
	res.Passed = res.Passed && len(left) == 0
	for _, f := range a.failures {
		res.Details = append(res.Details, "answer: "+f)
	}
	res.Details = append(res.Details, ch.events...)
}

// converged reports whether the system has settled: every pod settled,
// every deployment at its replicas, nothing on the hosts for no pod, no
// address held for no pod.
func converged(o *observation, w *world, s *stack) bool {
	for _, p := range o.pods {
		if !settled(p) {
			return false
		}
	}
	if missing(o, w) > 0 || len(o.lifecycleFaults()) > 0 || len(o.podHostFaults()) > 0 || len(o.ipamLeaks()) > 0 || len(o.natLeaks(s.serviceCIDR, s.clusterCIDR)) > 0 {
		return false
	}
	z, v, d, _ := o.leaks()
	return z+v+d == 0
}

// expected counts the pods that should exist: the churn's standalone
// pods it did not delete, the claims' pods and the deployments' replicas.
func expected(o *observation, w *world) int {
	have := map[string]bool{}
	for _, p := range o.pods {
		have[p.Metadata.Name] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.claims)
	for name, ok := range w.pods {
		if ok && (have[name] || !w.unanswered[name]) {
			n++
		}
	}
	for _, d := range o.deployments {
		if d.Spec.Replicas != nil {
			n += int(*d.Spec.Replicas)
		}
	}
	return n
}

// missing counts the standalone pods the churn kept that are gone, and
// the replicas deployments lack.
func missing(o *observation, w *world) int {
	have := map[string]bool{}
	owned := map[string]int{}
	for _, p := range o.pods {
		have[p.Metadata.Name] = true
		for _, r := range p.Metadata.OwnerReferences {
			if r.Kind == "Deployment" {
				owned[r.Name]++
			}
		}
	}
	n := 0
	w.mu.Lock()
	for name, ok := range w.pods {
		if ok && !have[name] && !w.unanswered[name] {
			n++
		}
	}
	for name := range w.claims {
		if !have[name] {
			n++
		}
	}
	w.mu.Unlock()
	for _, d := range o.deployments {
		if d.Spec.Replicas != nil && owned[d.Metadata.Name] != int(*d.Spec.Replicas) {
			n++
		}
	}
	return n
}

func (r *Results) add(name string, value, target int, details []string) {
	r.Invariants = append(r.Invariants, Invariant{Name: name, Value: value, Target: target, OK: value == target})
	for _, d := range details {
		r.Details = append(r.Details, name+": "+d)
	}
}

func (r *Results) check(ctx context.Context, o *observation, w *world, s *stack) {
	want := expected(o, w)
	runningReady := 0
	var stuck []string
	for _, p := range o.pods {
		if ownerKind(p) != "Job" && p.RunningAndReady() && p.Metadata.DeletionTimestamp == nil {
			runningReady++
		}
		if !settled(p) {
			stuck = append(stuck, fmt.Sprintf("%s: phase %s, reason %q, deleting %v", p.Metadata.Name, p.Status.Phase, p.Status.Reason, p.Metadata.DeletionTimestamp != nil))
		}
	}
	r.add("pods that should exist, Running and Ready", runningReady, want, nil)
	r.add("pods without exactly one zone, VNIC, dataset, address", len(o.podHostFaults()), 0, o.podHostFaults())
	z, v, d, what := o.leaks()
	r.add("leaked zones, VNICs, datasets on hosts", z+v+d, 0, what)
	r.add("leaked pod addresses (IPAM)", len(o.ipamLeaks()), 0, o.ipamLeaks())
	r.add("leaked NAT rules", len(o.natLeaks(s.serviceCIDR, s.clusterCIDR)), 0, o.natLeaks(s.serviceCIDR, s.clusterCIDR))
	var deleted []string
	w.mu.Lock()
	for name, ok := range w.services {
		if !ok {
			deleted = append(deleted, name)
		}
	}
	w.mu.Unlock()
	sort.Strings(deleted)
	dns := dnsLeaks(ctx, s.DNSAddrs, deleted, o.services)
	r.add("DNS answers wrong (deleted or live services)", len(dns), 0, dns)
	r.add("ClusterIPs allocated minus services", o.clusterIPs-len(o.services), 0, nil)
	claims := o.claimFaults(w.claims)
	r.add("claims whose data is lost", len(claims), 0, claims)
	r.add("workflows stuck (pods not settled)", len(stuck), 0, stuck)
	r.add("pods without their lifecycle, lifecycles without their pod", len(o.lifecycleFaults()), 0, o.lifecycleFaults())
	serverErrors := 0
	for _, c := range r.Operations {
		serverErrors += c.ServerErrors
	}
	atRest := o.atRestFaults(w.atRest, w.atRestSince)
	r.add("deployment at rest: pods replaced, failures recorded", len(atRest), 0, atRest)
	r.add("API answers of 5xx other than 503", serverErrors, 0, nil)
	converged := 0
	if !r.Converged {
		converged = 1
	}
	r.add("did not converge in time", converged, 0, nil)
	r.Passed = true
	for _, i := range r.Invariants {
		r.Passed = r.Passed && i.OK
	}
}

func (r *Results) print(out io.Writer) {
	fmt.Fprintf(out, "\nzwchaos seed %d, duration %s: converged %v after %.0f s\n\n", r.Seed, r.Duration, r.Converged, r.ConvergeSeconds)
	fmt.Fprintf(out, "%-62s %8s %8s\n", "invariant", "value", "target")
	for _, i := range r.Invariants {
		mark := ""
		if !i.OK {
			mark = "  FAIL"
		}
		fmt.Fprintf(out, "%-62s %8d %8d%s\n", i.Name, i.Value, i.Target, mark)
	}
	fmt.Fprintf(out, "\nclaims moved between nodes (by drains): %d\n", r.ClaimsMoved)
	fmt.Fprintf(out, "\n%-24s %6s\n", "chaos event", "count")
	for _, k := range sortedKeys(r.Kills) {
		fmt.Fprintf(out, "%-24s %6d\n", k, r.Kills[k])
	}
	fmt.Fprintf(out, "\n%-22s %6s %9s %9s %6s %6s %11s\n", "operation", "ok", "4xx exp.", "4xx other", "503", "5xx", "unreachable")
	for _, k := range sortedKeys(r.Operations) {
		c := r.Operations[k]
		fmt.Fprintf(out, "%-22s %6d %9d %9d %6d %6d %11d\n", k, c.OK, c.Expected, c.Unexpected4xx, c.Unavailable, c.ServerErrors, c.Unreachable)
	}
	if len(r.Details) > 0 {
		fmt.Fprintln(out, "\ndetails:")
		for _, d := range r.Details {
			fmt.Fprintln(out, "  "+d)
		}
	}
	if r.Passed {
		fmt.Fprintln(out, "\nPASS")
		return
	}
	fmt.Fprintf(out, "\nFAIL: reproduce with %s\n", r.Reproduce)
	if r.Dir != "" {
		fmt.Fprintf(out, "logs and data in %s\n", r.Dir)
	}
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
