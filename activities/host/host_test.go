package host_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/supervisor"
)

func TestPodLifecycleOnASimulatedNode(t *testing.T) {
	// The system's python3: a zone's processes run as an unprivileged user
	// with the system's PATH, so one under a user's home may be out of reach.
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	n := newNode(t)
	const ip = "127.10.1.2"
	port := freePort(t, ip)
	s := sandbox("web", ip,
		hostapi.ContainerSpec{Name: "sleeper", Argv: []string{"sleep", "1000"}},
		hostapi.ContainerSpec{Name: "http", Argv: []string{python, "-m", "http.server", "--bind", ip, strconv.Itoa(port)},
			Env: []model.EnvVar{{Name: "GREETING", Value: "hi"}}},
	)
	zone := s.ZoneName()
	n.provision(t, s)

	// What the host now has.
	ctx := t.Context()
	info, err := n.ops.Host.Zonecfg().Info(ctx, zone)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	if cfg.Brand != "sparse" || cfg.Zonepath != "/zonewright/zones/"+zone || cfg.Autoboot || cfg.CPUCap != 0.5 ||
		cfg.Memory == nil || cfg.Memory.Physical != 257<<20 {
		t.Errorf("zone config = %+v (memory %+v)", cfg, cfg.Memory)
	}
	if want := []illumos.Net{{Physical: s.VNICName(), AllowedAddress: ip + "/24", Defrouter: "127.10.1.1"}}; !slices.Equal(cfg.Nets, want) {
		t.Errorf("nets = %+v, want %+v", cfg.Nets, want)
	}
	var attrs []string
	for _, a := range cfg.Attrs {
		attrs = append(attrs, a.Name+"="+a.Value)
	}
	if !slices.Contains(attrs, "zonewright.pod=default/web") || !slices.Contains(attrs, "zonewright.uid=uid-web") {
		t.Errorf("attrs = %v", attrs)
	}
	ds := "tank/zonewright/zones/" + zone
	found := false
	for _, d := range n.sim.State(t).Datasets {
		if d.Name == ds {
			found = true
		}
	}
	if !found {
		t.Errorf("dataset %s missing", ds)
	}
	if v, err := n.ops.Host.Dladm().VNIC(ctx, s.VNICName()); err != nil || v.Over != etherstub || v.Zone != zone {
		t.Errorf("vnic = %+v, %v", v, err)
	}
	addrs, err := n.ops.Host.Zone(zone).Addrs(ctx, s.VNICName()+"/v4")
	if err != nil || len(addrs) != 1 || addrs[0].Addr != ip+"/24" {
		t.Errorf("address = %+v, %v", addrs, err)
	}

	obs := n.observe(t, s)
	if obs.ZoneState != "running" || obs.Containers["sleeper"] != "online" || obs.Containers["http"] != "online" {
		t.Errorf("observed %+v", obs)
	}

	// Probes.
	httpProbe := model.Probe{HTTPGet: &model.HTTPGetAction{Path: "/", Port: model.IntValue(int32(port))}, TimeoutSeconds: 2}
	var res supervisor.Result
	deadline := time.Now().Add(20 * time.Second)
	for {
		res = n.probe(t, s, httpProbe)
		if res.Success || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !res.Success || res.Message != "HTTP probe succeeded with statuscode: 200" {
		t.Errorf("http probe: %+v", res)
	}
	notFound := model.Probe{HTTPGet: &model.HTTPGetAction{Path: "/nosuch", Port: model.IntValue(int32(port))}}
	if res := n.probe(t, s, notFound); res.Success || res.Message != "HTTP probe failed with statuscode: 404" {
		t.Errorf("http probe of a missing page: %+v", res)
	}
	exec0 := model.Probe{Exec: &model.ExecAction{Command: []string{"sh", "-c", "exit 0"}}}
	if res := n.probe(t, s, exec0); !res.Success {
		t.Errorf("exec probe exit 0: %+v", res)
	}
	exec3 := model.Probe{Exec: &model.ExecAction{Command: []string{"sh", "-c", "echo sick >&2; exit 3"}}}
	if res := n.probe(t, s, exec3); res.Success || !strings.Contains(res.Message, "exited with 3: sick") {
		t.Errorf("exec probe exit 3: %+v", res)
	}
	slow := model.Probe{Exec: &model.ExecAction{Command: []string{"sleep", "30"}}, TimeoutSeconds: 1}
	start := time.Now()
	if res := n.probe(t, s, slow); res.Success || !strings.Contains(res.Message, "timed out after 1s") || time.Since(start) > 10*time.Second {
		t.Errorf("exec probe past its timeout: %+v after %s", res, time.Since(start))
	}
	tcpOpen := model.Probe{TCPSocket: &model.TCPSocketAction{Port: model.IntValue(int32(port))}}
	if res := n.probe(t, s, tcpOpen); !res.Success {
		t.Errorf("tcp probe of the server: %+v", res)
	}
	closed := freePort(t, ip)
	tcpClosed := model.Probe{TCPSocket: &model.TCPSocketAction{Port: model.IntValue(int32(closed))}}
	if res := n.probe(t, s, tcpClosed); res.Success || !strings.Contains(res.Message, "connection refused") ||
		!strings.Contains(res.Message, "dial tcp "+ip) {
		t.Errorf("tcp probe of a closed port: %+v", res)
	}
	if _, err := supervisor.RunProbe(ctx, supervisor.IllumosHost{Host: n.ops.Host}, s.ZoneName(), "", s.IP, nil, &model.Probe{}); err == nil {
		t.Error("a probe without an action ran")
	}

	// Restart and stop.
	n.must(t, "RestartContainer", n.host.RestartContainer, hostapi.RestartInput{Sandbox: s, Container: "sleeper"})
	n.must(t, "WaitContainersOnline after a restart", n.host.WaitContainersOnline, s)
	n.twice(t, "StopContainers", n.host.StopContainers, s)
	// svcadm disable returns before svc.startd has stopped the instance;
	// once it has, svcs (which lists what is not disabled) shows neither.
	containersStopped := func(o observation) bool {
		_, listed := o.Containers["sleeper"]
		return o.ZoneState == "running" && !listed && o.Containers["http"] == ""
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if obs = n.observe(t, s); containersStopped(obs) || time.Now().After(deadline) {
			break
		}
	}
	if !containersStopped(obs) {
		t.Errorf("observed 10 s after stop %+v", obs)
	}
	// Starting them again is StartContainers again (enable).
	n.must(t, "StartContainers again", n.host.StartContainers, s)
	n.must(t, "WaitContainersOnline again", n.host.WaitContainersOnline, s)

	// A graceful shutdown: the services stop on SIGTERM.
	var stopped bool
	if err := n.must(t, "ShutdownZone", n.host.ShutdownZone, hostapi.ShutdownInput{Sandbox: s, GraceSeconds: 30}).Get(&stopped); err != nil || !stopped {
		t.Errorf("ShutdownZone = %v, %v; want true", stopped, err)
	}
	if err := n.must(t, "ShutdownZone of a stopped zone", n.host.ShutdownZone, hostapi.ShutdownInput{Sandbox: s, GraceSeconds: 30}).Get(&stopped); err != nil || !stopped {
		t.Errorf("ShutdownZone again = %v, %v; want true", stopped, err)
	}
	obs = n.observe(t, s)
	if obs.ZoneState != "installed" || len(obs.Containers) != 0 {
		t.Errorf("observed after shutdown %+v", obs)
	}
	n.twice(t, "StopContainers of a halted zone", n.host.StopContainers, s)

	n.deprovision(t, s)
	if obs := n.observe(t, s); obs.ZoneState != "" {
		t.Errorf("observed after deprovision %+v", obs)
	}
	wantNothingLeft(t, n)
}

// wantNothingLeft fails if the node holds any zone, VNIC or pod dataset.
func wantNothingLeft(t *testing.T, n *node) {
	t.Helper()
	st := n.sim.State(t)
	for _, z := range st.Zones {
		if z.Name != "global" {
			t.Errorf("zone left: %+v", z)
		}
	}
	for _, l := range st.Links {
		if l.Class == "vnic" {
			t.Errorf("VNIC left: %+v", l)
		}
	}
	for _, d := range st.Datasets {
		if strings.HasPrefix(d.Name, zonesDataset+"/") || strings.HasPrefix(d.Name, volumesDataset+"/") {
			t.Errorf("dataset left: %s", d.Name)
		}
	}
}

func TestShutdownPastTheGracePeriodThenHalt(t *testing.T) {
	n := newNode(t)
	s := sandbox("stubborn", "127.10.2.2",
		hostapi.ContainerSpec{Name: "stubborn", Argv: []string{"sh", "-c", "trap '' TERM; while :; do sleep 1; done"}})
	n.provision(t, s)

	start := time.Now()
	var stopped bool
	if err := n.must(t, "ShutdownZone", n.host.ShutdownZone, hostapi.ShutdownInput{Sandbox: s, GraceSeconds: 2}).Get(&stopped); err != nil || stopped {
		t.Errorf("ShutdownZone of a zone whose service ignores SIGTERM = %v, %v; want false", stopped, err)
	}
	if took := time.Since(start); took < 2*time.Second || took > 10*time.Second {
		t.Errorf("ShutdownZone took %s with a grace of 2s", took)
	}
	n.twice(t, "HaltZone", n.host.HaltZone, s)
	if obs := n.observe(t, s); obs.ZoneState != "installed" {
		t.Errorf("observed after halt %+v", obs)
	}
	// A grace period of zero asks for no shutdown at all.
	n.must(t, "BootZone", n.host.BootZone, s)
	if err := n.must(t, "ShutdownZone", n.host.ShutdownZone, hostapi.ShutdownInput{Sandbox: s, GraceSeconds: 0}).Get(&stopped); err != nil || stopped {
		t.Errorf("ShutdownZone with no grace = %v, %v; want false", stopped, err)
	}
	// UninstallZone halts a running zone first.
	n.must(t, "UninstallZone of a running zone", n.host.UninstallZone, s)
	n.deprovision(t, s)
	wantNothingLeft(t, n)
}

func TestContainerInMaintenance(t *testing.T) {
	n := newNode(t)
	s := sandbox("crashy", "127.10.3.2",
		hostapi.ContainerSpec{Name: "ok", Argv: []string{"sleep", "1000"}},
		hostapi.ContainerSpec{Name: "crashy", Argv: []string{"sh", "-c", "exit 1"}})
	h := n.host
	for _, step := range []any{h.CreateDatasets, h.CreateVNIC, h.ConfigureZone, h.InstallZone, h.BootZone, h.ConfigureNetwork, h.StartContainers} {
		n.must(t, "provision", step, s)
	}
	// The crashing command ends in maintenance at once: SMF does not
	// restart it.
	var obs observation
	deadline := time.Now().Add(10 * time.Second)
	for obs = n.observe(t, s); obs.Containers["crashy"] != "maintenance" && time.Now().Before(deadline); obs = n.observe(t, s) {
		time.Sleep(50 * time.Millisecond)
	}
	if obs.Containers["crashy"] != "maintenance" || obs.Containers["ok"] != "online" {
		t.Errorf("observed %+v", obs)
	}
	// SMF did not restart it: its wrapper recorded the exit status for
	// the lifecycle to decide.
	code, ok, err := supervisor.IllumosHost{Host: n.ops.Host}.ExitCode(context.Background(), s.ZoneName(), "crashy")
	if err != nil || !ok || code != 1 {
		t.Errorf("exit status of crashy = %d, %t, %v; want 1", code, ok, err)
	}
	// A command that ran and ended before the wait saw it online has
	// started: its exit is the lifecycle's to judge by restartPolicy, not
	// a provision that failed.
	if _, err := n.run(t, h.WaitContainersOnline, s); err != nil {
		t.Errorf("WaitContainersOnline with a container that ran and exited: %v", err)
	}
	// In maintenance without having run its command (no exit record), it
	// never started.
	if _, err := n.ops.Host.Zone(s.ZoneName()).Exec(context.Background(),
		[]string{"sh", "-c", "rm -f /var/zonewright/exit/crashy var/zonewright/exit/crashy"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = n.run(t, h.WaitContainersOnline, s)
	ae := appError(t, err)
	if ae.Type() != "ContainerMaintenance" || ae.NonRetryable() || !strings.Contains(err.Error(), `container "crashy"`) ||
		!strings.Contains(err.Error(), "maintenance") {
		t.Errorf("WaitContainersOnline with a container that never ran: %v (type %s, non-retryable %v)", err, ae.Type(), ae.NonRetryable())
	}
	// Restart clears maintenance: SMF tries again (and the command fails
	// again).
	n.must(t, "RestartContainer", h.RestartContainer, hostapi.RestartInput{Sandbox: s, Container: "crashy"})
	_, err = n.run(t, h.RestartContainer, hostapi.RestartInput{Sandbox: s, Container: "nosuch"})
	if ae := appError(t, err); ae.Type() != "NotFound" || ae.NonRetryable() {
		t.Errorf("restart of a missing container: %v (type %s)", err, ae.Type())
	}
	n.deprovision(t, s)
	wantNothingLeft(t, n)
}

func TestInvalidRequestsAreNotRetryable(t *testing.T) {
	n := newNode(t)
	s := sandbox("web", "127.10.4.2")

	bad := s
	bad.IP = "not-an-ip"
	_, err := n.run(t, n.host.ConfigureZone, bad)
	if ae := appError(t, err); ae.Type() != "Invalid" || !ae.NonRetryable() || !strings.Contains(err.Error(), `pod IP "not-an-ip"`) {
		t.Errorf("ConfigureZone with a bad IP: %v", err)
	}

	n.must(t, "CreateVNIC", n.host.CreateVNIC, s)
	n.sim.Run(t, "fault", "fail-next", "zonecfg", "1", "--stderr", "On line 5:\ncapped-memory: invalid value '256M'", "--exit", "1")
	_, err = n.run(t, n.host.ConfigureZone, s)
	ae := appError(t, err)
	msg := err.Error()
	if ae.Type() != "Invalid" || !ae.NonRetryable() {
		t.Errorf("ConfigureZone refused by zonecfg: %v (type %s, non-retryable %v)", err, ae.Type(), ae.NonRetryable())
	}
	for _, want := range []string{"configure the zone", s.ZoneName(), "attempt 1", "zonecfg -z " + s.ZoneName() + " -f -", "invalid value '256M'"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error message %q does not say %q", msg, want)
		}
	}
	n.must(t, "ConfigureZone once the fault is gone", n.host.ConfigureZone, s)

	// A transient failure is retryable, and the retry succeeds.
	n.sim.Run(t, "fault", "fail-next", "zfs create", "1")
	_, err = n.run(t, n.host.CreateDatasets, s)
	if ae := appError(t, err); ae.Type() != "Transient" || ae.NonRetryable() || !strings.Contains(err.Error(), "Resource temporarily unavailable") {
		t.Errorf("CreateDatasets with a transient zfs failure: %v (type %s)", err, ae.Type())
	}
	n.must(t, "CreateDatasets retried", n.host.CreateDatasets, s)

	// A VNIC of the pod's name over another link is not ours.
	other := sandbox("other", "127.10.4.3")
	if err := n.ops.Host.Dladm().CreateVNIC(t.Context(), illumos.VNICSpec{Name: other.VNICName(), Over: "net0"}); err != nil {
		t.Fatal(err)
	}
	_, err = n.run(t, n.host.CreateVNIC, other)
	if ae := appError(t, err); ae.Type() != "Conflict" || !ae.NonRetryable() || !strings.Contains(err.Error(), "over net0") {
		t.Errorf("CreateVNIC over a VNIC on another link: %v", err)
	}
	if err := n.ops.Host.Dladm().DeleteVNIC(t.Context(), other.VNICName()); err != nil {
		t.Fatal(err)
	}

	n.deprovision(t, s)
	wantNothingLeft(t, n)
}

func TestInstallLeftIncompleteIsRecovered(t *testing.T) {
	n := newNode(t)
	s := sandbox("web", "127.10.5.2", hostapi.ContainerSpec{Name: "sleeper", Argv: []string{"sleep", "1000"}})
	for _, step := range []any{n.host.CreateDatasets, n.host.CreateVNIC, n.host.ConfigureZone} {
		n.must(t, "provision", step, s)
	}
	n.sim.Run(t, "fault", "fail-next", "zoneadm install", "1", "--brand-exit", "255")
	_, err := n.run(t, n.host.InstallZone, s)
	ae := appError(t, err)
	if ae.NonRetryable() || !strings.Contains(err.Error(), "install") || !strings.Contains(err.Error(), "brand installer failed") {
		t.Errorf("InstallZone with a failing brand: %v (type %s)", err, ae.Type())
	}
	if obs := n.observe(t, s); obs.ZoneState != "incomplete" {
		t.Fatalf("after the failed install: %+v", obs)
	}
	n.must(t, "InstallZone again", n.host.InstallZone, s)
	if obs := n.observe(t, s); obs.ZoneState != "installed" {
		t.Fatalf("after the second install: %+v", obs)
	}
	// A brand refusing its arguments (usage, exit 253) is invalid.
	n.must(t, "UninstallZone", n.host.UninstallZone, s)
	n.sim.Run(t, "fault", "fail-next", "zoneadm install", "1", "--brand-exit", "253")
	_, err = n.run(t, n.host.InstallZone, s)
	if ae := appError(t, err); ae.Type() != "Invalid" || !ae.NonRetryable() || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("InstallZone with a brand usage failure: %v (type %s)", err, ae.Type())
	}
	if obs := n.observe(t, s); obs.ZoneState != "configured" {
		t.Fatalf("after the refused install: %+v", obs)
	}

	n.must(t, "InstallZone", n.host.InstallZone, s)
	n.must(t, "BootZone", n.host.BootZone, s)
	n.must(t, "ConfigureNetwork", n.host.ConfigureNetwork, s)
	n.must(t, "StartContainers", n.host.StartContainers, s)
	n.must(t, "WaitContainersOnline", n.host.WaitContainersOnline, s)
	// Deprovision straight from running: halt, uninstall, delete.
	n.deprovision(t, s)
	wantNothingLeft(t, n)
}

func TestConfigureZoneReplacesAStaleConfiguration(t *testing.T) {
	n := newNode(t)
	s := sandbox("web", "127.10.6.2")
	n.must(t, "CreateVNIC", n.host.CreateVNIC, s)
	n.must(t, "ConfigureZone", n.host.ConfigureZone, s)
	// The same pod with other caps (an earlier attempt saw other limits):
	// a configured zone is reconfigured.
	s2 := s
	s2.MilliCPU, s2.MemoryBytes = 2000, 1<<30
	n.must(t, "ConfigureZone with other caps", n.host.ConfigureZone, s2)
	info, err := n.ops.Host.Zonecfg().Info(t.Context(), s.ZoneName())
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.CPUCap != 2 || info.Config.Memory == nil || info.Config.Memory.Physical != 1<<30 {
		t.Errorf("after reconfiguring: %+v", info.Config)
	}
	// Installed, it is no longer changed: a Conflict.
	n.must(t, "CreateDatasets", n.host.CreateDatasets, s2)
	n.must(t, "InstallZone", n.host.InstallZone, s2)
	_, err = n.run(t, n.host.ConfigureZone, s)
	if ae := appError(t, err); ae.Type() != "Conflict" || !ae.NonRetryable() || !strings.Contains(err.Error(), "capped-cpu") {
		t.Errorf("ConfigureZone of an installed zone with other caps: %v", err)
	}
	n.must(t, "ConfigureZone of the installed zone as it is", n.host.ConfigureZone, s2)
	n.deprovision(t, s2)
	wantNothingLeft(t, n)
}

func TestBhyveAndLxConfigurations(t *testing.T) {
	n := newNode(t)
	vm := sandbox("vm", "127.10.7.2")
	vm.Brand, vm.MilliCPU, vm.MemoryBytes = "bhyve", 1500, 2<<30
	n.must(t, "ConfigureZone bhyve", n.host.ConfigureZone, vm)
	info, err := n.ops.Host.Zonecfg().Info(t.Context(), vm.ZoneName())
	if err != nil {
		t.Fatal(err)
	}
	if b := info.Config.Bhyve; b == nil || b.VCPUs != 2 || b.RAM != 2<<30 || info.Config.CPUCap != 0 || info.Config.Memory != nil {
		t.Errorf("bhyve config %+v, bhyve %+v", info.Config, info.Config.Bhyve)
	}
	n.must(t, "ConfigureZone bhyve again", n.host.ConfigureZone, vm)
	n.must(t, "InstallZone bhyve", n.host.InstallZone, vm)

	lx := sandbox("lx", "127.10.7.3")
	lx.Brand = "lx"
	n.must(t, "CreateDatasets lx", n.host.CreateDatasets, lx)
	n.must(t, "ConfigureZone lx", n.host.ConfigureZone, lx)
	n.must(t, "InstallZone lx without a catalog image", n.host.InstallZone, lx)
	for _, s := range []hostapi.PodSandbox{vm, lx} {
		n.deprovision(t, s)
	}
	wantNothingLeft(t, n)
}

func TestInstallWaitsForASlotAndHeartbeats(t *testing.T) {
	n := newNode(t)
	n.ops.Installs = make(chan struct{}, 1)
	var mu sync.Mutex
	var beats []string
	n.env.SetOnActivityHeartbeatListener(func(info *activity.Info, details converter.EncodedValues) {
		var d string
		_ = details.Get(&d)
		mu.Lock()
		beats = append(beats, info.ActivityType.Name+": "+d)
		mu.Unlock()
	})
	s := sandbox("slow", "127.10.8.2")
	for _, step := range []any{n.host.CreateDatasets, n.host.CreateVNIC, n.host.ConfigureZone} {
		n.must(t, "provision", step, s)
	}
	n.ops.Installs <- struct{}{} // another install holds the only slot
	done := make(chan error, 1)
	go func() {
		_, err := n.env.ExecuteActivity(n.host.InstallZone, s)
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	if z, err := n.ops.Host.Zoneadm().Get(t.Context(), s.ZoneName()); err != nil || z.State != illumos.ZoneConfigured {
		t.Errorf("the zone installed while no slot was free: %+v, %v", z, err)
	}
	<-n.ops.Installs
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("InstallZone: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("InstallZone did not finish once the slot was free")
	}
	if len(n.ops.Installs) != 0 {
		t.Errorf("InstallZone kept its slot")
	}
	mu.Lock()
	got := append([]string(nil), beats...)
	mu.Unlock()
	if len(got) == 0 || !strings.HasPrefix(got[0], "InstallZone: waiting for an install slot for "+s.ZoneName()) {
		t.Errorf("heartbeats %q", got)
	}
	n.deprovision(t, s)
}
