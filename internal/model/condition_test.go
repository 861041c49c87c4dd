package model

import (
	"testing"
	"time"
)

func TestSetConditionMovesTheTransitionTimeOnlyOnAChange(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(time.Minute), t0.Add(2*time.Minute)
	var conds []PodCondition
	if !SetCondition(&conds, PodCondition{Type: PodReady, Status: ConditionFalse}, t0) || !conds[0].LastTransitionTime.Equal(t0) {
		t.Fatalf("a new condition: %+v", conds)
	}
	if !SetCondition(&conds, PodCondition{Type: PodReady, Status: ConditionFalse, Reason: "Starting", LastTransitionTime: &t1}, t1) {
		t.Fatal("a new reason is a change")
	}
	if !conds[0].LastTransitionTime.Equal(t0) {
		t.Fatalf("the same status kept moving its transition time: %v", conds[0].LastTransitionTime)
	}
	if SetCondition(&conds, PodCondition{Type: PodReady, Status: ConditionFalse, Reason: "Starting"}, t2) {
		t.Fatal("setting the same condition again reported a change")
	}
	SetCondition(&conds, PodCondition{Type: PodReady, Status: ConditionTrue}, t2)
	if !conds[0].LastTransitionTime.Equal(t2) || len(conds) != 1 {
		t.Fatalf("a status change must move the transition time: %+v", conds)
	}
	var nodes []NodeCondition
	SetCondition(&nodes, NodeCondition{Type: NodeReady, Status: ConditionTrue, LastHeartbeatTime: &t0}, t0)
	if !SetCondition(&nodes, NodeCondition{Type: NodeReady, Status: ConditionTrue, LastHeartbeatTime: &t1}, t1) || !nodes[0].LastTransitionTime.Equal(t0) {
		t.Fatalf("a heartbeat is a change that keeps the transition time: %+v", nodes)
	}
}
