package hostops_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
)

// svcadm enable returns before svc.startd acts on it: a container just
// enabled still reads disabled, and the wait for it is no failure. One
// that stays disabled is.
func TestWaitContainersOnlineWaitsForAContainerJustEnabled(t *testing.T) {
	h := newHost(t)
	ctx := t.Context()
	s := hostops.PodSandbox{Namespace: "default", Name: "late", UID: "uid-late", IP: "127.10.9.2", PrefixLen: 24,
		Containers: []hostops.ContainerSpec{{Name: "app", Argv: []string{"sleep", "3600"}}}}
	for _, step := range []func(context.Context, hostops.PodSandbox) error{h.CreateDatasets, h.CreateVNIC, h.ConfigureZone,
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
func stopped(t *testing.T, h *hostops.Host, s hostops.PodSandbox) {
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
