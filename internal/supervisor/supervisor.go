// Package supervisor watches the pods of one node from the node itself:
// every probe on its own timer, the zones and their container services
// observed in one batch per interval, exit codes read once per exit. It
// keeps the results locally and reports a pod only when what it sees
// changed, retrying until the report is accepted. A healthy pod costs the
// control plane nothing.
//
// Decisions (restarts, back-off, restartPolicy) are not made here: the
// pod's lifecycle makes them from the reports.
package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

// DefaultObserveEvery is how often zones and services are listed.
const DefaultObserveEvery = 2 * time.Second

// DefaultConcurrentReports is how many reports are delivered at once, each
// pod's in order: one slow delivery does not hold up the other pods'.
const DefaultConcurrentReports = 8

// reportTimeout bounds one delivery; it is retried after.
const reportTimeout = 10 * time.Second

// Pod is one pod the node runs, as the supervisor needs it.
type Pod struct {
	Namespace, Name, UID string
	Zone                 string
	IP                   string
	Containers           []Container
}

// Container is one container: its SMF instance, its probes and the ports
// their port names refer to.
type Container struct {
	Name string
	FMRI string
	// User is the zone's user the container runs as, and its exec
	// probes with it; empty: the zone's root.
	User      string
	Ports     []model.ContainerPort
	Startup   *model.Probe
	Liveness  *model.Probe
	Readiness *model.Probe
}

// Initial is what is already known of a container when a pod is watched
// again after an agent restart (from the control plane), so a Ready pod
// stays Ready while its probes start over.
type Initial struct {
	Started, Ready bool
}

// ServiceState is one SMF instance's state in a zone.
type ServiceState struct {
	State         string
	Transitioning bool
}

// Host is what the supervisor observes the node through.
type Host interface {
	Execer
	// Zones maps every zone to its state (zoneadm list -cp).
	Zones(ctx context.Context) (map[string]string, error)
	// Services maps zone → FMRI → state for every running zone (svcs -Z).
	Services(ctx context.Context) (map[string]map[string]ServiceState, error)
	// ExitCode reads the exit status a container's command left in the
	// zone; false when it left none.
	ExitCode(ctx context.Context, zone, container string) (int32, bool, error)
}

// ErrGone: the pod's lifecycle no longer exists; stop reporting it.
var ErrGone = errors.New("the pod's lifecycle is gone")

// Reporter delivers a report to the pod's lifecycle.
type Reporter interface {
	Report(ctx context.Context, namespace, name string, r model.PodReport) error
}

// Config wires a supervisor.
type Config struct {
	Node         string
	Host         Host
	Reporter     Reporter
	ObserveEvery time.Duration // default DefaultObserveEvery
	// Sequence numbers the reports; nil: ClockSequence, which does not
	// survive a restart after the clock stepped back.
	Sequence *Sequence
	// ConcurrentReports: default DefaultConcurrentReports.
	ConcurrentReports int
	Log               *slog.Logger
}

// Supervisor watches the node's pods. Its methods are safe for concurrent use.
type Supervisor struct {
	cfg  Config
	log  *slog.Logger
	wake chan struct{}
	// base outlives the calls that start watches; Run's end cancels it.
	base    context.Context
	stopAll context.CancelFunc

	mu   sync.Mutex
	pods map[string]*pod // by UID
	// zones is every zone's state as the last listing of them found it,
	// at zonesAt: others on the node read it instead of listing again.
	zones   map[string]string
	zonesAt time.Time
}

// New returns a supervisor; Run starts it.
func New(cfg Config) *Supervisor {
	if cfg.ObserveEvery <= 0 {
		cfg.ObserveEvery = DefaultObserveEvery
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Sequence == nil {
		cfg.Sequence = ClockSequence(time.Now())
	}
	if cfg.ConcurrentReports <= 0 {
		cfg.ConcurrentReports = DefaultConcurrentReports
	}
	base, stop := context.WithCancel(context.Background())
	return &Supervisor{cfg: cfg, log: cfg.Log.With("component", "supervisor"), wake: make(chan struct{}, 1),
		base: base, stopAll: stop, pods: map[string]*pod{}}
}

type pod struct {
	spec       Pod
	zone       string
	seen       bool // observed at least once
	containers []*container
	ctx        context.Context // the probe workers' parent
	stop       context.CancelFunc

	sent *model.PodReport // the last report accepted, Seq cleared
	// unsent is the report last tried and not accepted, with its number:
	// while the pod's state is the same it is retried under that number,
	// unless that number is not above fence (the number Watch or
	// Restarted last returned: the lifecycle ignores reports at or below
	// it as describing an earlier incarnation).
	unsent   *model.PodReport
	fence    uint64
	sending  bool // a delivery is under way: the next waits for it
	retryAt  time.Time
	failures int
}

type container struct {
	spec      Container
	state     string
	exitCode  *int32
	started   bool
	ready     bool
	unhealthy string
	// noExitRecord: this incarnation is in maintenance with no exit status
	// recorded (looked for until exitRecordGrace after since); it is not
	// looked for again until the container restarts.
	noExitRecord bool
	// since: observations begun before it belong to an earlier
	// incarnation and are ignored.
	since time.Time
	stop  context.CancelFunc
}

// next is the next report number.
func (s *Supervisor) next() uint64 {
	n, err := s.cfg.Sequence.Next()
	if err != nil {
		s.log.Warn("report number not kept; an agent restart may number reports below it", "err", err)
	}
	return n
}

// ObservedZones is every zone's state (name → state) as the last
// observation found it, and when it began; nil before the first. The map
// is the caller's.
func (s *Supervisor) ObservedZones() (map[string]string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.zones == nil {
		return nil, time.Time{}
	}
	return maps.Clone(s.zones), s.zonesAt
}

func (s *Supervisor) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Watch starts supervising p (replacing an earlier watch of the same UID)
// and returns the Seq from which reports describe it. initial, by
// container name, seeds what an agent restart would otherwise forget.
func (s *Supervisor) Watch(p Pod, initial map[string]Initial) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.pods[p.UID]; old != nil {
		old.stop()
	}
	pctx, stop := context.WithCancel(s.base)
	ps := &pod{spec: p, ctx: pctx, stop: stop}
	now := time.Now()
	for _, c := range p.Containers {
		in, known := initial[c.Name]
		cs := &container{spec: c, state: model.ContainerStarting, since: now,
			started: c.Startup == nil || (known && in.Started), ready: c.Readiness == nil || (known && in.Ready)}
		ps.containers = append(ps.containers, cs)
		s.startProbes(ps, cs)
	}
	s.pods[p.UID] = ps
	s.poke()
	ps.fence = s.next()
	return ps.fence
}

// Forget stops supervising a pod (it is being stopped or has left).
func (s *Supervisor) Forget(uid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pods[uid]; p != nil {
		p.stop()
		delete(s.pods, uid)
	}
}

// Restarted starts a container's observation and probes over: the
// lifecycle restarted it. It returns the Seq from which reports describe
// the new incarnation; 0 when the pod is not watched.
func (s *Supervisor) Restarted(uid, name string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pods[uid]
	if p == nil {
		return 0
	}
	for _, c := range p.containers {
		if c.spec.Name != name {
			continue
		}
		c.stop()
		c.state, c.exitCode, c.unhealthy, c.ready = model.ContainerStarting, nil, "", c.spec.Readiness == nil
		c.noExitRecord = false
		c.started = c.spec.Startup == nil
		c.since = time.Now()
		s.startProbes(p, c)
	}
	s.poke()
	p.fence = s.next()
	return p.fence
}

// Watched lists the UIDs supervised now.
func (s *Supervisor) Watched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.pods))
	for uid := range s.pods {
		out = append(out, uid)
	}
	return out
}

// Run observes and reports until ctx ends.
func (s *Supervisor) Run(ctx context.Context) {
	defer s.stopAll()
	go s.deliver(ctx)
	t := time.NewTicker(s.cfg.ObserveEvery)
	defer t.Stop()
	for {
		s.observe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// observe lists the services of every running zone once for the whole
// node (svcs -Z) and updates every pod from the listing. Only svcs -Z's
// running zones are visited, so a pod whose zone is in it runs in a
// running zone; the zones are listed (zoneadm list) only when some pod's
// zone is not: a node whose pods all run pays one listing an observation,
// not two (the heartbeat lists its zones itself), and a node without pods
// lists nothing.
func (s *Supervisor) observe(ctx context.Context) {
	s.mu.Lock()
	idle := len(s.pods) == 0
	s.mu.Unlock()
	if idle {
		return
	}
	began := time.Now()
	svcs, err := s.cfg.Host.Services(ctx)
	if err != nil {
		s.log.Warn("list the zones' services", "err", err)
		return
	}
	var zones map[string]string
	if s.zoneNotListed(svcs) {
		if zones, err = s.cfg.Host.Zones(ctx); err != nil {
			s.log.Warn("list zones", "err", err)
			return
		}
		s.mu.Lock()
		s.zones, s.zonesAt = zones, began
		s.mu.Unlock()
	}
	type exitRead struct {
		p *pod
		c *container
	}
	var exits []exitRead
	s.mu.Lock()
	for _, p := range s.pods {
		p.seen = true
		_, listed := svcs[p.spec.Zone]
		if listed {
			p.zone = zoneRunning
		} else {
			p.zone = zones[p.spec.Zone]
		}
		for _, c := range p.containers {
			if began.Before(c.since) {
				continue // listed before this incarnation began
			}
			if p.zone == zoneRunning && !listed {
				// svcs -Z skipped a running zone (its repository did not
				// answer, or it came up after svcs looked): its
				// containers are not known to be gone.
				continue
			}
			st, ok := svcs[p.spec.Zone][c.spec.FMRI]
			state := containerState(p.zone, st, ok)
			switch {
			case state == model.ContainerMaintenance && c.state != model.ContainerExited && !c.noExitRecord:
				// Exited or in maintenance for another reason: its exit
				// record says which, so the state waits for the read.
				exits = append(exits, exitRead{p, c})
			case state != model.ContainerMaintenance || c.state != model.ContainerExited:
				c.state = state
			}
			if state != model.ContainerRunning && c.spec.Readiness != nil {
				c.ready = false // probed again from scratch once it runs
			}
		}
	}
	s.mu.Unlock()
	for _, e := range exits {
		code, ok, err := s.cfg.Host.ExitCode(ctx, e.p.spec.Zone, e.c.spec.Name)
		if err != nil {
			s.log.Warn("read a container's exit status", "zone", e.p.spec.Zone, "container", e.c.spec.Name, "err", err)
			continue
		}
		s.mu.Lock()
		if !began.Before(e.c.since) && e.c.state != model.ContainerExited && !e.c.noExitRecord {
			switch {
			case ok:
				e.c.state, e.c.exitCode = model.ContainerExited, &code
			case began.Sub(e.c.since) >= exitRecordGrace:
				e.c.state, e.c.noExitRecord = model.ContainerMaintenance, true
			}
			// Else looked for again: a restarted container's service may
			// still show the earlier incarnation's maintenance (SMF acts
			// on the clear asynchronously), whose record the restart
			// removed.
		}
		s.mu.Unlock()
	}
	s.poke()
}

// zoneRunning is the state zoneadm lists a running zone in.
const zoneRunning = "running"

// zoneNotListed reports whether a supervised pod's zone has no services
// in svcs: its state needs a listing of the zones.
func (s *Supervisor) zoneNotListed(svcs map[string]map[string]ServiceState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pods {
		if _, ok := svcs[p.spec.Zone]; !ok {
			return true
		}
	}
	return false
}

// exitRecordGrace is how long after an incarnation began a service in
// maintenance with no exit record is taken for the earlier incarnation's
// (a restart's clear not acted on yet) rather than an end that left no
// record (the wrapper killed).
const exitRecordGrace = 5 * time.Second

// containerState maps a zone and SMF state to what a container is.
func containerState(zone string, st ServiceState, found bool) string {
	switch {
	case zone != zoneRunning || !found:
		return model.ContainerMissing
	case st.State == "online" && !st.Transitioning:
		return model.ContainerRunning
	case st.State == "maintenance":
		return model.ContainerMaintenance
	case st.State == "disabled":
		return model.ContainerMissing
	}
	return model.ContainerStarting
}

// report renders what is known of p now (Seq left zero). Callers hold s.mu.
func (p *pod) report(node string) model.PodReport {
	r := model.PodReport{UID: p.spec.UID, Node: node, Zone: p.zone}
	for _, c := range p.containers {
		cr := model.ContainerReport{Name: c.spec.Name, State: c.state, ExitCode: c.exitCode, Started: c.started,
			Ready: c.ready && c.started && c.state == model.ContainerRunning, Unhealthy: c.unhealthy}
		r.Containers = append(r.Containers, cr)
	}
	return r
}

// deliver sends each pod's report when it changed, retrying with back-off
// until accepted; only the latest state is ever sent. Pods are delivered
// concurrently (at most ConcurrentReports at once), each pod's reports one
// at a time, in order.
func (s *Supervisor) deliver(ctx context.Context) {
	var inflight sync.WaitGroup
	defer inflight.Wait()
	slots := make(chan struct{}, s.cfg.ConcurrentReports)
	for {
		wait := s.deliverOnce(ctx, slots, &inflight)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// deliverOnce starts the delivery of every changed report that is due
// and says how long until a failed one is due again.
func (s *Supervisor) deliverOnce(ctx context.Context, slots chan struct{}, inflight *sync.WaitGroup) time.Duration {
	now := time.Now()
	next := time.Minute
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pods {
		if !p.seen || p.sending {
			continue
		}
		r := p.report(s.cfg.Node)
		if p.unsent != nil && p.unsent.Seq > p.fence && sameState(*p.unsent, r) {
			r.Seq = p.unsent.Seq // a retry: the lifecycle may have it already
		} else if p.sent != nil && reflect.DeepEqual(*p.sent, r) {
			continue
		}
		if now.Before(p.retryAt) {
			next = min(next, p.retryAt.Sub(now))
			continue
		}
		if r.Seq == 0 {
			r.Seq = s.next()
		}
		p.unsent, p.sending = &r, true
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			s.send(ctx, slots, p, r)
		}()
	}
	return next
}

// send delivers one report of p and records the outcome.
func (s *Supervisor) send(ctx context.Context, slots chan struct{}, p *pod, r model.PodReport) {
	var err error
	select {
	case slots <- struct{}{}:
		rctx, cancel := context.WithTimeout(ctx, reportTimeout)
		err = s.cfg.Reporter.Report(rctx, p.spec.Namespace, p.spec.Name, r)
		cancel()
		<-slots
	case <-ctx.Done():
		err = ctx.Err()
	}
	defer s.poke()
	s.mu.Lock()
	defer s.mu.Unlock()
	p.sending = false
	switch {
	case errors.Is(err, ErrGone):
		if s.pods[p.spec.UID] == p {
			p.stop() // its lifecycle ended: nobody to tell any more
			delete(s.pods, p.spec.UID)
		}
	case err == nil:
		sent := r
		sent.Seq = 0
		p.sent, p.unsent, p.failures, p.retryAt = &sent, nil, 0, time.Time{}
	default:
		// Whether the lifecycle got it is unknown: the state last
		// accepted is no longer known either.
		p.sent = nil
		p.failures++
		back := min(time.Duration(1<<min(p.failures-1, 5))*time.Second, 30*time.Second)
		p.retryAt = time.Now().Add(back)
		if ctx.Err() == nil {
			s.log.Warn("report not delivered; retrying", "pod", p.spec.Namespace+"/"+p.spec.Name, "in", back, "err", err)
		}
	}
}

// sameState: a and b describe the pod alike, whatever their numbers.
func sameState(a, b model.PodReport) bool {
	a.Seq, b.Seq = 0, 0
	return reflect.DeepEqual(a, b)
}
