package activities_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/zonewright/zonewright/activities"
	"github.com/zonewright/zonewright/internal/illumos"
)

// The host activities run against the real simulator binary, built once
// here, through the Temporal SDK's activity test environment. Each test
// gets its own simulated node.

var (
	simBin      string
	simBuildErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "activities-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	simBin = filepath.Join(dir, "illumos-sim")
	build := exec.Command("go", "build", "-o", simBin, "github.com/zonewright/zonewright/cmd/illumos-sim")
	if out, err := build.CombinedOutput(); err != nil {
		simBuildErr = fmt.Errorf("go build illumos-sim: %v\n%s", err, out)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	zonesDataset = "tank/zonewright/zones"
	zonesPath    = "/zonewright/zones"
	etherstub    = "zwstub0"
)

// node is one simulated node with its host activities.
type node struct {
	log  syncBuffer // what the activities logged
	root string
	host *activities.Host
	env  *testsuite.TestActivityEnvironment
}

// newNode installs a fresh simulated node prepared the way the agent
// prepares a host: the zones dataset and the etherstub exist.
func newNode(t *testing.T) *node {
	t.Helper()
	if simBuildErr != nil {
		t.Fatal(simBuildErr)
	}
	base := t.TempDir()
	n := &node{root: filepath.Join(base, "node1")}
	bin := filepath.Join(base, "bin")
	if out, err := exec.Command(simBin, "install", bin, "--root", n.root).CombinedOutput(); err != nil {
		t.Fatalf("illumos-sim install: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(simBin, "stop-all", "--root", n.root).CombinedOutput(); err != nil {
			t.Logf("illumos-sim stop-all: %v\n%s", err, out)
		}
	})
	h := illumos.Host{Runner: &illumos.Runner{BinDir: bin, Timeout: time.Minute}}
	ctx := t.Context()
	if err := h.ZFS().Create(ctx, zonesDataset, map[string]string{"mountpoint": zonesPath}); err != nil {
		t.Fatal(err)
	}
	if err := h.Dladm().CreateEtherstub(ctx, etherstub); err != nil {
		t.Fatal(err)
	}
	n.host = &activities.Host{
		Host:         h,
		Node:         "node1",
		Etherstub:    etherstub,
		ZonesDataset: zonesDataset,
		ZonesPath:    zonesPath,
		Installs:     make(chan struct{}, 2),
		Log:          slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), &n.log), nil)),
		PollInterval: 100 * time.Millisecond,
	}
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

// simState is the part of `illumos-sim state` the tests look at.
type simState struct {
	Zones []struct {
		Name     string `json:"name"`
		State    string `json:"state"`
		Services []struct {
			FMRI string `json:"fmri"`
		} `json:"services"`
	} `json:"zones"`
	Links []struct {
		Name  string `json:"name"`
		Class string `json:"class"`
	} `json:"links"`
	Datasets []struct {
		Name  string            `json:"name"`
		Props map[string]string `json:"props"`
	} `json:"datasets"`
}

func (n *node) state(t *testing.T) simState {
	t.Helper()
	out, err := exec.Command(simBin, "state", "--root", n.root).Output()
	if err != nil {
		t.Fatalf("illumos-sim state: %v", err)
	}
	var st simState
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("illumos-sim state: %v", err)
	}
	return st
}

func (n *node) sim(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(simBin, append(args, "--root", n.root)...).CombinedOutput(); err != nil {
		t.Fatalf("illumos-sim %v: %v\n%s", args, err, out)
	}
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

func sandbox(name, ip string, containers ...activities.ContainerSpec) activities.PodSandbox {
	return activities.PodSandbox{
		Namespace: "default", Name: name, UID: "uid-" + name, Brand: "sparse", Image: "omnios-r151054",
		MilliCPU: 500, MemoryBytes: 256<<20 + 1,
		IP: ip, PrefixLen: 24, Gateway: strings.TrimSuffix(ip, ip[strings.LastIndexByte(ip, '.'):]) + ".1",
		Containers: containers,
	}
}

// provision runs every provisioning step in order, each twice.
func (n *node) provision(t *testing.T, s activities.PodSandbox) {
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
func (n *node) deprovision(t *testing.T, s activities.PodSandbox) {
	t.Helper()
	h := n.host
	n.twice(t, "StopContainers", h.StopContainers, s)
	n.twice(t, "HaltZone", h.HaltZone, s)
	n.twice(t, "UninstallZone", h.UninstallZone, s)
	n.twice(t, "DeleteZoneConfig", h.DeleteZoneConfig, s)
	n.twice(t, "DeleteVNIC", h.DeleteVNIC, s)
	n.twice(t, "DestroyDatasets", h.DestroyDatasets, s)
}

func (n *node) observe(t *testing.T, s activities.PodSandbox) activities.PodObservation {
	t.Helper()
	var obs activities.PodObservation
	if err := n.must(t, "ObservePod", n.host.ObservePod, s).Get(&obs); err != nil {
		t.Fatal(err)
	}
	return obs
}

func (n *node) probe(t *testing.T, s activities.PodSandbox, container string, p activities.ProbeInput) activities.ProbeResult {
	t.Helper()
	p.Sandbox, p.Container = s, container
	var res activities.ProbeResult
	if err := n.must(t, "Probe", n.host.Probe, p).Get(&res); err != nil {
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

// syncBuffer is a log sink that tests read while activities write.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
