package e2e_test

import (
	"context"
	"os"
	"path/filepath"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

func listRequest(query string) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query}
}

// recordHistory writes a finished workflow's history where the replay test
// reads it, when ZW_RECORD_HISTORIES names that directory.
func (c *cluster) recordHistory(workflowID, file string) { c.recordRun(workflowID, "", file) }

// recordRun is recordHistory for one run of the workflow ("" the latest).
func (c *cluster) recordRun(workflowID, runID, file string) {
	dir := os.Getenv("ZW_RECORD_HISTORIES")
	if dir == "" {
		return
	}
	ctx := context.Background()
	iter := c.temporal.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	hist := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			c.t.Fatal(err)
		}
		hist.Events = append(hist.Events, ev)
	}
	b, err := protojson.Marshal(hist)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
		c.t.Fatal(err)
	}
}
