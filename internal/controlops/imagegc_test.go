package controlops_test

import (
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
)

// A node's collection is told on the Node: a Normal event for each image
// removed, and the kubelet's Warning FreeDiskSpaceFailed when what was
// removed leaves the usage at or above the low threshold (the unused
// images were not enough, or a removal was refused). It fails with
// RecordImageGC's early return below the low threshold dropped (a
// Warning for a collection that was enough) or its Warning dropped.
func TestRecordImageGCWarnsWhenTheUnusedImagesAreNotEnough(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	if err := st.Nodes().Create(ctx, &model.Node{Metadata: model.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	a := &controlops.Images{Store: st}
	plan := controlapi.NodeImageGC{Node: "n1", Used: 90, Size: 100, LowThreshold: 80,
		Remove: []controlapi.ImageGCCandidate{{Image: "old", Bytes: 5, LastUsed: time.Now()}, {Image: "older", Bytes: 6, LastUsed: time.Now()}}}

	// Both removed: 79 of 100, below the low threshold.
	if err := a.RecordImageGC(ctx, controlapi.ImageGCReport{Plan: plan, Removed: []string{"old", "older"}}); err != nil {
		t.Fatal(err)
	}
	if got := nodeEvents(t, st, controlops.ReasonImageGarbageCollected); got != 2 {
		t.Errorf("%d %s events, want one per image removed", got, controlops.ReasonImageGarbageCollected)
	}
	if got := nodeEvents(t, st, controlops.ReasonFreeDiskSpaceFailed); got != 0 {
		t.Errorf("a collection that got below the low threshold warned %d times", got)
	}
	// One refused: 84 of 100 is not below 80.
	if err := a.RecordImageGC(ctx, controlapi.ImageGCReport{Plan: plan, Removed: []string{"older"}}); err != nil {
		t.Fatal(err)
	}
	if got := nodeEvents(t, st, controlops.ReasonFreeDiskSpaceFailed); got != 1 {
		t.Errorf("%d %s warnings, want 1 when the usage stays at or above the low threshold", got, controlops.ReasonFreeDiskSpaceFailed)
	}
}
