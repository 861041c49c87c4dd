package workflows

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	historypb "go.temporal.io/api/history/v1"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// Histories of real runs (recorded by the end-to-end tests with
// ZW_RECORD_HISTORIES=workflows/testdata/histories) must replay against
// today's code: a change that would break running workflows fails here and
// needs workflow.GetVersion.
func TestRecordedHistoriesReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/histories/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories in testdata/histories")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(PodLifecycle, workflow.RegisterOptions{Name: podcontract.WorkflowName})
			r.RegisterWorkflowWithOptions(ImageImport, workflow.RegisterOptions{Name: ImageImportWorkflowName})
			r.RegisterWorkflowWithOptions(ImagePull, workflow.RegisterOptions{Name: ImagePullWorkflowName})
			r.RegisterWorkflowWithOptions(ImageDelete, workflow.RegisterOptions{Name: ImageDeleteWorkflowName})
			r.RegisterWorkflowWithOptions(NodeHealth, workflow.RegisterOptions{Name: NodeHealthWorkflowName})
			r.RegisterWorkflowWithOptions(Deployment, workflow.RegisterOptions{Name: DeploymentWorkflowName})
			r.RegisterWorkflowWithOptions(Job, workflow.RegisterOptions{Name: JobWorkflowName})
			r.RegisterWorkflowWithOptions(ClaimSync, workflow.RegisterOptions{Name: ClaimWorkflowName})
			r.RegisterWorkflowWithOptions(SnapshotSync, workflow.RegisterOptions{Name: SnapshotWorkflowName})
			if err := r.ReplayWorkflowHistoryFromJSONFile(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)), f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}

// A run from before versionReportHighWater applied a report numbered below
// one it had applied already (a late delivery); its history must replay.
// The readiness-flips history is made so: its third report, which turns
// Ready back to False, is renumbered just below the second, as a late
// delivery would be. The rule of the time applied it all the same, so the
// history is one that rule could have recorded.
func TestALateReportAppliedBeforeTheHighWaterVersionStillReplays(t *testing.T) {
	b, err := os.ReadFile("testdata/histories/pod-readiness-flips.json")
	if err != nil {
		t.Fatal(err)
	}
	hist := &historypb.History{}
	if err := protojson.Unmarshal(b, hist); err != nil {
		t.Fatal(err)
	}
	var reports []*model.PodReport
	var data []*[]byte
	for _, e := range hist.Events {
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.SignalName == podcontract.SignalReport {
			p := a.Input.Payloads[0]
			r := &model.PodReport{}
			if err := json.Unmarshal(p.Data, r); err != nil {
				t.Fatal(err)
			}
			reports, data = append(reports, r), append(data, &p.Data)
		}
	}
	if len(reports) < 3 || !reports[1].Containers[0].Ready || reports[2].Containers[0].Ready {
		t.Fatalf("the history's reports are not ready=false, true, false: %+v", reports)
	}
	reports[2].Seq = reports[1].Seq - 1
	if *data[2], err = json.Marshal(reports[2]); err != nil {
		t.Fatal(err)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(PodLifecycle, workflow.RegisterOptions{Name: podcontract.WorkflowName})
	if err := r.ReplayWorkflowHistory(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)), hist); err != nil {
		t.Fatalf("replay with a late report: %v", err)
	}
}
