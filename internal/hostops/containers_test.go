package hostops_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
)

// svcadm enable returns before svc.startd acts on it: a container just
// enabled still reads disabled, and the wait for it is no failure. One
// that stays disabled is.
func TestWaitContainersOnlineWaitsForAContainerJustEnabled(t *testing.T) {
	h := newHost(t)
	ctx := t.Context()
	s := hostapi.PodSandbox{Namespace: "default", Name: "late", UID: "uid-late", IP: "127.10.9.2", PrefixLen: 24,
		Containers: []hostapi.ContainerSpec{{Name: "app", Argv: []string{"sleep", "3600"}}}}
	for _, step := range []func(context.Context, hostapi.PodSandbox) error{h.CreateDatasets, h.CreateVNIC, h.ConfigureZone,
		h.InstallZone, h.BootZone, h.ConfigureNetwork, h.StartContainers, h.WaitContainersOnline} {
		if err := step(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = h.HaltZone(ctx, s) })

	stopped(t, h, s)
	enabled := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		enabled <- h.Host.Zone(s.ZoneName()).EnableService(ctx, hostops.ContainerFMRI("app"))
	}()
	if err := h.WaitContainersOnline(ctx, s); err != nil {
		t.Errorf("WaitContainersOnline while the container is being enabled: %v", err)
	}
	if err := <-enabled; err != nil {
		t.Fatal(err)
	}

	stopped(t, h, s)
	err := h.WaitContainersOnline(ctx, s)
	if illumos.KindOf(err) != illumos.KindWrongState || !strings.Contains(err.Error(), `container "app" is disabled (stopped)`) {
		t.Errorf("WaitContainersOnline of a stopped container: %v (kind %s), want it disabled", err, illumos.KindOf(err))
	}
}

// stopped stops the pod's containers and waits until their service reads
// disabled (svcadm disable returns before it is).
func stopped(t *testing.T, h *hostops.Host, s hostapi.PodSandbox) {
	t.Helper()
	if err := h.StopContainers(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	z := h.Host.Zone(s.ZoneName())
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		sts, err := z.Services(t.Context(), hostops.ContainerFMRI("app"))
		if err != nil {
			t.Fatal(err)
		}
		if len(sts) == 1 && sts[0].State == "disabled" {
			return
		}
	}
	t.Fatal("the container's service did not become disabled")
}

// StopContainer is kubelet's kill of a container that failed its liveness
// probe: it returns once the container has stopped (svcadm disable only
// asks), leaves the others running, and RestartContainer starts it again.
func TestStopContainerReturnsOnceItHasStopped(t *testing.T) {
	h := newHost(t)
	ctx := t.Context()
	s := hostapi.PodSandbox{Namespace: "default", Name: "kill", UID: "uid-kill", IP: "127.10.9.3", PrefixLen: 24,
		Containers: []hostapi.ContainerSpec{
			// It takes a second to stop, as a server finishing its requests does.
			{Name: "app", Argv: []string{"sh", "-c", "trap 'sleep 1; exit 0' TERM; while :; do sleep 0.1; done"}},
			{Name: "side", Argv: []string{"sleep", "3600"}}}}
	for _, step := range []func(context.Context, hostapi.PodSandbox) error{h.CreateDatasets, h.CreateVNIC, h.ConfigureZone,
		h.InstallZone, h.BootZone, h.ConfigureNetwork, h.StartContainers, h.WaitContainersOnline} {
		if err := step(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = h.HaltZone(ctx, s) })
	state := func(name string) illumos.ServiceStatus {
		sts, err := h.Host.Zone(s.ZoneName()).Services(ctx, hostops.ContainerFMRI(name))
		if err != nil || len(sts) != 1 {
			t.Fatalf("svcs %s: %v %v", name, sts, err)
		}
		return sts[0]
	}
	if err := h.StopContainer(ctx, hostapi.RestartInput{Sandbox: s, Container: "app"}); err != nil {
		t.Fatal(err)
	}
	if st := state("app"); st.State != "disabled" || st.Transitioning {
		t.Fatalf("StopContainer returned with the container %+v; want disabled", st)
	}
	if st := state("side"); st.State != "online" {
		t.Fatalf("stopping app stopped side too: %+v", st)
	}
	if _, err := h.RestartContainer(ctx, hostapi.RestartInput{Sandbox: s, Container: "app"}); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitContainersOnline(ctx, s); err != nil {
		t.Fatalf("the stopped container did not start again: %v", err)
	}
	gone := s
	gone.Name, gone.UID = "never-made", "uid-never-made"
	if err := h.StopContainer(ctx, hostapi.RestartInput{Sandbox: gone, Container: "app"}); err != nil {
		t.Fatalf("stopping a container whose zone is not there: %v; want nothing to do", err)
	}
}
