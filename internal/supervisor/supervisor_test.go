package supervisor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// Unit tests of the supervisor's logic over a scripted host; the
// end-to-end tests run it in the agent against the simulator.

type fakeHost struct {
	mu        sync.Mutex
	zones     map[string]string
	zoneLists int
	svcs      map[string]map[string]ServiceState
	// unbound zones are running zones svcs -Z cannot bind to (skipped).
	unbound   map[string]bool
	exits     map[string]int32
	exitReads int
	svcsLists int
	probeCode int
	probes    int
}

func (f *fakeHost) Zones(context.Context) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.zoneLists++
	out := map[string]string{}
	for k, v := range f.zones {
		out[k] = v
	}
	return out, nil
}

func (f *fakeHost) Services(context.Context) (map[string]map[string]ServiceState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.svcsLists++
	out := map[string]map[string]ServiceState{}
	for z, m := range f.svcs {
		if f.zones[z] != "running" || len(m) == 0 || f.unbound[z] {
			continue // svcs -Z visits running zones alone, those it can bind to
		}
		out[z] = map[string]ServiceState{}
		for k, v := range m {
			out[z][k] = v
		}
	}
	return out, nil
}

func (f *fakeHost) ExitCode(_ context.Context, zone, container string) (int32, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exitReads++
	c, ok := f.exits[zone+"/"+container]
	return c, ok, nil
}

func (f *fakeHost) Exec(context.Context, string, string, []string) (int, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probes++
	return f.probeCode, "", nil
}

func (f *fakeHost) set(fn func(f *fakeHost)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

type recorder struct {
	mu      sync.Mutex
	reports []model.PodReport
	fail    int // fail that many deliveries first
	tries   int
	tried   []uint64 // every delivery's Seq, failed ones too
}

func (r *recorder) Report(_ context.Context, _, _ string, rep model.PodReport) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries++
	r.tried = append(r.tried, rep.Seq)
	if r.fail > 0 {
		r.fail--
		return errors.New("frontend unavailable")
	}
	r.reports = append(r.reports, rep)
	return nil
}

func (r *recorder) wait(t *testing.T, what string, ok func(last model.PodReport, n int) bool) model.PodReport {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		n := len(r.reports)
		var last model.PodReport
		if n > 0 {
			last = r.reports[n-1]
		}
		r.mu.Unlock()
		if n > 0 && ok(last, n) {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Fatalf("timed out waiting for %s; reports: %+v", what, r.reports)
	return model.PodReport{}
}

func start(t *testing.T, h *fakeHost, r *recorder) *Supervisor {
	s := New(Config{Node: "n1", Host: h, Reporter: r, ObserveEvery: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.Run(ctx)
	return s
}

const fmri = "svc:/zonewright/container/app:default"

func onlineHost() *fakeHost {
	return &fakeHost{zones: map[string]string{"z1": "running"},
		svcs: map[string]map[string]ServiceState{"z1": {fmri: {State: "online"}}}, exits: map[string]int32{}}
}

func appPod(probes ...func(*Container)) Pod {
	c := Container{Name: "app", FMRI: fmri}
	for _, p := range probes {
		p(&c)
	}
	return Pod{Namespace: "default", Name: "web", UID: "u1", Zone: "z1", IP: "127.0.0.1", Containers: []Container{c}}
}

func TestReadinessTransitionsAreReportedOnlyWhenTheyHappen(t *testing.T) {
	h, r := onlineHost(), &recorder{}
	s := start(t, h, r)
	s.Watch(appPod(func(c *Container) {
		c.Readiness = &model.Probe{Exec: &model.ExecAction{Command: []string{"check"}}, PeriodSeconds: 1, SuccessThreshold: 1, FailureThreshold: 2}
	}), nil)
	first := r.wait(t, "a first report", func(model.PodReport, int) bool { return true })
	if first.Zone != "running" || first.UID != "u1" || first.Node != "n1" {
		t.Fatalf("first report %+v", first)
	}
	ready := r.wait(t, "Ready", func(l model.PodReport, _ int) bool { return l.Containers[0].Ready })
	h.set(func(f *fakeHost) { f.probeCode = 1 })
	notReady := r.wait(t, "not Ready after two failures", func(l model.PodReport, _ int) bool { return !l.Containers[0].Ready })
	if notReady.Seq <= ready.Seq {
		t.Fatalf("report numbers did not grow: %d then %d", ready.Seq, notReady.Seq)
	}
	r.mu.Lock()
	n := len(r.reports)
	r.mu.Unlock()
	time.Sleep(2500 * time.Millisecond) // more probes, more observations, nothing new
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reports) != n {
		t.Fatalf("unchanged state was reported again: %+v", r.reports[n:])
	}
	if n > 4 {
		t.Fatalf("%d reports for 2 transitions", n)
	}
}

// runThenExit watches the app pod until it runs, then ends its command
// with code: its service in maintenance, the code recorded. It returns
// the exit's report.
func runThenExit(t *testing.T, code int32) (*fakeHost, *recorder, *Supervisor, model.PodReport) {
	t.Helper()
	h, r := onlineHost(), &recorder{}
	s := start(t, h, r)
	s.Watch(appPod(), nil)
	r.wait(t, "running", func(l model.PodReport, _ int) bool { return l.Containers[0].State == model.ContainerRunning })
	h.set(func(f *fakeHost) {
		f.svcs["z1"][fmri] = ServiceState{State: "maintenance"}
		f.exits["z1/app"] = code
	})
	ex := r.wait(t, "exited", func(l model.PodReport, _ int) bool { return l.Containers[0].State == model.ContainerExited })
	return h, r, s, ex
}

func TestAnExitIsReportedWithItsCodeAndARestartStartsOver(t *testing.T) {
	h, r, s, ex := runThenExit(t, 3)
	if c := ex.Containers[0]; c.ExitCode == nil || *c.ExitCode != 3 || c.Ready {
		t.Fatalf("exit reported as %+v", c)
	}
	time.Sleep(300 * time.Millisecond)
	h.mu.Lock()
	reads := h.exitReads
	h.mu.Unlock()
	if reads != 1 {
		t.Fatalf("the exit status was read %d times; once is enough", reads)
	}
	seq := s.Restarted("u1", "app")
	if seq <= ex.Seq {
		t.Fatalf("restart's Seq %d not above the exit report's %d", seq, ex.Seq)
	}
	h.set(func(f *fakeHost) { f.svcs["z1"][fmri] = ServiceState{State: "online"} })
	back := r.wait(t, "running again", func(l model.PodReport, _ int) bool {
		return l.Seq > seq && l.Containers[0].State == model.ContainerRunning
	})
	if back.Containers[0].ExitCode != nil {
		t.Fatalf("the new incarnation carries the old exit: %+v", back.Containers[0])
	}
}

func TestLivenessFailureIsReportedOnceItCrossesItsThreshold(t *testing.T) {
	h, r := onlineHost(), &recorder{}
	h.probeCode = 1
	s := start(t, h, r)
	s.Watch(appPod(func(c *Container) {
		c.Liveness = &model.Probe{Exec: &model.ExecAction{Command: []string{"check"}}, PeriodSeconds: 1, FailureThreshold: 2}
	}), nil)
	got := r.wait(t, "unhealthy", func(l model.PodReport, _ int) bool { return l.Containers[0].Unhealthy != "" })
	h.mu.Lock()
	probes := h.probes
	h.mu.Unlock()
	if probes < 2 {
		t.Fatalf("unhealthy after %d probe(s); the threshold is 2: %+v", probes, got)
	}
}

func TestAStartupProbeGatesTheOthers(t *testing.T) {
	h, r := onlineHost(), &recorder{}
	h.probeCode = 1
	s := start(t, h, r)
	s.Watch(appPod(func(c *Container) {
		c.Startup = &model.Probe{Exec: &model.ExecAction{Command: []string{"started"}}, PeriodSeconds: 1, FailureThreshold: 100}
		c.Readiness = &model.Probe{Exec: &model.ExecAction{Command: []string{"ready"}}, PeriodSeconds: 1}
	}), nil)
	time.Sleep(1500 * time.Millisecond)
	h.mu.Lock()
	before := h.probes
	h.mu.Unlock()
	last := r.wait(t, "a report", func(model.PodReport, int) bool { return true })
	if last.Containers[0].Started || last.Containers[0].Ready {
		t.Fatalf("started or ready before the startup probe passed: %+v", last.Containers[0])
	}
	if before > 2 {
		t.Fatalf("%d probes ran while only the startup probe may", before)
	}
	h.set(func(f *fakeHost) { f.probeCode = 0 })
	r.wait(t, "started and ready", func(l model.PodReport, _ int) bool { return l.Containers[0].Started && l.Containers[0].Ready })
}

func TestAWatchAfterAnAgentRestartKeepsTheReadyState(t *testing.T) {
	h, r := onlineHost(), &recorder{}
	h.probeCode = 0
	s := start(t, h, r)
	s.Watch(appPod(func(c *Container) {
		c.Readiness = &model.Probe{Exec: &model.ExecAction{Command: []string{"ready"}}, PeriodSeconds: 1, InitialDelaySeconds: 30}
	}), map[string]Initial{"app": {Started: true, Ready: true}})
	first := r.wait(t, "a report", func(model.PodReport, int) bool { return true })
	if !first.Containers[0].Ready {
		t.Fatalf("a Ready pod watched again reported not Ready: %+v", first.Containers[0])
	}
}

func TestUndeliveredReportsAreRetriedUnderTheirNumber(t *testing.T) {
	h, r := onlineHost(), &recorder{fail: 2}
	s := start(t, h, r)
	s.Watch(appPod(), nil)
	r.wait(t, "the report after two failed deliveries", func(model.PodReport, int) bool { return true })
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tries != 3 {
		t.Fatalf("%d tries; want 3", r.tries)
	}
	// A failed delivery may have reached the lifecycle: its retry must be
	// recognisable as the same report.
	if r.tried[0] != r.tried[1] || r.tried[1] != r.tried[2] {
		t.Fatalf("a retried report was renumbered: %v", r.tried)
	}
}

// A report not delivered before its container restarted describes the
// earlier incarnation: even when the new one looks the same, it goes out
// under a number above the restart's, or the lifecycle would ignore it.
func TestARetryAfterARestartIsNumberedAboveIt(t *testing.T) {
	h, r := onlineHost(), &recorder{fail: 1}
	s := start(t, h, r)
	s.Watch(appPod(), nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		tries := r.tries
		r.mu.Unlock()
		if tries > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery was tried")
		}
		time.Sleep(10 * time.Millisecond)
	}
	fence := s.Restarted("u1", "app")
	got := r.wait(t, "the report after the failed one", func(model.PodReport, int) bool { return true })
	if got.Seq <= fence {
		t.Fatalf("delivered under %d, not above the restart's %d: the lifecycle would ignore it", got.Seq, fence)
	}
}

// slowReporter holds every delivery for pod "slow" until released (or
// its deadline), and takes the others at once.
type slowReporter struct {
	recorder
	release  chan struct{}
	held     chan struct{} // closed when the first slow delivery began
	heldOnce sync.Once
	mu       sync.Mutex
	busy     map[string]int // deliveries under way, by pod
	overlap  bool           // two deliveries of one pod were under way at once
}

func (r *slowReporter) Report(ctx context.Context, ns, name string, rep model.PodReport) error {
	r.mu.Lock()
	r.busy[name]++
	r.overlap = r.overlap || r.busy[name] > 1
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.busy[name]--
		r.mu.Unlock()
	}()
	if name == "slow" {
		r.heldOnce.Do(func() { close(r.held) })
		select {
		case <-r.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r.recorder.Report(ctx, ns, name, rep)
}

func TestASlowReportDoesNotHoldUpTheOtherPods(t *testing.T) {
	h := &fakeHost{zones: map[string]string{"z1": "running", "z2": "running"},
		svcs: map[string]map[string]ServiceState{"z1": {fmri: {State: "online"}}, "z2": {fmri: {State: "online"}}}}
	r := &slowReporter{release: make(chan struct{}), held: make(chan struct{}), busy: map[string]int{}}
	t.Cleanup(func() { close(r.release) })
	s := New(Config{Node: "n1", Host: h, Reporter: r, ObserveEvery: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go s.Run(ctx)

	slow := appPod()
	slow.Name, slow.UID = "slow", "u-slow"
	s.Watch(slow, nil)
	<-r.held
	// While the slow pod's report hangs, its state changes: that report
	// waits for the first, and the other pod's goes at once.
	h.set(func(f *fakeHost) { f.svcs["z1"][fmri] = ServiceState{State: "maintenance"} })
	fast := appPod()
	fast.Name, fast.UID, fast.Zone = "fast", "u-fast", "z2"
	began := time.Now()
	s.Watch(fast, nil)
	got := r.wait(t, "the other pod's report", func(l model.PodReport, _ int) bool { return l.UID == "u-fast" })
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("the other pod's report took %s behind the slow one", took)
	}
	if got.Containers[0].State != model.ContainerRunning {
		t.Fatalf("the other pod reported %+v", got)
	}
	time.Sleep(300 * time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.overlap {
		t.Fatal("two reports of one pod were delivered at once: their order is lost")
	}
}

func TestAPodForgottenIsNoLongerReported(t *testing.T) {
	h, r := onlineHost(), &recorder{}
	s := start(t, h, r)
	s.Watch(appPod(), nil)
	r.wait(t, "a report", func(model.PodReport, int) bool { return true })
	s.Forget("u1")
	r.mu.Lock()
	n := len(r.reports)
	r.mu.Unlock()
	h.set(func(f *fakeHost) { f.zones["z1"] = "installed" })
	time.Sleep(300 * time.Millisecond)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reports) != n || len(s.Watched()) != 0 {
		t.Fatalf("a forgotten pod was reported: %+v", r.reports[n:])
	}
}

func TestAContainerWithoutReadinessProbeIsReadyWhileItRuns(t *testing.T) {
	h, r := onlineHost(), &recorder{}
	s := start(t, h, r)
	s.Watch(appPod(), nil)
	r.wait(t, "Ready", func(l model.PodReport, _ int) bool { return l.Containers[0].Ready })
	h.set(func(f *fakeHost) { f.zones["z1"] = "installed" })
	got := r.wait(t, "not Ready once the zone stopped", func(l model.PodReport, _ int) bool { return !l.Containers[0].Ready })
	if got.Zone != "installed" {
		t.Fatalf("zone reported %q", got.Zone)
	}
}

// The zones are listed (zoneadm list) only for a pod whose zone has no
// services in svcs -Z, and ObservedZones is that listing.
func TestObservedZonesAreTheLastListing(t *testing.T) {
	host := &fakeHost{zones: map[string]string{"global": "running", "z1": "installed"}}
	s := New(Config{Node: "n1", Host: host, Reporter: &recorder{}})
	s.observe(t.Context())
	if zones, _ := s.ObservedZones(); zones != nil || host.zoneLists != 0 {
		t.Fatalf("with no pod, zones listed %d times: %v", host.zoneLists, zones)
	}
	s.Watch(appPod(), nil)
	before := time.Now()
	s.observe(t.Context())
	zones, at := s.ObservedZones()
	if len(zones) != 2 || zones["z1"] != "installed" || at.Before(before) {
		t.Errorf("observed %v at %s, want z1 installed, observed after %s", zones, at, before)
	}
	host.set(func(f *fakeHost) { f.zones["z1"] = "halted" })
	zones["z1"] = "changed by the caller"
	s.observe(t.Context())
	if zones, _ := s.ObservedZones(); zones["z1"] != "halted" {
		t.Errorf("after the zone changed, observed %v", zones)
	}
}

// A node without pods lists nothing: there is no pod to observe, and
// each svcs -Z is a process every 2 s on every idle node. Drop the check
// at the top of observe to see it list.
func TestANodeWithoutPodsListsNothing(t *testing.T) {
	h := onlineHost()
	s := New(Config{Node: "n1", Host: h, Reporter: &recorder{}})
	for range 3 {
		s.observe(t.Context())
	}
	if h.svcsLists+h.zoneLists != 0 {
		t.Fatalf("with no pod, services listed %d times and zones %d", h.svcsLists, h.zoneLists)
	}
	s.Watch(appPod(), nil)
	s.observe(t.Context())
	if got := reportOf(s, "u1"); h.svcsLists != 1 || got.Containers[0].State != model.ContainerRunning {
		t.Fatalf("with a pod, services listed %d times, pod reported %+v", h.svcsLists, got)
	}
	s.Forget("u1")
	s.observe(t.Context())
	if h.svcsLists != 1 {
		t.Fatalf("after its pod was forgotten, services listed %d times, want 1", h.svcsLists)
	}
}

// reportOf is what the supervisor would report of a pod now.
func reportOf(s *Supervisor, uid string) model.PodReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pods[uid].report(s.cfg.Node)
}

// A node whose pods all run lists their services alone at each
// observation, not the zones too: a zone in svcs -Z is running. Once a
// zone stops (its services gone from svcs -Z) the zones are listed again
// and its pod reports the zone's state.
func TestANodeWhosePodsRunListsNoZones(t *testing.T) {
	h, r := onlineHost(), &recorder{}
	s := New(Config{Node: "n1", Host: h, Reporter: r})
	s.Watch(appPod(), nil)
	for range 5 {
		s.observe(t.Context())
	}
	if got := reportOf(s, "u1"); h.zoneLists != 0 || got.Zone != "running" || got.Containers[0].State != model.ContainerRunning {
		t.Fatalf("zones listed %d times in 5 observations; pod reported %+v", h.zoneLists, got)
	}
	h.set(func(f *fakeHost) { f.zones["z1"] = "installed" })
	s.observe(t.Context())
	if got := reportOf(s, "u1"); h.zoneLists != 1 || got.Zone != "installed" || got.Containers[0].State != model.ContainerMissing {
		t.Fatalf("zones listed %d times after the zone stopped; pod reported %+v", h.zoneLists, got)
	}
}

// svcs -Z skips a running zone whose repository does not answer (svcs.c
// warns and goes on), and one that came up after it looked: zoneadm then
// lists the zone running, and its containers, absent from the listing,
// are not thereby missing, which would restart them. Seen at 2,000 pods
// on a saturated machine: healthy containers reported missing for one
// observation. Remove the listed check in observe to see it fail.
func TestAZoneSvcsSkippedKeepsItsContainers(t *testing.T) {
	h, r := onlineHost(), &recorder{}
	s := New(Config{Node: "n1", Host: h, Reporter: r})
	s.Watch(appPod(), nil)
	s.observe(t.Context())
	h.set(func(f *fakeHost) { f.unbound = map[string]bool{"z1": true} })
	s.observe(t.Context())
	if got := reportOf(s, "u1"); h.zoneLists != 1 || got.Zone != "running" || got.Containers[0].State != model.ContainerRunning {
		t.Fatalf("zones listed %d times; with its zone skipped by svcs the pod reported %+v", h.zoneLists, got)
	}
}

// A restarted container whose service still shows the ended
// incarnation's maintenance (SMF has not acted on the clear yet), its
// exit record removed by the restart, is starting: neither exited nor in
// maintenance. Only past exitRecordGrace would a record still missing
// mean an end that left none. Make the grace zero to see it fail.
func TestARestartNotYetTakenIsNotAnEnd(t *testing.T) {
	h, r, s, _ := runThenExit(t, 1)
	h.set(func(f *fakeHost) { delete(f.exits, "z1/app") }) // the restart's ForgetExit
	seq := s.Restarted("u1", "app")
	time.Sleep(time.Second) // observations every 50ms, the service still in maintenance
	r.mu.Lock()
	for _, rep := range r.reports {
		if c := rep.Containers[0]; rep.Seq > seq && (c.State == model.ContainerExited || c.State == model.ContainerMaintenance) {
			t.Errorf("the restarted container reported %s before SMF took the restart: %+v", c.State, c)
		}
	}
	r.mu.Unlock()
	h.set(func(f *fakeHost) { f.svcs["z1"][fmri] = ServiceState{State: "online"} })
	r.wait(t, "running again", func(l model.PodReport, _ int) bool {
		return l.Seq > seq && l.Containers[0].State == model.ContainerRunning
	})
}

// A readiness probe runs as soon as its container runs, not a period
// after the pod was handed over (a zone booted again would otherwise stay
// unready for a whole period), as the kubelet triggers it.
func TestAReadinessProbeRunsOnceTheContainerRuns(t *testing.T) {
	h, r := onlineHost(), &recorder{}
	s := start(t, h, r)
	s.Watch(appPod(func(c *Container) {
		c.Readiness = &model.Probe{Exec: &model.ExecAction{Command: []string{"check"}}, PeriodSeconds: 3600}
	}), nil)
	r.wait(t, "Ready well inside the probe's period", func(l model.PodReport, _ int) bool { return l.Containers[0].Ready })
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.probes != 1 {
		t.Fatalf("%d probes ran; want 1 until the period ends", h.probes)
	}
}
