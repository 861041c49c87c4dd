package devstack

import (
	"testing"

	"go.temporal.io/server/common/dynamicconfig"
)

// TaskWorkers bounds history's timer and transfer task schedulers (the
// visibility one at half); unset, Temporal keeps its own default.
func TestTaskWorkersBoundHistorysTaskSchedulers(t *testing.T) {
	keys := map[dynamicconfig.Key]int{
		dynamicconfig.TimerProcessorSchedulerWorkerCount.Key():      32,
		dynamicconfig.TransferProcessorSchedulerWorkerCount.Key():   32,
		dynamicconfig.VisibilityProcessorSchedulerWorkerCount.Key(): 16,
	}
	bounded, unset := dynamicConfig(32), dynamicConfig(0)
	for k, want := range keys {
		if got, ok := bounded[k]; !ok || got != want {
			t.Errorf("TaskWorkers 32: %s = %v, want %d", k, got, want)
		}
		if got, ok := unset[k]; ok {
			t.Errorf("TaskWorkers 0: %s = %v, want Temporal's default", k, got)
		}
	}
}
