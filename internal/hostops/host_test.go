package hostops_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/progress"
	"github.com/zonewright/zonewright/internal/simtest"
)

// The host library is called directly here, as the agent calls it: no
// Temporal. The host activities' tests (activities/host) run every
// operation on the simulator through the SDK's activity environment.

func TestMain(m *testing.M) { os.Exit(simtest.Main(m.Run)) }

func newHost(t *testing.T) *hostops.Host {
	t.Helper()
	h, _ := newHostOn(t)
	return h
}

// newHostOn is newHost with the simulated node it runs on.
func newHostOn(t *testing.T) (*hostops.Host, *simtest.Node) {
	t.Helper()
	sim := simtest.NewNode(t, "node1")
	h := illumos.Host{Runner: &illumos.Runner{BinDir: sim.Bin, Timeout: time.Minute}}
	if err := h.ZFS().Create(t.Context(), "tank/zonewright/zones", map[string]string{"mountpoint": "/zonewright/zones"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Dladm().CreateEtherstub(t.Context(), "zwstub0"); err != nil {
		t.Fatal(err)
	}
	return &hostops.Host{Host: h, Node: "node1", Etherstub: "zwstub0",
		ZonesDataset: "tank/zonewright/zones", ZonesPath: "/zonewright/zones", ZonesDir: filepath.Join(sim.Root, "fs", "zonewright", "zones"),
		HeartbeatInterval: 20 * time.Millisecond}, sim
}

func TestErrorsSayWhatFailedAndAreTyped(t *testing.T) {
	h := newHost(t)
	ctx := t.Context()
	s := hostapi.PodSandbox{Namespace: "default", Name: "web", UID: "uid-web", IP: "not-an-ip", PrefixLen: 24}

	err := h.ConfigureZone(ctx, s)
	var he *hostops.Error
	var invalid *hostops.InvalidError
	if !errors.As(err, &he) || !errors.As(err, &invalid) {
		t.Fatalf("ConfigureZone with a bad IP: %v (%T); want an *Error with an *InvalidError", err, err)
	}
	for _, want := range []string{"configure the zone", "pod default/web", s.ZoneName(), "node node1", `pod IP "not-an-ip"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}

	// A VNIC of the pod's name over another link is in the way.
	if err := h.Host.Dladm().CreateVNIC(ctx, illumos.VNICSpec{Name: s.VNICName(), Over: "net0"}); err != nil {
		t.Fatal(err)
	}
	var conflict *hostops.ConflictError
	if err := h.CreateVNIC(ctx, s); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "over net0") {
		t.Errorf("CreateVNIC over another link's VNIC: %v (%T)", err, err)
	}

	// A command's failure keeps its kind.
	if err := h.BootZone(ctx, s); illumos.KindOf(err) != illumos.KindNotFound || !errors.As(err, &he) {
		t.Errorf("BootZone of a zone never configured: %v (kind %s)", err, illumos.KindOf(err))
	}
}

func TestProgressGoesToTheCallersCallback(t *testing.T) {
	h := newHost(t)
	h.Installs = make(chan struct{}, 1)
	s := hostapi.PodSandbox{Namespace: "default", Name: "slow", UID: "uid-slow", IP: "127.10.8.2", PrefixLen: 24}
	ctx := t.Context()
	for _, step := range []func(context.Context, hostapi.PodSandbox) error{h.CreateDatasets, h.CreateVNIC, h.ConfigureZone} {
		if err := step(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var reports []string
	pctx := progress.With(ctx, func(details any) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, details.(string))
	})
	h.Installs <- struct{}{} // another install holds the only slot
	done := make(chan error, 1)
	go func() { done <- h.InstallZone(pctx, s) }()
	time.Sleep(200 * time.Millisecond)
	<-h.Installs
	if err := <-done; err != nil {
		t.Fatalf("InstallZone: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) == 0 || reports[0] != "waiting for an install slot for "+s.ZoneName() {
		t.Errorf("progress reports %q", reports)
	}
	// Without a callback nothing is reported, and nothing breaks.
	if err := h.UninstallZone(ctx, s); err != nil {
		t.Fatal(err)
	}
}
