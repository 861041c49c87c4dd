package host_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/hostops"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/simtest"
	"github.com/zonewright/zonewright/internal/supervisor"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/syncbuf"
)

// The host activities run against the real simulator binary (simtest
// builds it once) through the Temporal SDK's activity test environment.
// Each test gets its own simulated node.

func TestMain(m *testing.M) { os.Exit(simtest.Main(m.Run)) }

const (
	zonesDataset   = "tank/zonewright/zones"
	zonesPath      = "/zonewright/zones"
	imagesDataset  = "tank/zonewright/images"
	volumesDataset = "tank/zonewright/volumes"
	etherstub      = "zwstub0"
)

// node is one simulated node with its host activities.
type node struct {
	log  syncbuf.Buffer // what the activities logged
	sim  *simtest.Node
	ops  *hostops.Host // the host library the activities run over
	host *hostacts.Activities
	env  *testsuite.TestActivityEnvironment
}

// newNode installs a fresh simulated node prepared the way the agent
// prepares a host: the zones dataset and the etherstub exist.
func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{sim: simtest.NewNode(t, "node1")}
	h := illumos.Host{Runner: &illumos.Runner{BinDir: n.sim.Bin, Timeout: time.Minute}}
	ctx := t.Context()
	if err := h.ZFS().Create(ctx, zonesDataset, map[string]string{"mountpoint": zonesPath}); err != nil {
		t.Fatal(err)
	}
	for _, ds := range []string{imagesDataset, volumesDataset} {
		if err := h.ZFS().Create(ctx, ds, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Dladm().CreateEtherstub(ctx, etherstub); err != nil {
		t.Fatal(err)
	}
	n.ops = &hostops.Host{
		Host:           h,
		Node:           "node1",
		Etherstub:      etherstub,
		ZonesDataset:   zonesDataset,
		ZonesPath:      zonesPath,
		ImagesDataset:  imagesDataset,
		VolumesDataset: volumesDataset,
		ZonesDir:       filepath.Join(n.sim.Root, "fs", zonesPath),
		ImageDir:       filepath.Join(n.sim.Root, "fs/var/zonewright/images"),
		ZvolDir:        filepath.Join(n.sim.Root, "fs/dev/zvol/rdsk"),
		Installs:       make(chan struct{}, 2),
		Log:            slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), &n.log), nil)),
		PollInterval:   100 * time.Millisecond,
	}
	n.host = &hostacts.Activities{Ops: n.ops}
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))))
	n.env = suite.NewTestActivityEnvironment()
	n.env.RegisterActivity(n.host)
	return n
}

// run executes one activity through the test environment.
func (n *node) run(t *testing.T, fn any, args ...any) (converter.EncodedValue, error) {
	t.Helper()
	return n.env.ExecuteActivity(fn, args...)
}

// must runs an activity that must succeed, twice when twice is set (the
// second run must find the work done and succeed too).
func (n *node) must(t *testing.T, what string, fn any, args ...any) converter.EncodedValue {
	t.Helper()
	v, err := n.run(t, fn, args...)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// twice runs an activity twice; both runs must succeed.
func (n *node) twice(t *testing.T, what string, fn any, args ...any) {
	t.Helper()
	n.must(t, what, fn, args...)
	n.must(t, what+" (again)", fn, args...)
}

// freePort is a TCP port nothing listens on at ip right now.
func freePort(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func sandbox(name, ip string, containers ...hostapi.ContainerSpec) hostapi.PodSandbox {
	return hostapi.PodSandbox{
		Namespace: "default", Name: name, UID: "uid-" + name, Brand: "sparse", Image: "omnios-r151054",
		MilliCPU: 500, MemoryBytes: 256<<20 + 1,
		IP: ip, PrefixLen: 24, Gateway: strings.TrimSuffix(ip, ip[strings.LastIndexByte(ip, '.'):]) + ".1",
		Containers: containers,
	}
}

// provision runs every provisioning step in order, each twice.
func (n *node) provision(t *testing.T, s hostapi.PodSandbox) {
	t.Helper()
	h := n.host
	n.twice(t, "CreateDatasets", h.CreateDatasets, s)
	n.twice(t, "CreateVNIC", h.CreateVNIC, s)
	n.twice(t, "ConfigureZone", h.ConfigureZone, s)
	n.twice(t, "InstallZone", h.InstallZone, s)
	n.twice(t, "BootZone", h.BootZone, s)
	n.twice(t, "ConfigureNetwork", h.ConfigureNetwork, s)
	n.twice(t, "StartContainers", h.StartContainers, s)
	n.must(t, "WaitContainersOnline", h.WaitContainersOnline, s)
}

// deprovision undoes provision in reverse, each step twice.
func (n *node) deprovision(t *testing.T, s hostapi.PodSandbox) {
	t.Helper()
	h := n.host
	n.twice(t, "StopContainers", h.StopContainers, s)
	n.twice(t, "HaltZone", h.HaltZone, s)
	n.twice(t, "UninstallZone", h.UninstallZone, s)
	n.twice(t, "DeleteZoneConfig", h.DeleteZoneConfig, s)
	n.twice(t, "DeleteVNIC", h.DeleteVNIC, s)
	n.twice(t, "DestroyDatasets", h.DestroyDatasets, s)
}

// observation is what the node's supervisor sees of one pod.
type observation struct {
	ZoneState  string
	Containers map[string]string // container → SMF state
}

// observe lists the node as its supervisor does (zoneadm list, svcs -Z).
func (n *node) observe(t *testing.T, s hostapi.PodSandbox) observation {
	t.Helper()
	h := supervisor.IllumosHost{Host: n.ops.Host}
	zones, err := h.Zones(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := h.Services(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	obs := observation{ZoneState: zones[s.ZoneName()], Containers: map[string]string{}}
	for _, c := range s.Containers {
		if st, ok := svcs[s.ZoneName()][hostops.ContainerFMRI(c.Name)]; ok {
			obs.Containers[c.Name] = st.State
		}
	}
	return obs
}

// probe runs a probe as the node's supervisor does.
func (n *node) probe(t *testing.T, s hostapi.PodSandbox, p model.Probe) supervisor.Result {
	t.Helper()
	res, err := supervisor.RunProbe(context.Background(), supervisor.IllumosHost{Host: n.ops.Host}, s.ZoneName(), "", s.IP, nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// appError returns the ApplicationError an activity failed with.
func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an ApplicationError", err, err)
	}
	return ae
}
