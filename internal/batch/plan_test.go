package batch

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestParallelismBoundsTheRunningPodsToTheEnd(t *testing.T) {
	spec := Spec{Parallelism: 2, Completions: 5, BackoffLimit: 6, Start: t0}
	var pods []Pod
	for step := 0; step < 20; step++ {
		plan := Compute(spec, pods, t0)
		if plan.Outcome.Type == "Complete" {
			if plan.Succeeded != 5 || len(pods) != 5 {
				t.Fatalf("complete with %d succeeded of %d pods; want 5 of 5", plan.Succeeded, len(pods))
			}
			return
		}
		if plan.Active+plan.Create > 2 {
			t.Fatalf("step %d: %d running and %d to create; parallelism is 2", step, plan.Active, plan.Create)
		}
		for range plan.Create {
			pods = append(pods, Pod{Name: fmt.Sprint(len(pods))})
		}
		// The oldest running pod succeeds.
		for i := range pods {
			if !pods[i].Succeeded {
				pods[i].Succeeded = true
				break
			}
		}
	}
	t.Fatal("the job never completed")
}

func TestFailedPodsBeyondTheBackoffLimitFailTheJob(t *testing.T) {
	spec := Spec{Parallelism: 1, Completions: 1, BackoffLimit: 2, Start: t0}
	pods := []Pod{{Name: "a", Failed: true}, {Name: "b", Failed: true}}
	if plan := Compute(spec, pods, t0); plan.Outcome.Type != "" || plan.Create != 1 {
		t.Fatalf("two failures at limit 2: %+v; want another try", plan)
	}
	pods = append(pods, Pod{Name: "c", Failed: true}, Pod{Name: "d"})
	plan := Compute(spec, pods, t0)
	if plan.Outcome.Reason != "BackoffLimitExceeded" || !slices.Equal(plan.Stop, []string{"d"}) || plan.Create != 0 {
		t.Fatalf("three failures at limit 2: %+v; want BackoffLimitExceeded, d stopped", plan)
	}
}

func TestRestartsInPlaceCountAsFailures(t *testing.T) {
	plan := Compute(Spec{Parallelism: 1, Completions: 1, BackoffLimit: 1, Start: t0}, []Pod{{Name: "a", Restarts: 2}}, t0)
	if plan.Outcome.Reason != "BackoffLimitExceeded" {
		t.Fatalf("two restarts at limit 1: %+v", plan)
	}
}

func TestTheActiveDeadlineStopsRunningPods(t *testing.T) {
	spec := Spec{Parallelism: 3, Completions: 3, BackoffLimit: 6, Start: t0, ActiveDeadline: time.Minute}
	pods := []Pod{{Name: "a"}, {Name: "b", Succeeded: true}, {Name: "c"}}
	if plan := Compute(spec, pods, t0.Add(30*time.Second)); plan.Outcome.Type != "" || !plan.WakeAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("before the deadline: %+v", plan)
	}
	plan := Compute(spec, pods, t0.Add(time.Minute))
	if plan.Outcome.Reason != "DeadlineExceeded" || !slices.Equal(plan.Stop, []string{"a", "c"}) {
		t.Fatalf("at the deadline: %+v; want DeadlineExceeded, a and c stopped", plan)
	}
}

func TestTerminatingPodsCountForNothing(t *testing.T) {
	plan := Compute(Spec{Parallelism: 2, Completions: 4, BackoffLimit: 6, Start: t0}, []Pod{{Name: "a", Terminating: true}, {Name: "b"}}, t0)
	if plan.Active != 1 || plan.Create != 1 {
		t.Fatalf("%+v; want 1 active and 1 to create", plan)
	}
}
