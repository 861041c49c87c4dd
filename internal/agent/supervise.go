package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// lifecycleReporter delivers the supervisor's reports to the pods'
// lifecycles through the API (which checks the pod is bound here and
// signals its lifecycle). A report never to be taken ends the pod's
// reporting; anything else is retried by the supervisor.
type lifecycleReporter struct {
	api     *nodeapi.Client
	metrics *metrics.Node
}

func (r lifecycleReporter) Report(ctx context.Context, namespace, name string, rep model.PodReport) error {
	err := r.api.ReportPod(ctx, namespace, name, rep)
	switch {
	case errors.Is(err, nodeapi.ErrPodGone):
		r.metrics.Reported(metrics.ReportGone)
		return fmt.Errorf("%w: %w", supervisor.ErrGone, err)
	case err != nil:
		r.metrics.Reported(metrics.ReportRetried)
	default:
		r.metrics.Reported(metrics.ReportDelivered)
	}
	return err
}

// superviseBound makes the supervisor watch the running pods bound to this
// node: after an agent restart (their probe sets come from the control
// plane, what they last reported as their initial state, so a Ready pod
// stays Ready), and at every host reconciliation (a pod handed over while
// the agent restarted). Pods watched already keep their probe state. With
// forget, pods no longer bound here are forgotten (after the host was
// cleaned on the node's return). It returns the pods bound here.
func (a *Agent) superviseBound(ctx context.Context, sup *supervisor.Supervisor, forget bool) ([]model.Pod, error) {
	pods, err := a.api.BoundPods(ctx)
	if err != nil {
		return nil, err
	}
	watched := sup.Watched()
	bound := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != model.PodRunning || p.Metadata.DeletionTimestamp != nil {
			continue
		}
		bound[p.Metadata.UID] = true
		if slices.Contains(watched, p.Metadata.UID) {
			continue
		}
		sb := hostapi.PodSandbox{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID, IP: p.Status.PodIP}
		var probes []hostapi.ContainerProbes
		users, err := a.execProbeUsers(ctx, sb.ZoneName(), p.Spec.Containers)
		if err != nil {
			// Watched at the next reconciliation rather than probed as
			// the zone's root.
			a.log.Warn("the pod's containers' users could not be read", "pod", p.Metadata.Namespace+"/"+p.Metadata.Name, "err", err)
			continue
		}
		for _, c := range p.Spec.Containers {
			probes = append(probes, hostapi.ContainerProbes{Name: c.Name, Ports: c.Ports, Startup: c.StartupProbe, Liveness: c.LivenessProbe, Readiness: c.ReadinessProbe})
			sb.Containers = append(sb.Containers, hostapi.ContainerSpec{Name: c.Name, User: users[c.Name]})
		}
		initial := map[string]supervisor.Initial{}
		for _, cs := range p.Status.ContainerStatuses {
			initial[cs.Name] = supervisor.Initial{Ready: cs.Ready, Started: cs.Started == nil || *cs.Started}
		}
		sup.Watch(hostops.SupervisedPod(sb, probes), initial)
	}
	for _, uid := range watched {
		if forget && !bound[uid] {
			sup.Forget(uid)
		}
	}
	return pods, nil
}

// execProbeUsers are the users the containers with exec probes run as,
// which the pod's API object does not say: their services in the zone do.
func (a *Agent) execProbeUsers(ctx context.Context, zone string, cs []model.Container) (map[string]string, error) {
	users := map[string]string{}
	for _, c := range cs {
		if !hasExecProbe(c) {
			continue
		}
		u, err := a.host.Zone(zone).ServiceUser(ctx, hostops.ContainerFMRI(c.Name))
		if errors.Is(err, illumos.ErrNotFound) || errors.Is(err, illumos.ErrWrongState) {
			continue // no container to probe: the supervisor sees why
		}
		if err != nil {
			return nil, err
		}
		users[c.Name] = u
	}
	return users, nil
}

// hasExecProbe says whether any probe of c runs a command in the zone.
func hasExecProbe(c model.Container) bool {
	for _, p := range []*model.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if p != nil && p.Exec != nil {
			return true
		}
	}
	return false
}
