package workflows

import (
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
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
			r.RegisterWorkflowWithOptions(PodLifecycle, workflow.RegisterOptions{Name: PodWorkflowName})
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
