package main

import (
	"bytes"
	"strings"
	"testing"
)

// The report says which target holds: the burst against the no-op
// ceiling, and against the machine ceiling beside it.
func TestReportSaysWhichBurstTargetHolds(t *testing.T) {
	r := &Results{BurstPods: 60, BurstThroughput: 6.9, Ceiling: 43.8, Ratio: 6.9 / 43.8, CeilingShape: podShape,
		HostFloor:      &HostFloor{Pods: 60, Nodes: 3, PodsPerSecond: 11, CommandsPerPod: 13.3, CommandsByName: map[string]float64{"zoneadm boot": 1}},
		MachineCeiling: machineCeiling(43.8, 11), PeakRSS: map[string]int64{}}
	r.MachineRatio = r.BurstThroughput / r.MachineCeiling
	var out bytes.Buffer
	r.print(&out)
	for _, want := range []string{
		"burst / ceiling         16% (target ≥ 70%: missed)",
		"machine ceiling         8.8 pods/s",
		"burst / machine ceiling 78% (the same target against it: met)",
		"zoneadm boot",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report does not say %q:\n%s", want, out.String())
		}
	}
}
