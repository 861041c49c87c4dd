package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/cgroups"
	"github.com/zonewright/zonewright/internal/simtest"
)

// The scale section runs whole at a small size, on a real stack: every pod
// Ready at every step, the stream's pods Running and announced to every
// watcher, the drained node's pods running on the other node, the finite
// resources fitted, nothing left running once the stack stops, every pod
// adopted when it starts again, and none touched by a kill -9 of its
// control plane. A
// check that it still runs, not a measurement: make bench measures.
func TestTheScaleSectionRunsSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole stack")
	}
	bin := t.TempDir()
	if err := simtest.BuildBinaries(bin, "zonewright", "illumos-sim"); err != nil {
		t.Fatal(err)
	}
	o := options{binDir: bin, scale: 6, scaleNodes: 2, scaleSteps: 2, scaleWindow: 2 * time.Second, scaleSettle: time.Second,
		scaleProbePeriod: 2 * time.Second, scaleStreamRates: []float64{2}, scaleStreamFor: 3 * time.Second, scaleWatchers: 3, scaleDrain: true,
		scaleRestart: true, scaleTemporalPG: true, scaleShards: 2, scaleTaskWorkers: 16, scaleCPUSplit: true}
	own, cgroupErr := cgroups.Own()
	splits := os.Geteuid() == 0 && cgroupErr == nil && !own.Unified
	res, err := scale(t.Context(), o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	res.print(&report)
	t.Log(report.String())
	// The section itself checks that the agents are in the nodes' cgroup
	// (it fails without devnodes' CPUGroups).
	if splits != strings.Contains(res.CPU, "cgroups") {
		t.Errorf("CPU %q: want the nodes in a cgroup of their own: %v", res.CPU, splits)
	}
	if _, err := os.Stat(filepath.Join(own.CPU, fmt.Sprintf("zwbench-%d", os.Getpid()))); splits && err == nil {
		t.Error("the cgroups of the split are left")
	}
	if len(res.Steps) != 3 || res.Steps[2].PodsReady != 6 {
		t.Errorf("steps %+v: want the empty stack and two steps, 6 pods Ready at the last", res.Steps)
	}
	// Creating a pod runs the simulator's commands (zonecfg, zoneadm,
	// zlogin, …), counted apart from the agents that run them.
	for _, st := range res.Steps[1:] {
		if c := st.CreationCPUMsPerPodByGroup; c[commandsLabel] <= 0 || c[agentsLabel] <= 0 {
			t.Errorf("step of %d pods: creation CPU by part %v: want the agents' commands apart from the agents, both above 0", st.Pods, c)
		}
	}
	if res.PodsPerNodeMin+res.PodsPerNodeMax == 0 {
		t.Errorf("pods per node %d–%d: want the pods counted on their nodes", res.PodsPerNodeMin, res.PodsPerNodeMax)
	}
	if len(res.Headroom) != 5 || res.Headroom[2].Fit.Slope <= 0 {
		t.Errorf("headroom %+v: want five resources, threads growing with pods", res.Headroom)
	}
	if res.Stream == nil || len(res.Stream.Rates) != 1 {
		t.Fatalf("stream %+v: want one rate", res.Stream)
	}
	r := res.Stream.Rates[0]
	if r.Pods != 6 || r.NotRunning != 0 || r.Errors != 0 {
		t.Errorf("stream: %d pods, %d not running, %d API errors (%s): want 6, 0, 0", r.Pods, r.NotRunning, r.Errors, r.FirstError)
	}
	if r.WatchMissed != 0 || r.WatchDelivery.Max <= 0 {
		t.Errorf("watchers missed %d events, delivery %+v: want every event delivered", r.WatchMissed, r.WatchDelivery)
	}
	if r.List.Max <= 0 || r.Get.Max <= 0 || r.Update.Max <= 0 || r.Create.Max <= 0 || r.ListPages < 1 {
		t.Errorf("API under the stream: list %+v (%d pages), get %+v, update %+v, create %+v: want each measured", r.List, r.ListPages, r.Get, r.Update, r.Create)
	}
	if d := res.Drain; d == nil || d.Pods == 0 || d.Moved != d.Pods {
		t.Errorf("drain %+v: want every pod of the node running elsewhere", d)
	}
	if res.Stop == nil || res.Stop.ProcessesLeft != 0 {
		t.Errorf("stop %+v: want no process of the stack left", res.Stop)
	}
	r2 := res.Restart
	if r2 == nil || r2.Error != "" || r2.ZonesReinstalled != 0 || r2.PodsReplaced != 0 || r2.Memory[serveLabel].PSS == 0 || r2.Memory[temporalLabel].PSS == 0 {
		t.Fatalf("restart %+v: want every pod adopted, and serve's and Temporal's memory read", r2)
	}
	if k := r2.Kill; k == nil || k.LifecyclesUnanswered != 0 || k.ZonesRebooted != 0 || k.PodsReplaced != 0 || k.NewPodRunningSeconds <= 0 {
		t.Errorf("kill %+v: want every lifecycle answering, no zone booted again, no pod replaced, a new pod running", k)
	}
}

// A watcher that never saw a pod's ADDED event counts as a missed event,
// so a watch that drops changes cannot pass the stream's check.
func TestAWatcherThatMissesAnEventIsCounted(t *testing.T) {
	sent, seen := newStamps(), newStamps()
	at := time.Now()
	sent.set("stream0-0", at)
	sent.set("stream0-1", at)
	seen.set("stream0-0", at.Add(30*time.Millisecond))
	ws := &watchers{cancel: func() {}, seen: []*stamps{seen}}
	d, missed := ws.delivery([]string{"stream0-0", "stream0-1"}, sent, 0)
	if missed != 1 || d.Max != 30 {
		t.Errorf("delivery %+v, %d missed: want 30 ms and 1 missed", d, missed)
	}
}
