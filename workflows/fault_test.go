package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
	"github.com/zonewright/zonewright/workflows/taskqueue"
)

// Failure at every step: a clean run of each workflow records the
// activities it calls, in order; then, for every one of them and every
// kind of fault, a fresh run injects that fault there and checks that the
// pod (or claim, or image) still ends where it should, that the host
// holds nothing it should not, and that no address was freed while a
// zone could still hold it. The steps come from the runs themselves, so
// a step added to a workflow is covered without touching the table.

// faultKind is what goes wrong at a step.
type faultKind string

const (
	// One attempt fails with a retryable error.
	faultOnce faultKind = "fails once"
	// A step that does something fails for good (a non-retryable error,
	// what the node answers for a request it cannot carry out); an undo
	// step fails (retryably) for ten minutes: it must outlast that.
	faultForGood faultKind = "fails for good"
	// The agent dies during the step: nothing is answered and the attempt
	// times out on its heartbeat (StartToClose without one), then is
	// retried. A provision is left half done.
	faultAgentKilled faultKind = "agent killed mid-step"
	// The node does not poll for longer than ScheduleToStart: the server
	// fails the activity with a ScheduleToStart timeout, never retried.
	faultUnreachable faultKind = "node unreachable past ScheduleToStart"
	// The step's effect happens, its answer is lost (StartToClose), and it
	// runs again.
	faultRunsTwice faultKind = "runs twice, first answer lost"
)

// undoFailsFor is how long an undo step keeps failing under faultForGood:
// past every retry of a step that does something (6 attempts, about 30 s)
// and within the 10 attempts (about 4 minutes at the undo's back-off) the
// SDK's test environment gives a retry policy without a maximum (the
// server's is unlimited).
const undoFailsFor = 2 * time.Minute

// stepRef names one activity call of a run: the n-th scheduling of the
// activity (retries are the same call), and for a provision one of the
// node's steps inside it.
type stepRef struct {
	Activity string
	N        int
	Sub      string
}

func (s stepRef) String() string {
	r := fmt.Sprintf("%s#%d", s.Activity, s.N)
	if s.Sub != "" {
		r += "/" + s.Sub
	}
	return r
}

// faultyCall is a call the fault hits, with what the fault does.
type faultyCall struct {
	kind    faultKind
	attempt int32
	undo    bool
	until   time.Time
}

// injected tells whether the step's effect happens and builds the error
// the fault answers with (nil: the call goes through).
func (c faultyCall) injected(ctx context.Context, now time.Time) (effect bool, err error) {
	switch c.kind {
	case faultOnce:
		if c.attempt == 1 {
			return false, temporal.NewApplicationError("injected: the step failed once", "Transient")
		}
	case faultForGood:
		if !c.undo {
			return false, temporal.NewNonRetryableApplicationError("injected: the step failed for good", "Failed", nil)
		}
		if now.Before(c.until) {
			return false, temporal.NewApplicationError("injected: the undo step keeps failing", "Transient")
		}
	case faultAgentKilled:
		if c.attempt == 1 {
			typ := enumspb.TIMEOUT_TYPE_START_TO_CLOSE
			if activity.GetInfo(ctx).HeartbeatTimeout > 0 {
				typ = enumspb.TIMEOUT_TYPE_HEARTBEAT
			}
			return false, temporal.NewTimeoutError(typ, nil)
		}
	case faultUnreachable:
		if c.attempt == 1 {
			return false, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
		}
	case faultRunsTwice:
		if c.attempt == 1 {
			return true, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
		}
	}
	return true, nil
}

// faultPlan counts calls, records them as steps and decides where a fault
// hits; one per run.
type faultPlan struct {
	mu     sync.Mutex
	counts map[string]int
	steps  []stepRef
	at     *stepRef
	kind   faultKind
	undo   map[string]bool // activities that undo something
	now    func() time.Time
	until  time.Time
}

func newFaultPlan(undo []string, now func() time.Time) *faultPlan {
	p := &faultPlan{counts: map[string]int{}, undo: map[string]bool{}, now: now}
	for _, u := range undo {
		p.undo[u] = true
	}
	return p
}

// inject makes the plan hit at with kind.
func (p *faultPlan) inject(at stepRef, kind faultKind) { p.at, p.kind = &at, kind }

// call records a call of the activity and returns the fault hitting it, if
// any; subs are the steps inside it that a fault may hit instead.
func (p *faultPlan) call(ctx context.Context, name string, subs ...string) (hit *faultyCall, sub string) {
	attempt := activity.GetInfo(ctx).Attempt
	p.mu.Lock()
	defer p.mu.Unlock()
	if attempt <= 1 {
		p.counts[name]++
		n := p.counts[name]
		p.steps = append(p.steps, stepRef{Activity: name, N: n})
		for _, s := range subs {
			p.steps = append(p.steps, stepRef{Activity: name, N: n, Sub: s})
		}
	}
	if p.at == nil || p.at.Activity != name || p.at.N != p.counts[name] {
		return nil, ""
	}
	if p.until.IsZero() {
		p.until = p.now().Add(undoFailsFor)
	}
	return &faultyCall{kind: p.kind, attempt: attempt, undo: p.undo[name], until: p.until}, p.at.Sub
}

// do runs a step's effect through the plan.
func (p *faultPlan) do(ctx context.Context, name string, effect func() error) error {
	hit, _ := p.call(ctx, name)
	if hit == nil {
		return effect()
	}
	happens, err := hit.injected(ctx, p.now())
	if happens {
		if eerr := effect(); eerr != nil {
			return eerr
		}
	}
	return err
}

// kindsFor lists the faults that fit a step: a control-plane activity
// (the database) only fails or answers late; a step of a provision's own
// is failed or killed there; a host activity gets every fault.
func kindsFor(s stepRef, hostActivity bool) []faultKind {
	switch {
	case !hostActivity:
		return []faultKind{faultOnce, faultRunsTwice}
	case s.Sub != "":
		return []faultKind{faultForGood, faultAgentKilled}
	case s.Activity == "ProvisionPod":
		// Its failures carry the step they happened at (the Sub cells).
		return []faultKind{faultOnce, faultUnreachable, faultRunsTwice}
	}
	return []faultKind{faultOnce, faultForGood, faultAgentKilled, faultUnreachable, faultRunsTwice}
}

// podTraces is what one pod holds on one node, as the host would list it.
type podTraces struct {
	Datasets, VNIC, ZoneConfig, Installed, Running, Address bool
	Containers                                              map[string]string // name → running | exited
	Supervised                                              bool
	reported                                                string // the supervisor's last report
}

func (p *podTraces) empty() bool {
	return !p.Datasets && !p.VNIC && !p.ZoneConfig && !p.Installed && !p.Running && !p.Address && len(p.Containers) == 0
}

// holdsAddress: the zone has the address configured (allowed-address) or
// up; a freed address must not be in use by it.
func (p *podTraces) holdsAddress() bool { return p.ZoneConfig || p.Installed || p.Running || p.Address }

func (p *podTraces) String() string {
	var has []string
	for name, v := range map[string]bool{"dataset": p.Datasets, "vnic": p.VNIC, "zone config": p.ZoneConfig,
		"installed zone": p.Installed, "running zone": p.Running, "address": p.Address} {
		if v {
			has = append(has, name)
		}
	}
	for c, st := range p.Containers {
		has = append(has, "container "+c+" "+st)
	}
	sort.Strings(has)
	return strings.Join(has, ", ")
}

// fakeNodes are the pod's nodes and the control plane's address pool,
// with idempotent creates and removes, so what a run leaves is visible.
type fakeNodes struct {
	mu         sync.Mutex
	plan       *faultPlan
	nodes      map[string]*podTraces
	ipam       map[string]string // address → pod UID
	seq        uint64
	evicted    map[string]bool
	violations []string
	failsAt    string              // podScenario.failsAt
	built      *hostapi.PodSandbox // what the last provision was given
	failed     bool                // the provision failed there once
}

var podNodes = []string{"n1", "n2"}

func newFakeNodes(plan *faultPlan) *fakeNodes {
	f := &fakeNodes{plan: plan, nodes: map[string]*podTraces{}, ipam: map[string]string{}, evicted: map[string]bool{}, seq: supervisedSeq}
	for _, n := range podNodes {
		f.nodes[n] = &podTraces{Containers: map[string]string{}}
	}
	return f
}

func nodeOf(ctx context.Context) string {
	return strings.TrimPrefix(activity.GetInfo(ctx).TaskQueue, taskqueue.Node(""))
}

// hostSteps are the node's effects by activity name; each is idempotent.
func (f *fakeNodes) hostSteps(sb hostapi.PodSandbox) map[string]func(p *podTraces) {
	return map[string]func(p *podTraces){
		"CreateDatasets":   func(p *podTraces) { p.Datasets = true },
		"DestroyDatasets":  func(p *podTraces) { p.Datasets = false },
		"CreateVNIC":       func(p *podTraces) { p.VNIC = true },
		"DeleteVNIC":       func(p *podTraces) { p.VNIC = false },
		"ConfigureZone":    func(p *podTraces) { p.ZoneConfig = true },
		"DeleteZoneConfig": func(p *podTraces) { p.ZoneConfig, p.Supervised = false, false },
		"InstallZone":      func(p *podTraces) { p.Installed = true },
		"UninstallZone":    func(p *podTraces) { p.Installed = false },
		"BootZone":         func(p *podTraces) { p.Running = true },
		"HaltZone":         func(p *podTraces) { p.Running, p.Address, p.Containers = false, false, map[string]string{} },
		"ConfigureNetwork": func(p *podTraces) { p.Address = p.Running },
		"StartContainers": func(p *podTraces) {
			for _, c := range sb.Containers {
				if p.Running {
					p.Containers[c.Name] = model.ContainerRunning
				}
			}
		},
		"WaitContainersOnline": func(*podTraces) {},
		"StopContainers":       func(p *podTraces) { p.Containers = map[string]string{} },
	}
}

// step is a host activity of the fake node.
func (f *fakeNodes) step(name string) func(context.Context, hostapi.PodSandbox) error {
	return func(ctx context.Context, sb hostapi.PodSandbox) error {
		return f.plan.do(ctx, name, func() error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.hostSteps(sb)[name](f.nodes[nodeOf(ctx)])
			return nil
		})
	}
}

// supervise hands the pod to the node's supervisor: its first look is
// reported, whatever it finds.
func (f *fakeNodes) supervise(p *podTraces) uint64 {
	p.Supervised, p.reported = true, ""
	f.seq++
	return f.seq
}

func (f *fakeNodes) provisionPod(ctx context.Context, in hostapi.ProvisionInput) (hostapi.ProvisionResult, error) {
	var subs []string
	for _, st := range hostops.ProvisionSteps {
		subs = append(subs, st.Name)
	}
	hit, sub := f.plan.call(ctx, "ProvisionPod", subs...)
	var answer error
	if hit != nil && sub == "" {
		var happens bool
		if happens, answer = hit.injected(ctx, f.plan.now()); !happens {
			return hostapi.ProvisionResult{}, answer
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.built = &in.Sandbox
	p, steps := f.nodes[nodeOf(ctx)], f.hostSteps(in.Sandbox)
	for i, st := range hostops.ProvisionSteps {
		if f.failsAt == st.Name && !f.failed {
			f.failed = true
			return hostapi.ProvisionResult{}, temporal.NewApplicationErrorWithOptions(st.Name+" failed: the brand's install script exited 1", "Failed",
				temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{hostapi.ProvisionProgress{Begun: i + 1, Step: st.Name}}})
		}
		if hit != nil && sub == st.Name && hit.attempt == 1 {
			switch hit.kind {
			case faultForGood:
				return hostapi.ProvisionResult{}, temporal.NewApplicationErrorWithOptions("injected: "+st.Name+" failed for good", "Failed",
					temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{hostapi.ProvisionProgress{Begun: i + 1, Step: st.Name}}})
			case faultAgentKilled:
				steps[st.Name](p) // killed once the step's command ran
				return hostapi.ProvisionResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_HEARTBEAT, nil)
			}
		}
		steps[st.Name](p)
	}
	seq := f.supervise(p)
	if answer != nil {
		return hostapi.ProvisionResult{}, answer
	}
	return hostapi.ProvisionResult{Seq: seq}, nil
}

func (f *fakeNodes) supervisePod(ctx context.Context, in hostapi.SuperviseInput) (uint64, error) {
	var seq uint64
	err := f.plan.do(ctx, "SupervisePod", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		seq = f.supervise(f.nodes[nodeOf(ctx)])
		return nil
	})
	return seq, err
}

// bootPodAgain runs the boot-again steps and hands the pod over, as the
// node does in one call; its containers start from the sandbox the zone
// was built with, which it refuses to do without.
func (f *fakeNodes) bootPodAgain(ctx context.Context, in hostapi.SuperviseInput) (uint64, error) {
	var seq uint64
	err := f.plan.do(ctx, "BootPodAgain", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.built == nil || !reflect.DeepEqual(in.Sandbox, *f.built) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("boot again with sandbox %+v, built with %+v", in.Sandbox, f.built), "Invalid", nil)
		}
		p, steps := f.nodes[nodeOf(ctx)], f.hostSteps(in.Sandbox)
		for _, st := range []string{"BootZone", "ConfigureNetwork", "StartContainers"} {
			steps[st](p)
		}
		seq = f.supervise(p)
		return nil
	})
	return seq, err
}

func (f *fakeNodes) restartContainer(ctx context.Context, in hostapi.RestartInput) (uint64, error) {
	var seq uint64
	err := f.plan.do(ctx, "RestartContainer", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		p := f.nodes[nodeOf(ctx)]
		if !p.Running {
			return temporal.NewApplicationError("zone not running", "Transient")
		}
		p.Containers[in.Container] = model.ContainerRunning
		p.reported = "" // the supervisor watches the new incarnation afresh
		f.seq++
		seq = f.seq
		return nil
	})
	return seq, err
}

func (f *fakeNodes) shutdownZone(ctx context.Context, in hostapi.ShutdownInput) (bool, error) {
	err := f.plan.do(ctx, "ShutdownZone", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.hostSteps(in.Sandbox)["HaltZone"](f.nodes[nodeOf(ctx)])
		return nil
	})
	return err == nil, err
}

// The control plane's side: scheduling, the address pool.

func (f *fakeNodes) schedulePod(ctx context.Context, _ controlapi.PodRef) (controlapi.ScheduleResult, error) {
	var res controlapi.ScheduleResult
	err := f.plan.do(ctx, "SchedulePod", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, n := range podNodes {
			if !f.evicted[n] {
				res.Node = n
				return nil
			}
		}
		res.Message = "0/2 nodes are available"
		return nil
	})
	return res, err
}

func (f *fakeNodes) allocatePodIP(ctx context.Context, in controlapi.AllocateInput) (controlapi.AllocateResult, error) {
	var res controlapi.AllocateResult
	err := f.plan.do(ctx, "AllocatePodIP", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for a, uid := range f.ipam {
			if uid == in.Pod.UID {
				res = controlapi.AllocateResult{IP: a, PrefixLen: 24, Gateway: "10.88.1.1"}
				return nil
			}
		}
		for i := 2; i < 250; i++ {
			a := fmt.Sprintf("10.88.1.%d", i)
			if _, taken := f.ipam[a]; taken {
				continue
			}
			f.ipam[a] = in.Pod.UID
			res = controlapi.AllocateResult{IP: a, PrefixLen: 24, Gateway: "10.88.1.1"}
			return nil
		}
		res.Exhausted = "no address left"
		return nil
	})
	return res, err
}

// releasePodIP frees the pod's address; freeing it while a zone may still
// hold it would give it to the next pod too.
func (f *fakeNodes) releasePodIP(ctx context.Context, ref controlapi.PodRef) error {
	return f.plan.do(ctx, "ReleasePodIP", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for a, uid := range f.ipam {
			if uid != ref.UID {
				continue
			}
			for _, n := range podNodes {
				if p := f.nodes[n]; p.holdsAddress() {
					f.violations = append(f.violations, fmt.Sprintf("address %s released while node %s still holds it (%s)", a, n, p))
				}
			}
			delete(f.ipam, a)
		}
		return nil
	})
}

func (f *fakeNodes) control(name string) func(context.Context, controlapi.PodRef) error {
	return func(ctx context.Context, _ controlapi.PodRef) error {
		return f.plan.do(ctx, name, func() error { return nil })
	}
}

// report is what the node's supervisor says when what it sees changed
// since it last said something: nil when nothing changed.
func (f *fakeNodes) report(node string) *model.PodReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.nodes[node]
	if !p.Supervised {
		return nil
	}
	rep := model.PodReport{UID: testRef.UID, Node: node}
	switch {
	case p.Running:
		rep.Zone = "running"
	case p.Installed:
		rep.Zone = "installed"
	case p.ZoneConfig:
		rep.Zone = "configured"
	}
	names := make([]string, 0, len(p.Containers))
	for c := range p.Containers {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		cr := model.ContainerReport{Name: c, State: p.Containers[c], Started: true}
		if cr.State == model.ContainerExited {
			code := int32(1)
			cr.ExitCode = &code
		} else {
			cr.Ready = true
		}
		rep.Containers = append(rep.Containers, cr)
	}
	seen := rep.Zone
	for _, c := range rep.Containers {
		seen += " " + c.Name + "=" + c.State
	}
	if seen == p.reported {
		return nil
	}
	p.reported = seen
	f.seq++
	rep.Seq = f.seq
	return &rep
}

// on returns the node the pod runs on, or "".
func (f *fakeNodes) runningOn() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range podNodes {
		if f.nodes[n].Running {
			return n
		}
	}
	return ""
}

// leftovers lists what the pod left on nodes and in the address pool.
func (f *fakeNodes) leftovers(except string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, n := range podNodes {
		if p := f.nodes[n]; n != except && !p.empty() {
			out = append(out, fmt.Sprintf("node %s holds %s", n, p))
		}
	}
	if except == "" {
		for a, uid := range f.ipam {
			out = append(out, fmt.Sprintf("address %s still allocated to %s", a, uid))
		}
	}
	return out
}

// podScenario is one walk through the lifecycle: the pod is created, one
// thing happens to it at two minutes, it settles, and it is deleted.
type podScenario struct {
	name     string
	policy   string
	stepwise bool // provision step by step (runs recorded before versionFastStart)
	// imagePull: the node lacks the image; the pod asks for a pull, whose
	// end wakes it.
	imagePull bool
	// failsAt: the first provision fails for good at this step of the
	// node's, so the run rolls it back.
	failsAt string
	// happen is what befalls the running pod (nil: nothing).
	happen func(f *fakeNodes, h *harness)
	// settled: where the pod must be before it is deleted.
	want string // "Running" or "Failed/<reason>"
}

const (
	faultHappensAt = 2 * time.Minute
	faultSettledBy = 29 * time.Minute
	faultDeleteAt  = 30 * time.Minute
)

var podScenarios = []podScenario{
	{name: "provision and delete", want: model.PodRunning},
	{name: "provision step by step and delete", stepwise: true, want: model.PodRunning},
	{name: "image pulled before provision", imagePull: true, want: model.PodRunning},
	{name: "provision failing at its last step rolled back", failsAt: hostops.ProvisionSteps[len(hostops.ProvisionSteps)-1].Name,
		want: model.PodFailed + "/ProvisionFailed"},
	{name: "container restarted", want: model.PodRunning, happen: func(f *fakeNodes, _ *harness) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.nodes {
			if p.Running {
				p.Containers["app"] = model.ContainerExited
			}
		}
	}},
	{name: "container fails under Never", policy: model.RestartNever, want: model.PodFailed + "/ContainerFailed",
		happen: func(f *fakeNodes, _ *harness) {
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, p := range f.nodes {
				if p.Running {
					p.Containers["app"] = model.ContainerExited
				}
			}
		}},
	{name: "zone halted and booted again", want: model.PodRunning, happen: func(f *fakeNodes, _ *harness) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.nodes {
			if p.Running {
				p.Running, p.Address, p.Containers = false, false, map[string]string{}
			}
		}
	}},
	{name: "evicted by a drain", want: model.PodRunning, happen: func(f *fakeNodes, h *harness) {
		n := f.runningOn()
		f.mu.Lock()
		f.evicted[n] = true
		f.mu.Unlock()
		h.env.SignalWorkflow(podcontract.SignalEvict, podcontract.EvictSignal{Node: n, Reason: "NodeDrained"})
	}},
	{name: "evicted by a drain under OnFailure", policy: model.RestartOnFailure, want: model.PodFailed + "/NodeDrained",
		happen: func(f *fakeNodes, h *harness) {
			n := f.runningOn()
			f.mu.Lock()
			f.evicted[n] = true
			f.mu.Unlock()
			h.env.SignalWorkflow(podcontract.SignalEvict, podcontract.EvictSignal{Node: n, Reason: "NodeDrained"})
		}},
}

// podUndoSteps are the activities that undo: the compensations and the
// teardown, read from the lifecycle's own lists.
func podUndoSteps() []string {
	out := []string{fnShort(host.StopContainers)}
	for _, st := range provisionSteps {
		if st.undo != nil {
			out = append(out, fnShort(st.undo))
		}
	}
	for _, st := range teardownSteps {
		out = append(out, fnShort(st.do))
	}
	return out
}

// fnShort is an activity's name as registered from its method value.
func fnShort(fn any) string {
	name := fnName(fn)
	name = name[strings.LastIndexByte(name, '.')+1:]
	return strings.TrimSuffix(name, "-fm")
}

// failedFor: the reasons a pod may end Failed with when a step fails for
// good: a provision's step fails the provision; a zone that cannot be
// booted again fails the pod.
var failedFor = map[string][]string{
	"ProvisionPod": {"ProvisionFailed"}, "CreateDatasets": {"ProvisionFailed"}, "CreateVNIC": {"ProvisionFailed"},
	"ConfigureZone": {"ProvisionFailed"}, "InstallZone": {"ProvisionFailed"}, "BootZone": {"ProvisionFailed", "ZoneStopped"},
	"ConfigureNetwork": {"ProvisionFailed", "ZoneStopped"}, "StartContainers": {"ProvisionFailed", "ZoneStopped"},
	"WaitContainersOnline": {"ProvisionFailed"}, "BootPodAgain": {"ZoneStopped"},
}

// podRun is one run of a scenario, with a fault or without.
type podRun struct {
	h       *harness
	f       *fakeNodes
	plan    *faultPlan
	settled []string // what was wrong when the pod should have settled
	checked bool     // the settled state was checked
}

func runPodScenario(t *testing.T, sc podScenario, at *stepRef, kind faultKind) *podRun {
	t.Helper()
	spec := podSpec(func(s *model.PodSpec) {
		if sc.policy != "" {
			s.RestartPolicy = sc.policy
		}
	})
	r := &podRun{}
	var h *harness
	r.plan = newFaultPlan(podUndoSteps(), func() time.Time { return h.env.Now() })
	if at != nil {
		r.plan.inject(*at, kind)
	}
	f := newFakeNodes(r.plan)
	f.failsAt = sc.failsAt
	r.f = f
	overrides := []override{
		{fn: ctl.SchedulePod, ret: []any{f.schedulePod}},
		{fn: ctl.AllocatePodIP, ret: []any{f.allocatePodIP}},
		{fn: ctl.ReleasePodIP, ret: []any{f.releasePodIP}},
		{fn: ctl.RemovePod, ret: []any{func(ctx context.Context, ref controlapi.PodRef) error {
			h.calls.add("RemovePod")
			return f.control("RemovePod")(ctx, ref)
		}}},
		{fn: ctl.UnbindPod, ret: []any{func(ctx context.Context, _ controlapi.UnbindInput) error {
			return f.plan.do(ctx, "UnbindPod", func() error { return nil })
		}}},
		{fn: host.ProvisionPod, ret: []any{f.provisionPod}},
		{fn: host.SupervisePod, ret: []any{f.supervisePod}},
		{fn: host.BootPodAgain, ret: []any{f.bootPodAgain}},
		{fn: host.RestartContainer, ret: []any{f.restartContainer}},
		{fn: host.ShutdownZone, ret: []any{f.shutdownZone}},
	}
	if sc.imagePull {
		pulled, requested := false, false
		overrides = append(overrides,
			override{fn: img.ResolvePodImage, ret: []any{func(ctx context.Context, _ controlapi.ImageNodeInput) (controlapi.ResolvedImage, error) {
				var r controlapi.ResolvedImage
				err := f.plan.do(ctx, "ResolvePodImage", func() error {
					f.mu.Lock()
					defer f.mu.Unlock()
					r = controlapi.ResolvedImage{Found: true, Kind: model.ImageZoneTemplate, Present: pulled, Pull: !pulled && !requested}
					return nil
				})
				return r, err
			}}},
			override{fn: img.RequestImagePull, ret: []any{func(ctx context.Context, _ controlapi.ImageNodeInput) error {
				return f.plan.do(ctx, "RequestImagePull", func() error {
					f.mu.Lock()
					requested = true
					f.mu.Unlock()
					// The pull ends a while later and wakes the pods waiting.
					h.env.RegisterDelayedCallback(func() {
						f.mu.Lock()
						pulled = true
						f.mu.Unlock()
						h.env.SignalWorkflow(podcontract.SignalWake, nil)
					}, 3*time.Second)
					return nil
				})
			}}})
	}
	for name := range f.hostSteps(hostapi.PodSandbox{}) {
		overrides = append(overrides, override{fn: hostActivity(name), ret: []any{f.step(name)}})
	}
	h = newHarness(t, spec, overrides...)
	r.h = h
	h.env.SetTestTimeout(20 * time.Second)
	if sc.stepwise {
		h.env.OnGetVersion(versionFastStart, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	}
	// The nodes' supervisors look every 30 seconds and report changes.
	for d := 30 * time.Second; d < faultDeleteAt+5*time.Minute; d += 30 * time.Second {
		h.env.RegisterDelayedCallback(func() {
			for _, n := range podNodes {
				if rep := f.report(n); rep != nil {
					h.env.SignalWorkflow(podcontract.SignalReport, *rep)
				}
			}
		}, d)
	}
	if sc.happen != nil {
		h.env.RegisterDelayedCallback(func() { sc.happen(f, h) }, faultHappensAt)
	}
	allowed := []string{sc.want}
	if at != nil && kind == faultForGood {
		for _, reason := range failedFor[at.Activity] {
			allowed = append(allowed, model.PodFailed+"/"+reason)
		}
		if at.Sub != "" {
			allowed = append(allowed, model.PodFailed+"/ProvisionFailed")
		}
	}
	h.env.RegisterDelayedCallback(func() { r.settled, r.checked = r.checkSettled(allowed), true }, faultSettledBy)
	h.run(faultDeleteAt, podcontract.SignalTerminate, podcontract.TerminateSignal{})
	return r
}

// hostActivity is the host activity's method value by name.
func hostActivity(name string) any {
	return map[string]any{"CreateDatasets": host.CreateDatasets, "DestroyDatasets": host.DestroyDatasets,
		"CreateVNIC": host.CreateVNIC, "DeleteVNIC": host.DeleteVNIC, "ConfigureZone": host.ConfigureZone,
		"DeleteZoneConfig": host.DeleteZoneConfig, "InstallZone": host.InstallZone, "UninstallZone": host.UninstallZone,
		"BootZone": host.BootZone, "HaltZone": host.HaltZone, "ConfigureNetwork": host.ConfigureNetwork,
		"StartContainers": host.StartContainers, "WaitContainersOnline": host.WaitContainersOnline,
		"StopContainers": host.StopContainers}[name]
}

// checkSettled says what is wrong with the pod once it should have
// settled in one of the allowed states.
func (r *podRun) checkSettled(allowed []string) []string {
	h := r.h
	h.mu.Lock()
	phase, reason, ready := "", "", ""
	for _, s := range h.statuses {
		if s.Phase != "" {
			phase, reason = s.Phase, s.Reason
		}
		for _, c := range s.Conditions {
			if c.Type == model.PodReady {
				ready = c.Status
			}
		}
	}
	h.mu.Unlock()
	got := phase
	if phase == model.PodFailed || phase == model.PodSucceeded {
		got += "/" + reason
	}
	var wrong []string
	if !slices.Contains(allowed, got) {
		wrong = append(wrong, fmt.Sprintf("the pod settled as %s (reason %q), want one of %v", phase, reason, allowed))
	}
	if got == model.PodRunning {
		on := r.f.runningOn()
		if ready != model.ConditionTrue {
			wrong = append(wrong, "the pod is Running but not Ready")
		}
		if on == "" {
			wrong = append(wrong, "the pod is Running but no node runs its zone")
		} else {
			r.f.mu.Lock()
			p := r.f.nodes[on]
			if p.Containers["app"] != model.ContainerRunning || !p.Address {
				wrong = append(wrong, fmt.Sprintf("the pod is Running, its node %s holds %s", on, p))
			}
			r.f.mu.Unlock()
		}
		wrong = append(wrong, r.f.leftovers(on)...)
	} else {
		wrong = append(wrong, r.f.leftovers("")...)
	}
	return wrong
}

// problems lists what went wrong in a finished run.
func (r *podRun) problems() []string {
	var out []string
	for _, s := range r.settled {
		out = append(out, "before delete: "+s)
	}
	if !r.checked {
		out = append(out, "the lifecycle ended before it was deleted")
	}
	if !r.h.env.IsWorkflowCompleted() {
		out = append(out, "the lifecycle did not end after the delete")
	} else if err := r.h.env.GetWorkflowError(); err != nil {
		out = append(out, "the lifecycle failed: "+err.Error())
	}
	if !r.h.calls.has("RemovePod") {
		out = append(out, "the pod's row was not removed")
	}
	for _, l := range r.f.leftovers("") {
		out = append(out, "after delete: "+l)
	}
	r.f.mu.Lock()
	out = append(out, r.f.violations...)
	r.f.mu.Unlock()
	return out
}

// judge fails a cell that left problems.
func judge(t *testing.T, problems []string) {
	t.Helper()
	if len(problems) > 0 {
		t.Error(strings.Join(problems, "\n"))
	}
}

func TestFailureAtEveryStepOfThePodLifecycle(t *testing.T) {
	for _, sc := range podScenarios {
		t.Run(sc.name, func(t *testing.T) {
			clean := runPodScenario(t, sc, nil, "")
			if p := clean.problems(); len(p) > 0 {
				t.Fatalf("the run without faults: %s", strings.Join(p, "\n"))
			}
			clean.plan.mu.Lock()
			steps := slices.Clone(clean.plan.steps)
			clean.plan.mu.Unlock()
			for _, at := range steps {
				for _, kind := range kindsFor(at, onNode(at.Activity)) {
					t.Run(at.String()+"/"+string(kind), func(t *testing.T) {
						t.Parallel()
						r := runPodScenario(t, sc, &at, kind)
						judge(t, r.problems())
					})
				}
			}
		})
	}
}

// onNode: the pod's activity runs on its node.
func onNode(name string) bool {
	switch name {
	case "ProvisionPod", "SupervisePod", "BootPodAgain", "RestartContainer", "ShutdownZone":
		return true
	}
	return hostActivity(name) != nil
}

// The injected ScheduleToStart timeout reaches the workflow as the server's
// does: an ActivityError wrapping a TimeoutError of that type, after one
// attempt whatever the retry policy.
func TestInjectedScheduleToStartTimeoutHasTheServersShape(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestWorkflowEnvironment()
	attempts := 0
	env.RegisterActivityWithOptions(func(ctx context.Context) error {
		attempts++
		_, err := faultyCall{kind: faultUnreachable, attempt: activity.GetInfo(ctx).Attempt}.injected(ctx, time.Time{})
		return err
	}, activity.RegisterOptions{Name: "Unreachable"})
	var got error
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		got = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, undoOptions("n1", time.Minute)), "Unreachable").Get(ctx, nil)
		return nil
	})
	var actErr *temporal.ActivityError
	var timeoutErr *temporal.TimeoutError
	if !errors.As(got, &actErr) || !errors.As(got, &timeoutErr) || timeoutErr.TimeoutType() != enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
		t.Fatalf("the workflow saw %v (%T); want an ActivityError wrapping a ScheduleToStart TimeoutError", got, got)
	}
	if attempts != 1 {
		t.Fatalf("%d attempts; a ScheduleToStart timeout is never retried", attempts)
	}
}
