package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/model"
)

// Probe kinds, in the order they are checked.
const (
	probeStartup   = "startup"
	probeLiveness  = "liveness"
	probeReadiness = "readiness"
)

func newContainerState(c model.Container) ContainerRunState {
	cs := ContainerRunState{Name: c.Name, StartupDone: c.StartupProbe == nil, Ready: c.ReadinessProbe == nil}
	for _, p := range []struct {
		kind  string
		probe *model.Probe
	}{{probeStartup, c.StartupProbe}, {probeLiveness, c.LivenessProbe}, {probeReadiness, c.ReadinessProbe}} {
		if p.probe != nil {
			cs.Probes = append(cs.Probes, ProbeRunState{Kind: p.kind})
		}
	}
	return cs
}

func probeSpec(c model.Container, kind string) model.Probe {
	var p *model.Probe
	switch kind {
	case probeStartup:
		p = c.StartupProbe
	case probeLiveness:
		p = c.LivenessProbe
	default:
		p = c.ReadinessProbe
	}
	return *p
}

// restartContainerState resets a container's probes as it (re)starts: the
// startup probe gates the others, each waits its initial delay.
func (w *podWorkflow) restartContainerState(i int, now time.Time) {
	c := &w.run_.Containers[i]
	spec := w.spec.Containers[i]
	c.LastStart, c.RestartAt, c.RestartReason = now, time.Time{}, ""
	c.StartupDone, c.Ready = spec.StartupProbe == nil, spec.ReadinessProbe == nil
	for j := range c.Probes {
		p := &c.Probes[j]
		p.Successes, p.Failures = 0, 0
		p.NextAt = now.Add(time.Duration(probeSpec(spec, p.Kind).InitialDelaySeconds) * time.Second)
	}
}

// running watches the pod until it is deleted or cancelled: each probe on
// its own timer, the zone and its services on a monitor timer, restarts
// with back-off per restartPolicy, continue-as-new before the history grows
// large.
func (w *podWorkflow) running(ctx workflow.Context) error {
	r := w.run_
	if r.StartedAt.IsZero() {
		now := workflow.Now(ctx)
		r.StartedAt = now
		for i := range r.Containers {
			w.restartContainerState(i, now)
		}
		w.setPhase(ctx, model.PodRunning)
		w.update(ctx, w.report(ctx, "Started", fmt.Sprintf("Zone running on %s; containers started", r.Node)))
	}
	w.status.Step = "Running"
	// Pods started before the monitor interval became 10s keep their 5s.
	if workflow.GetVersion(ctx, "monitor-every-10s", workflow.DefaultVersion, 1) == workflow.DefaultVersion && w.in.Tuning == nil {
		w.t.MonitorEvery = 5 * time.Second
	}
	reported := w.readiness()
	nextMonitor := workflow.Now(ctx).Add(w.t.MonitorEvery)
	var failure string
	for loops := 1; failure == "" && !w.interrupted(); loops++ {
		// A loop adds about a dozen events (timer, probes, monitor); the
		// estimate also holds where the history length is not reported.
		info := workflow.GetInfo(ctx)
		if info.GetCurrentHistoryLength() > w.t.HistoryLimit || loops*12 > w.t.HistoryLimit || info.GetContinueAsNewSuggested() {
			return workflow.NewContinueAsNewError(ctx, PodLifecycle, PodInput{Pod: w.in.Pod, Run: r, Tuning: w.in.Tuning})
		}
		now := workflow.Now(ctx)
		next := nextMonitor
		for i, c := range r.Containers {
			if !c.RestartAt.IsZero() && c.RestartAt.Before(next) {
				next = c.RestartAt
			}
			for j := range c.Probes {
				if w.probeActive(i, j) && c.Probes[j].NextAt.Before(next) {
					next = c.Probes[j].NextAt
				}
			}
		}
		if d := next.Sub(now); d > 0 {
			if _, err := workflow.AwaitWithTimeout(ctx, d, w.interrupted); err != nil {
				if temporal.IsCanceledError(err) {
					w.cancel = &CancelSignal{Reason: "workflow cancel requested"}
					break
				}
				return err
			}
			if w.interrupted() {
				break
			}
		}
		now = workflow.Now(ctx)
		for i := range r.Containers {
			if c := &r.Containers[i]; !c.RestartAt.IsZero() && !now.Before(c.RestartAt) {
				w.restartContainer(ctx, i, now)
			}
		}
		failure = w.runProbes(ctx, now)
		if failure == "" && !now.Before(nextMonitor) {
			failure = w.monitor(ctx, now)
			nextMonitor = now.Add(w.t.MonitorEvery)
		}
		if ready := w.readiness(); ready != reported {
			w.update(ctx, w.report(ctx, "", ""))
			reported = ready
		}
	}
	ctx, _ = workflow.NewDisconnectedContext(ctx)
	ctx = workflow.WithActivityOptions(ctx, controlOptions)
	if w.terminate != nil || w.finalize {
		return w.terminateRunning(ctx)
	}
	if failure == "" && w.cancel == nil && w.evicting() {
		return w.leaveNode(ctx)
	}
	// Cancelled or failed: stop and clean the host, keep the row Failed.
	reason, msg := "ContainerFailed", failure
	if failure == "" {
		reason, msg = "Cancelled", "stopped and removed from the node: "+w.cancel.Reason
	}
	w.teardown(ctx)
	w.run_ = nil
	w.markFailed(ctx, reason, msg)
	return w.awaitRemoval(ctx)
}

func (w *podWorkflow) probeActive(i, j int) bool {
	c := w.run_.Containers[i]
	if !c.RestartAt.IsZero() {
		return false
	}
	if c.Probes[j].Kind == probeStartup {
		return !c.StartupDone
	}
	return c.StartupDone
}

// runProbes runs every due probe in parallel and applies the results; it
// returns a failure message when a container failed under restartPolicy Never.
func (w *podWorkflow) runProbes(ctx workflow.Context, now time.Time) string {
	r := w.run_
	type pending struct {
		i, j int
		fut  workflow.Future
	}
	var due []pending
	for i := range r.Containers {
		for j := range r.Containers[i].Probes {
			p := r.Containers[i].Probes[j]
			if !w.probeActive(i, j) || now.Before(p.NextAt) {
				continue
			}
			spec := probeSpec(w.spec.Containers[i], p.Kind)
			o := hostOptions(r.Node, time.Duration(spec.TimeoutSeconds)*time.Second+10*time.Second, 0, 1)
			in := activities.ProbeInput{Sandbox: r.Sandbox, Container: r.Containers[i].Name, Probe: spec}
			due = append(due, pending{i, j, workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), host.Probe, in)})
		}
	}
	for _, d := range due {
		var res activities.ProbeResult
		if w.hostWait(ctx, d.fut) != nil {
			return "" // the node is lost: node health has taken over
		}
		if err := d.fut.Get(ctx, &res); err != nil {
			res = activities.ProbeResult{Message: unwrapActivity(err).Error()}
		}
		if msg := w.applyProbe(ctx, d.i, d.j, res, now); msg != "" {
			return msg
		}
	}
	return ""
}

func (w *podWorkflow) applyProbe(ctx workflow.Context, i, j int, res activities.ProbeResult, now time.Time) string {
	c := &w.run_.Containers[i]
	p := &c.Probes[j]
	spec := probeSpec(w.spec.Containers[i], p.Kind)
	p.NextAt = now.Add(time.Duration(spec.PeriodSeconds) * time.Second)
	if res.Success {
		p.Successes, p.Failures = p.Successes+1, 0
	} else {
		p.Failures, p.Successes = p.Failures+1, 0
	}
	switch {
	case p.Kind == probeStartup && p.Successes >= spec.SuccessThreshold:
		c.StartupDone = true
	case p.Kind == probeReadiness && p.Successes >= spec.SuccessThreshold:
		c.Ready = true
	case p.Kind == probeReadiness && p.Failures >= spec.FailureThreshold:
		c.Ready = false
	case (p.Kind == probeStartup || p.Kind == probeLiveness) && p.Failures >= spec.FailureThreshold:
		return w.containerFailed(ctx, i, fmt.Sprintf("%s probe failed %d times: %s", p.Kind, p.Failures, res.Message), now)
	}
	if !res.Success && p.Failures == 1 {
		w.update(ctx, activities.StatusUpdate{Reason: "", EventType: model.EventWarning, EventReason: "Unhealthy",
			EventMessage: fmt.Sprintf("%s probe of container %s failed: %s", p.Kind, c.Name, res.Message)})
	}
	return ""
}

// containerFailed restarts the container after its back-off, or fails the
// pod under restartPolicy Never.
func (w *podWorkflow) containerFailed(ctx workflow.Context, i int, why string, now time.Time) string {
	c := &w.run_.Containers[i]
	if !c.RestartAt.IsZero() {
		return ""
	}
	if w.spec.RestartPolicy == model.RestartNever {
		return fmt.Sprintf("container %s failed and restartPolicy is Never: %s", c.Name, why)
	}
	delay := time.Duration(0)
	if c.Restarts > 0 {
		delay = w.t.RestartBackoff << min(c.Restarts-1, 16)
		if delay > w.t.RestartMax {
			delay = w.t.RestartMax
		}
	}
	c.Ready = false
	c.RestartAt, c.RestartReason = now.Add(delay+time.Millisecond), why
	w.update(ctx, w.report(ctx, "BackOff", fmt.Sprintf("Restarting container %s in %s: %s", c.Name, delay, why)))
	return ""
}

func (w *podWorkflow) restartContainer(ctx workflow.Context, i int, now time.Time) {
	r := w.run_
	c := &r.Containers[i]
	why := c.RestartReason
	o := hostOptions(r.Node, 2*time.Minute, 0, 5)
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), host.RestartContainer,
		activities.RestartInput{Sandbox: r.Sandbox, Container: c.Name})
	if w.hostWait(ctx, fut) != nil {
		return
	}
	err := fut.Get(ctx, nil)
	c.Restarts++
	w.restartContainerState(i, now)
	msg := fmt.Sprintf("Restarted container %s (restart %d): %s", c.Name, c.Restarts, why)
	if err != nil {
		msg = fmt.Sprintf("Restart %d of container %s failed: %s", c.Restarts, c.Name, unwrapActivity(err))
	}
	w.update(ctx, w.report(ctx, "Restarted", msg))
}

// monitor checks the zone and its services: a zone found not running is
// booted again (or the pod fails under Never); a service in maintenance or
// gone is a failed container.
func (w *podWorkflow) monitor(ctx workflow.Context, now time.Time) string {
	r := w.run_
	var obs activities.PodObservation
	o := hostOptions(r.Node, time.Minute, 0, 3)
	fut := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, o), host.ObservePod, r.Sandbox)
	if w.hostWait(ctx, fut) != nil {
		return ""
	}
	if err := fut.Get(ctx, &obs); err != nil {
		return "" // the node is unreachable: node health decides, not one missed look
	}
	if obs.ZoneState != "running" {
		if w.spec.RestartPolicy == model.RestartNever {
			return fmt.Sprintf("zone is %q and restartPolicy is Never", obs.ZoneState)
		}
		if obs.ZoneState == "" || obs.ZoneState == "configured" {
			return fmt.Sprintf("zone vanished from node %s (state %q)", r.Node, obs.ZoneState)
		}
		for _, step := range []any{host.BootZone, host.ConfigureNetwork, host.StartContainers} {
			fut := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, hostOptions(r.Node, 5*time.Minute, 0, 5)), step, r.Sandbox)
			if w.hostWait(ctx, fut) != nil {
				return ""
			}
			if err := fut.Get(ctx, nil); err != nil {
				return fmt.Sprintf("zone was %q and could not be booted again: %s", obs.ZoneState, unwrapActivity(err))
			}
		}
		for i := range r.Containers {
			r.Containers[i].Restarts++
			w.restartContainerState(i, now)
		}
		w.update(ctx, w.report(ctx, "ZoneRebooted", fmt.Sprintf("Zone was %s; booted it again", obs.ZoneState)))
		return ""
	}
	for i, c := range r.Containers {
		switch state := obs.Containers[c.Name]; state {
		case "online", "offline":
		default:
			if msg := w.containerFailed(ctx, i, fmt.Sprintf("service is %q", state), now); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// readiness summarises what the Ready condition reports.
func (w *podWorkflow) readiness() string {
	s := ""
	for _, c := range w.run_.Containers {
		s += fmt.Sprintf("%s=%t/%d;", c.Name, c.Ready, c.Restarts)
	}
	return s
}

// report renders the pod's running status, with an event when reason is set.
func (w *podWorkflow) report(ctx workflow.Context, reason, msg string) activities.StatusUpdate {
	r := w.run_
	now := workflow.Now(ctx)
	ready := model.ConditionTrue
	var statuses []model.ContainerStatus
	for _, c := range r.Containers {
		state := "running"
		if !c.RestartAt.IsZero() {
			state = "waiting"
		}
		statuses = append(statuses, model.ContainerStatus{Name: c.Name, Ready: c.Ready, RestartCount: c.Restarts, State: state})
		if !c.Ready {
			ready = model.ConditionFalse
		}
	}
	start := r.StartedAt
	return activities.StatusUpdate{Phase: model.PodRunning, PodIP: r.Sandbox.IP, HostIP: r.HostIP, StartTime: &start,
		ContainerStatuses: statuses,
		Conditions:        []model.PodCondition{{Type: model.PodReady, Status: ready, LastTransitionTime: &now}},
		EventReason:       reason, EventMessage: msg}
}
