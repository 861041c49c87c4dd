package hostops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/containerlog"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/supervisor"
)

// ContainerServicePrefix is the SMF service namespace of containers.
const ContainerServicePrefix = "zonewright/container/"

// ContainerService is the SMF service name of a container: zonewright/
// container/<name>. SMF wants each component to start with a letter; a
// container name that starts with a digit gets "c_" in front ('_' never
// appears in a container name, so no other container can take that name).
func ContainerService(container string) string {
	if container != "" && ('a' <= container[0] && container[0] <= 'z' || 'A' <= container[0] && container[0] <= 'Z') {
		return ContainerServicePrefix + container
	}
	return ContainerServicePrefix + "c_" + container
}

// ContainerFMRI is the SMF instance that runs a container.
func ContainerFMRI(container string) string {
	return illumos.Service{Name: ContainerService(container)}.FMRI()
}

// containerLog is where SMF writes a container's output, inside the zone.
func containerLog(container string) string {
	return "/" + containerlog.Path(ContainerService(container))
}

// keepLogs copies each container's log out of the zone into KeptLogs
// before the zone halts or is uninstalled: on illumos a halted zone's
// root is unmounted, an uninstalled one is gone, and a finished pod's
// output must stay readable until the pod is deleted. A log that cannot
// be kept is reported and left: the zone's removal does not wait on it.
func (h *Host) keepLogs(s hostapi.PodSandbox) {
	if h.KeptLogs == nil || s.Brand == "bhyve" {
		return // a bhyve zone's root holds no guest's services
	}
	dir := filepath.Join(h.zonesDir(), s.ZoneName(), "root")
	root, err := os.OpenRoot(dir)
	if err != nil {
		return // no root: nothing ran, or it was kept before it went
	}
	defer root.Close()
	for _, c := range s.Containers {
		f, err := root.Open(containerlog.Path(ContainerService(c.Name)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = h.KeptLogs.Keep(s.UID, c.Name, f)
			f.Close()
		}
		if err != nil {
			h.log().Warn("a container's log was not kept", "zone", s.ZoneName(), "container", c.Name, "err", err)
		}
	}
}

// service is the SMF service that runs container c of the sandbox on
// node. Its environment is the container's (a variable read from a secret
// takes its value from secretEnv, by name; one missing there was optional
// and is left out; one read from a field of the pod takes the field's),
// then POD_IP, POD_NAME and POD_NAMESPACE unless the container sets them
// itself.
func sandboxService(s hostapi.PodSandbox, c hostapi.ContainerSpec, secretEnv map[string]string, node string) (illumos.Service, error) {
	if c.Name == "" {
		return illumos.Service{}, errors.New("a container has no name")
	}
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return illumos.Service{}, fmt.Errorf("container %q has no command: neither the pod nor its image gives one", c.Name)
	}
	var env []illumos.EnvVar
	index := map[string]int{}
	add := func(name, value string, override bool) {
		if i, ok := index[name]; ok {
			if override {
				env[i].Value = value
			}
			return
		}
		index[name] = len(env)
		env = append(env, illumos.EnvVar{Name: name, Value: value})
	}
	for _, e := range c.Env {
		value := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			value = sandboxField(s, e.ValueFrom.FieldRef.FieldPath, node)
		case e.ValueFrom != nil:
			v, ok := secretEnv[e.Name]
			if !ok {
				continue
			}
			value = v
		}
		add(e.Name, value, true) // a later entry wins, as in Kubernetes
	}
	add("POD_IP", s.IP, false)
	add("POD_NAME", s.Name, false)
	add("POD_NAMESPACE", s.Namespace, false)
	// The wrapper records the command's exit status and keeps SMF from
	// restarting it: the pod's lifecycle decides by restartPolicy.
	user, group, _ := strings.Cut(c.User, ":")
	return illumos.Service{
		Name:        ContainerService(c.Name),
		Start:       supervisor.ExitStatusWrapper(c.Name, c.WorkingDir, c.Argv),
		Env:         env,
		WorkingDir:  "/", // the wrapper's: it keeps the exit record there
		User:        user,
		Group:       group,
		Duration:    "child",
		StopTimeout: time.Duration(min(c.KillGraceSeconds, model.MaxGracePeriodSeconds)) * time.Second,
	}, nil
}

// field is the value of a fieldRef's path (model.FieldPaths) for the
// sandbox on node; validation refuses any other path.
func sandboxField(s hostapi.PodSandbox, path, node string) string {
	switch path {
	case model.FieldPodName:
		return s.Name
	case model.FieldPodNamespace:
		return s.Namespace
	case model.FieldPodUID:
		return s.UID
	case model.FieldNodeName:
		return node
	case model.FieldPodIP, model.FieldPodIPs:
		return s.IP // one address: podIPs lists it alone
	}
	return ""
}

// zoneGone reports a failure of a command run through zlogin because
// the zone is not there or not running.
func zoneGone(err error) bool {
	return errors.Is(err, illumos.ErrNotFound) || errors.Is(err, illumos.ErrWrongState)
}

// ConfigureNetwork gives the zone its address and default route. The
// address lives on the VNIC as address object <vnic>/v4 (v6 for IPv6);
// a zone whose allowed-address already put it there at boot (from-gz) is
// done. The route is added persistently; one already there is success.
func (h *Host) ConfigureNetwork(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "configure the zone's network"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	prefix, err := checkSandboxNet(s, h.PodCIDR)
	if err != nil {
		return h.invalid(ctx, step, s, err)
	}
	z := h.Host.Zone(s.ZoneName())
	ifname := s.VNICName()
	obj := ifname + "/v4"
	if prefix.Addr().Is6() {
		obj = ifname + "/v6"
	}
	addrs, err := z.Addrs(ctx, obj)
	switch {
	case err == nil && len(addrs) > 0:
		if addrs[0].Addr != prefix.String() {
			if addrs[0].Type != "static" {
				return h.conflict(ctx, step, s, "address object %s in zone %s is %s (%s), want %s",
					obj, s.ZoneName(), addrs[0].Addr, addrs[0].Type, prefix)
			}
			if err := z.DeleteAddr(ctx, obj); err != nil && !errors.Is(err, illumos.ErrNotFound) {
				return h.fail(ctx, step, s, err)
			}
			if err := z.CreateStaticAddr(ctx, obj, prefix.String()); err != nil {
				return h.fail(ctx, step, s, err)
			}
		}
	case err == nil || errors.Is(err, illumos.ErrNotFound):
		if err := z.CreateIf(ctx, ifname); err != nil && !errors.Is(err, illumos.ErrAlreadyExists) {
			return h.fail(ctx, step, s, err)
		}
		if err := z.CreateStaticAddr(ctx, obj, prefix.String()); err != nil && !errors.Is(err, illumos.ErrAlreadyExists) {
			return h.fail(ctx, step, s, err)
		}
	default:
		return h.fail(ctx, step, s, err)
	}
	if s.Gateway != "" {
		if err := z.AddDefaultRoute(ctx, s.Gateway); err != nil {
			return h.fail(ctx, step, s, err)
		}
	}
	return nil
}

// checkContainers refuses containers without names or with one name twice.
func checkContainers(s hostapi.PodSandbox) error {
	seen := map[string]bool{}
	for _, c := range s.Containers {
		if c.Name == "" {
			return errors.New("a container has no name")
		}
		if seen[ContainerService(c.Name)] {
			return fmt.Errorf("container %q given twice", c.Name)
		}
		seen[ContainerService(c.Name)] = true
	}
	return nil
}

// StartContainers imports and enables one SMF service per container
// (svc:/zonewright/container/<name>:default, startd duration child: the
// command runs in the foreground, and SMF restarts it when it exits).
// Importing again updates the service in place.
func (h *Host) StartContainers(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "start the containers"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	if err := checkContainers(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	secretEnv, err := h.secretEnv(ctx, s)
	if err != nil {
		return h.fail(ctx, step, s, err)
	}
	z := h.Host.Zone(s.ZoneName())
	if err := openExitRecords(ctx, z, s); err != nil {
		return h.fail(ctx, step, s, err)
	}
	for _, c := range s.Containers {
		svc, err := sandboxService(s, c, secretEnv[c.Name], h.Node)
		if err != nil {
			return h.invalid(ctx, step, s, err)
		}
		manifest, err := illumos.RenderManifest(svc)
		if err != nil {
			return h.invalid(ctx, step, s, fmt.Errorf("container %s: %w", c.Name, err))
		}
		if err := z.ImportManifest(ctx, manifest); err != nil {
			return h.fail(ctx, step+" (import the service of container "+c.Name+")", s, err)
		}
		if err := z.EnableService(ctx, svc.FMRI()); err != nil {
			return h.fail(ctx, step+" (enable container "+c.Name+")", s, err)
		}
	}
	return nil
}

// openExitRecords lets containers that run as a user other than the
// zone's root leave their exit records: the records' directory becomes
// writable by all, sticky as /tmp is, so none removes another's.
func openExitRecords(ctx context.Context, z illumos.InZone, s hostapi.PodSandbox) error {
	if !slices.ContainsFunc(s.Containers, func(c hostapi.ContainerSpec) bool { return c.User != "" }) {
		return nil
	}
	res, err := z.Exec(ctx, supervisor.OpenExitRecords(), nil)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("open the containers' exit records to their users: %s", strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// containerStates reads the SMF state of every container of the sandbox
// ("" for a container without a service). The services are named: svcs
// leaves disabled ones out of a plain listing.
func (h *Host) containerStates(ctx context.Context, s hostapi.PodSandbox) (map[string]illumos.ServiceStatus, error) {
	z := h.Host.Zone(s.ZoneName())
	out := make(map[string]illumos.ServiceStatus, len(s.Containers))
	if len(s.Containers) == 0 {
		return out, nil
	}
	fmris := make([]string, len(s.Containers))
	for i, c := range s.Containers {
		fmris[i] = ContainerFMRI(c.Name)
	}
	sts, err := z.Services(ctx, fmris...)
	if errors.Is(err, illumos.ErrNotFound) {
		// Some service is missing (or the zone is): look one by one.
		sts = nil
		for _, f := range fmris {
			one, err := z.Services(ctx, f)
			if errors.Is(err, illumos.ErrNotFound) && !zoneMissing(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			sts = append(sts, one...)
		}
	} else if err != nil {
		return nil, err
	}
	byFMRI := make(map[string]illumos.ServiceStatus, len(sts))
	for _, st := range sts {
		byFMRI[st.FMRI] = st
	}
	for i, c := range s.Containers {
		out[c.Name] = byFMRI[fmris[i]]
	}
	return out, nil
}

// zoneMissing reports a zlogin refusal because the zone does not exist
// (rather than a service that does not).
func zoneMissing(err error) bool {
	var ee *illumos.ExecError
	return errors.As(err, &ee) && strings.HasPrefix(strings.TrimSpace(ee.Stderr), "zlogin:")
}

// maintenance is the error of a container SMF gave up on (a retry may
// find it restarted).
func (h *Host) maintenance(ctx context.Context, s hostapi.PodSandbox, container string) error {
	h.log().Warn("container in maintenance", "zone", s.ZoneName(), "container", container)
	return &Error{What: h.podStep("wait for the containers to come online", s), Err: &MaintenanceError{Container: container,
		Zone: s.ZoneName(), FMRI: ContainerFMRI(container), Log: containerLog(container)}}
}

// exited tells whether the container's command ran and ended: its
// wrapper recorded an exit status (removed when it starts again, so the
// record is this incarnation's).
func (h *Host) exited(ctx context.Context, s hostapi.PodSandbox, container string) bool {
	_, ok, err := supervisor.IllumosHost{Host: h.Host}.ExitCode(ctx, s.ZoneName(), container)
	return err == nil && ok
}

// enableGrace is how long a container may still read disabled when the
// wait for it begins: svcadm enable returns before svc.startd acts on it
// (requests are asynchronous), so a service StartContainers has just
// enabled reads disabled, with no transition, for a moment.
const enableGrace = 2 * time.Second

// WaitContainersOnline waits until every container's service is online,
// or has run and ended, reporting progress at each look. A container in
// maintenance that never ran its command ends the wait with a
// *MaintenanceError that names it.
func (h *Host) WaitContainersOnline(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "wait for the containers to come online"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	// Services usually come online within moments of their start: look
	// again soon, then less often.
	wait := 50 * time.Millisecond
	start := time.Now()
	for {
		states, err := h.containerStates(ctx, s)
		if err != nil {
			if !errors.Is(err, illumos.ErrTransient) || ctx.Err() != nil {
				return h.fail(ctx, step, s, err)
			}
			h.log().Warn("svcs failed; looking again", "zone", s.ZoneName(), "err", err)
		} else {
			var pending []string
			names := make([]string, 0, len(states))
			for name := range states {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				st := states[name]
				switch {
				case st.State == "":
					return h.fail(ctx, step, s, &illumos.Error{Op: "svcs", Subject: s.ZoneName() + ":" + ContainerFMRI(name),
						Kind: illumos.KindNotFound, Err: fmt.Errorf("container %q has no SMF service: StartContainers has not run", name)})
				case st.State == "maintenance" && h.exited(ctx, s, name):
					// Its command ran and ended before it was seen online:
					// that is the container's exit, which the supervisor
					// reports and restartPolicy decides, as kubelet does,
					// not a pod that could not start.
				case st.State == "maintenance":
					return h.maintenance(ctx, s, name)
				case st.State == "disabled" && !st.Transitioning && time.Since(start) >= enableGrace:
					return h.fail(ctx, step, s, &illumos.Error{Op: "svcs", Subject: s.ZoneName() + ":" + ContainerFMRI(name),
						Kind: illumos.KindWrongState, Err: fmt.Errorf("container %q is disabled (stopped)", name)})
				case st.State == "online" && !st.Transitioning:
				default:
					pending = append(pending, name+"="+st.State)
				}
			}
			if len(pending) == 0 {
				return nil
			}
			beat(ctx, "waiting for "+strings.Join(pending, ","))
		}
		if err := sleep(ctx, min(wait, h.pollInterval())); err != nil {
			return h.fail(ctx, step, s, err)
		}
		wait *= 2
	}
}

// RestartContainer restarts one container's service: a service in
// maintenance (its command ended) is cleared, so SMF starts it again; a
// disabled one is enabled; a running one restarted. It returns the
// supervisor's Seq from which reports describe the new incarnation.
func (h *Host) RestartContainer(ctx context.Context, in hostapi.RestartInput) (uint64, error) {
	const step = "restart the container"
	s := in.Sandbox
	if err := checkSandbox(s); err != nil {
		return 0, h.invalid(ctx, step, s, err)
	}
	if in.Container == "" {
		return 0, h.invalid(ctx, step, s, errors.New("no container named"))
	}
	z := h.Host.Zone(s.ZoneName())
	fmri := ContainerFMRI(in.Container)
	sts, err := z.Services(ctx, fmri)
	if err != nil {
		return 0, h.fail(ctx, step+" "+in.Container, s, err)
	}
	state := ""
	if len(sts) > 0 {
		state = sts[0].State
	}
	switch state {
	case "maintenance":
		// Its exit record goes first: SMF takes the clear asynchronously,
		// and a look at the service meanwhile must not find the ended
		// incarnation's status and take it for the new one's.
		if err = (supervisor.IllumosHost{Host: h.Host}).ForgetExit(ctx, s.ZoneName(), in.Container); err == nil {
			err = z.ClearService(ctx, fmri)
		}
	case "disabled":
		err = z.EnableService(ctx, fmri)
	default:
		err = z.RestartService(ctx, fmri)
	}
	if err != nil {
		return 0, h.fail(ctx, step+" "+in.Container, s, err)
	}
	if h.Supervisor == nil {
		return 0, nil
	}
	return h.Supervisor.Restarted(s.UID, in.Container), nil
}

// StopContainer stops one container, as kubelet kills a container that
// failed its liveness probe: its service is disabled (SMF sends SIGTERM to
// its processes) and the call returns once it has stopped, so a restart
// that follows finds it disabled and enables it. The pod stays supervised.
// A zone that is not running, or a service that is not there, has nothing
// to stop.
func (h *Host) StopContainer(ctx context.Context, in hostapi.RestartInput) error {
	const step = "stop the container"
	s := in.Sandbox
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	if in.Container == "" {
		return h.invalid(ctx, step, s, errors.New("no container named"))
	}
	z := h.Host.Zone(s.ZoneName())
	fmri := ContainerFMRI(in.Container)
	if err := z.DisableService(ctx, fmri); err != nil {
		if zoneGone(err) {
			return nil
		}
		return h.fail(ctx, step+" "+in.Container, s, err)
	}
	// svcadm disable only asks svc.startd; wait until it has acted.
	wait := 50 * time.Millisecond
	for {
		sts, err := z.Services(ctx, fmri)
		switch {
		case zoneGone(err):
			return nil
		case err != nil && (!errors.Is(err, illumos.ErrTransient) || ctx.Err() != nil):
			return h.fail(ctx, step+" "+in.Container, s, err)
		case err == nil && (len(sts) == 0 || (!sts[0].Transitioning && sts[0].State != "online" && sts[0].State != "degraded")):
			return nil
		}
		beat(ctx, "waiting for "+in.Container+" to stop")
		if err := sleep(ctx, min(wait, h.pollInterval())); err != nil {
			return h.fail(ctx, step+" "+in.Container, s, err)
		}
		wait *= 2
	}
}

// StopContainers disables every container's service: SMF sends SIGTERM to
// its processes. Services that do not exist, and a zone that is not
// running, are fine.
func (h *Host) StopContainers(ctx context.Context, s hostapi.PodSandbox) error {
	const step = "stop the containers"
	if err := checkSandbox(s); err != nil {
		return h.invalid(ctx, step, s, err)
	}
	if h.Supervisor != nil {
		h.Supervisor.Forget(s.UID) // stopping is not failing
	}
	z := h.Host.Zone(s.ZoneName())
	for _, c := range s.Containers {
		err := z.DisableService(ctx, ContainerFMRI(c.Name))
		if err == nil || errors.Is(err, illumos.ErrNotFound) {
			continue
		}
		if errors.Is(err, illumos.ErrWrongState) {
			if zs, gerr := h.Host.Zoneadm().Get(ctx, s.ZoneName()); errors.Is(gerr, illumos.ErrNotFound) || (gerr == nil && zs.State != illumos.ZoneRunning) {
				return nil // nothing runs
			}
		}
		return h.fail(ctx, step+" (disable container "+c.Name+")", s, err)
	}
	return nil
}

// SupervisePod hands a running pod to the node's supervisor, which probes
// it and reports what changes to its lifecycle. It returns the Seq from
// which reports describe the pod as it is now.
func (h *Host) SupervisePod(ctx context.Context, in hostapi.SuperviseInput) (uint64, error) {
	const step = "supervise the pod"
	s := in.Sandbox
	if err := checkSandbox(s); err != nil {
		return 0, h.invalid(ctx, step, s, err)
	}
	if h.Supervisor == nil {
		return 0, h.invalid(ctx, step, s, errors.New("this node runs no supervisor"))
	}
	return h.Supervisor.Watch(SupervisedPod(s, in.Probes), nil), nil
}

// SupervisedPod is what the supervisor watches of a pod; exec probes run
// as their container's user.
func SupervisedPod(s hostapi.PodSandbox, probes []hostapi.ContainerProbes) supervisor.Pod {
	p := supervisor.Pod{Namespace: s.Namespace, Name: s.Name, UID: s.UID, Zone: s.ZoneName(), IP: s.IP}
	users := map[string]string{}
	for _, c := range s.Containers {
		users[c.Name] = c.User
	}
	for _, c := range probes {
		p.Containers = append(p.Containers, supervisor.Container{Name: c.Name, FMRI: ContainerFMRI(c.Name), User: users[c.Name],
			Ports: c.Ports, Startup: c.Startup, Liveness: c.Liveness, Readiness: c.Readiness})
	}
	return p
}
