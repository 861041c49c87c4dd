package rollout

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pods makes n pods of revision hash, the first ready of them Ready.
func pods(hash string, n, ready int) []Pod {
	var out []Pod
	for i := range n {
		p := Pod{Name: fmt.Sprintf("%s-%d", hash, i), Hash: hash, Created: t0.Add(time.Duration(i) * time.Second), Scheduled: true}
		if i < ready {
			since := t0
			p.ReadySince = &since
		}
		out = append(out, p)
	}
	return out
}

func countHash(ps []Pod, names []string, hash string) int32 {
	n := int32(0)
	for _, p := range ps {
		if p.Hash == hash && slices.Contains(names, p.Name) {
			n++
		}
	}
	return n
}

// Kubernetes' TestDeploymentController_reconcileNewReplicaSet: how far the
// new revision is scaled, given maxSurge.
func TestNewRevisionScalesWithinMaxSurge(t *testing.T) {
	for _, tc := range []struct {
		replicas, surge, oldN, newN int32
		wantNew                     int32
	}{
		{replicas: 1, surge: 0, oldN: 10, newN: 0, wantNew: 0},
		{replicas: 10, surge: 0, oldN: 10, newN: 0, wantNew: 0},
		{replicas: 10, surge: 2, oldN: 10, newN: 0, wantNew: 2},
		{replicas: 10, surge: 2, oldN: 5, newN: 0, wantNew: 7},
		{replicas: 10, surge: 2, oldN: 10, newN: 2, wantNew: 2},
		{replicas: 2, surge: 2, oldN: 2, newN: 4, wantNew: 2},
	} {
		t.Run(fmt.Sprintf("%d replicas surge %d old %d new %d", tc.replicas, tc.surge, tc.oldN, tc.newN), func(t *testing.T) {
			all := append(pods("old", int(tc.oldN), 0), pods("new", int(tc.newN), 0)...)
			// maxUnavailable 0 keeps the old side still: only the new is tested.
			plan := Compute(Spec{Replicas: tc.replicas, Strategy: RollingUpdate, MaxSurge: tc.surge, NewHash: "new"}, all, t0)
			got := tc.newN + plan.Create - countHash(all, plan.Delete, "new")
			if got != tc.wantNew {
				t.Fatalf("new revision at %d pods (create %d, delete %v); want %d", got, plan.Create, plan.Delete, tc.wantNew)
			}
		})
	}
}

// Kubernetes' TestDeploymentController_reconcileOldReplicaSets: how far
// old revisions are scaled down, given maxUnavailable and readiness.
func TestOldRevisionsScaleDownWithinMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name                           string
		replicas, unavailable          int32
		oldN, newN, oldReady, newReady int
		wantOld                        int32
	}{
		{"both fenceposts 0 become one unavailable", 10, 0, 10, 0, 10, 0, 9},
		{"two may go", 10, 2, 10, 0, 10, 0, 8},
		{"unhealthy old pods are cleaned up first", 10, 2, 10, 0, 8, 0, 8},
		{"one unhealthy cleaned, one ready scaled down", 10, 2, 10, 0, 9, 0, 8},
		{"unavailable new pods stop the scale-down", 10, 2, 8, 2, 8, 0, 8},
		{"ready new pods let old ones go", 10, 2, 8, 2, 8, 2, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			surge, unavail := Fenceposts(0, tc.unavailable)
			all := append(pods("old", tc.oldN, tc.oldReady), pods("new", tc.newN, tc.newReady)...)
			plan := Compute(Spec{Replicas: tc.replicas, Strategy: RollingUpdate, MaxSurge: surge, MaxUnavailable: unavail, NewHash: "new"}, all, t0)
			got := int32(tc.oldN) - countHash(all, plan.Delete, "old")
			if got != tc.wantOld {
				t.Fatalf("old revision at %d pods (delete %v); want %d", got, plan.Delete, tc.wantOld)
			}
		})
	}
}

// The fenceposts of small replica counts, as the Kubernetes docs give
// them (3 replicas: at least 3 available, at most 4 pods; 4: 3..5) and as
// ResolveFenceposts rounds them.
func TestFencepostsOfSmallReplicaCounts(t *testing.T) {
	pct := func(s string) model.IntOrString { return model.StrValue(s) }
	for _, tc := range []struct {
		replicas               int32
		surge, unavail         model.IntOrString
		wantSurge, wantUnavail int32
	}{
		{1, pct("25%"), pct("25%"), 1, 0},
		{3, pct("25%"), pct("25%"), 1, 0},
		{4, pct("25%"), pct("25%"), 1, 1},
		{10, pct("25%"), pct("25%"), 3, 2},
		{4, model.IntValue(0), pct("10%"), 0, 1},
		{0, pct("25%"), pct("25%"), 0, 1},
		{5, pct("0%"), pct("0%"), 0, 1},
		{5, model.IntValue(2), model.IntValue(0), 2, 0},
	} {
		s, err := model.ScaledValue(tc.surge, tc.replicas, true)
		if err != nil {
			t.Fatal(err)
		}
		u, err := model.ScaledValue(tc.unavail, tc.replicas, false)
		if err != nil {
			t.Fatal(err)
		}
		s, u = Fenceposts(s, u)
		if s != tc.wantSurge || u != tc.wantUnavail {
			t.Errorf("%d replicas, maxSurge %s, maxUnavailable %s: got %d/%d; want %d/%d", tc.replicas, tc.surge, tc.unavail, s, u, tc.wantSurge, tc.wantUnavail)
		}
	}
}

// simulate runs plans until the rollout completes, pods becoming Ready
// one step after their creation and deleted ones vanishing at once; it
// checks that no step has more than replicas+surge pods nor fewer than
// replicas-unavailable available ones.
func simulate(t *testing.T, spec Spec, start []Pod) int {
	t.Helper()
	cur := slices.Clone(start)
	now := t0.Add(time.Hour)
	seq := 0
	for step := 1; step < 200; step++ {
		plan := Compute(spec, cur, now)
		if plan.Counts.Complete(spec.Replicas) && plan.Create == 0 && len(plan.Delete) == 0 {
			return step
		}
		var next []Pod
		for _, p := range cur {
			if slices.Contains(plan.Delete, p.Name) {
				continue
			}
			if p.ReadySince == nil {
				since := now
				p.ReadySince = &since
			}
			next = append(next, p)
		}
		for range plan.Create {
			seq++
			next = append(next, Pod{Name: fmt.Sprintf("%s-%d", spec.NewHash, seq), Hash: spec.NewHash, Created: now, Scheduled: true})
		}
		avail := 0
		for _, p := range next {
			if p.ReadySince != nil {
				avail++
			}
		}
		if len(next) > int(spec.Replicas+spec.MaxSurge) {
			t.Fatalf("step %d: %d pods; at most %d allowed", step, len(next), spec.Replicas+spec.MaxSurge)
		}
		if avail < int(spec.Replicas-spec.MaxUnavailable) {
			t.Fatalf("step %d: %d available; at least %d required", step, avail, spec.Replicas-spec.MaxUnavailable)
		}
		cur = next
		now = now.Add(time.Second)
	}
	t.Fatal("the rollout never completed")
	return 0
}

func TestRollingUpdateKeepsItsBoundsToTheEnd(t *testing.T) {
	for _, tc := range []struct{ replicas, surge, unavail int32 }{
		{4, 1, 1}, {1, 1, 0}, {3, 1, 0}, {10, 3, 2}, {5, 0, 1}, {30, 8, 7},
	} {
		t.Run(fmt.Sprintf("%d replicas %d/%d", tc.replicas, tc.surge, tc.unavail), func(t *testing.T) {
			simulate(t, Spec{Replicas: tc.replicas, Strategy: RollingUpdate, MaxSurge: tc.surge, MaxUnavailable: tc.unavail, NewHash: "b"},
				pods("a", int(tc.replicas), int(tc.replicas)))
		})
	}
}

func TestRecreateRemovesEveryOldPodBeforeTheFirstNew(t *testing.T) {
	spec := Spec{Replicas: 3, Strategy: Recreate, NewHash: "b"}
	old := pods("a", 3, 3)
	plan := Compute(spec, old, t0)
	if plan.Create != 0 || len(plan.Delete) != 3 {
		t.Fatalf("first step: create %d, delete %v; want 0 and all three", plan.Create, plan.Delete)
	}
	for i := range old {
		old[i].Terminating = true
	}
	if plan = Compute(spec, old, t0); plan.Create != 0 {
		t.Fatalf("created %d while old pods still terminate", plan.Create)
	}
	if plan = Compute(spec, nil, t0); plan.Create != 3 {
		t.Fatalf("created %d once the old pods are gone; want 3", plan.Create)
	}
}

func TestScaleDownRemovesUnscheduledThenNotReadyThenNewest(t *testing.T) {
	ps := pods("a", 6, 4)
	ps[0].Scheduled, ps[0].ReadySince = false, nil // unscheduled
	// ps[4], ps[5] not Ready; of the Ready ones ps[3] is the newest.
	plan := Compute(Spec{Replicas: 2, Strategy: RollingUpdate, MaxSurge: 1, NewHash: "a"}, ps, t0)
	want := []string{"a-0", "a-5", "a-4", "a-3"}
	if !slices.Equal(plan.Delete, want) {
		t.Fatalf("deleted %v; want %v", plan.Delete, want)
	}
	if plan.Create != 0 {
		t.Fatalf("created %d while scaling down", plan.Create)
	}
}

func TestMinReadySecondsDelaysAvailabilityAndWakesThePlan(t *testing.T) {
	ps := pods("a", 2, 2)
	long, recent := t0.Add(-20*time.Second), t0.Add(-5*time.Second)
	ps[0].ReadySince, ps[1].ReadySince = &long, &recent
	plan := Compute(Spec{Replicas: 2, Strategy: RollingUpdate, MaxSurge: 1, NewHash: "a", MinReady: 10 * time.Second}, ps, t0)
	if plan.Counts.Available != 1 || plan.Counts.Ready != 2 {
		t.Fatalf("available %d ready %d; want 1 and 2", plan.Counts.Available, plan.Counts.Ready)
	}
	if want := t0.Add(5 * time.Second); !plan.WakeAt.Equal(want) {
		t.Fatalf("wake at %v; want %v", plan.WakeAt, want)
	}
}

func TestHealthyDeadlineReplacesNewPodsThatNeverBecomeReady(t *testing.T) {
	ps := append(pods("a", 4, 4), pods("b", 1, 0)...)
	ps[4].Created = t0
	spec := Spec{Replicas: 4, Strategy: RollingUpdate, MaxSurge: 1, MaxUnavailable: 1, NewHash: "b", HealthyDeadline: 30 * time.Second}
	plan := Compute(spec, ps, t0.Add(10*time.Second))
	if len(plan.Unhealthy) != 0 || !plan.WakeAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("before the deadline: unhealthy %v, wake %v", plan.Unhealthy, plan.WakeAt)
	}
	plan = Compute(spec, ps, t0.Add(31*time.Second))
	if !slices.Equal(plan.Unhealthy, []string{"b-0"}) || !slices.Contains(plan.Delete, "b-0") {
		t.Fatalf("after the deadline: unhealthy %v, delete %v; want b-0 in both", plan.Unhealthy, plan.Delete)
	}
}

// A pod that has been available has met its healthy deadline for good:
// losing Ready later (its node silent while the control plane restarts)
// neither replaces it nor counts against the rollout.
func TestHealthyDeadlineSparesPodsThatWereAvailable(t *testing.T) {
	ps := pods("b", 2, 0)
	for i := range ps {
		ps[i].WasAvailable = true
	}
	spec := Spec{Replicas: 2, Strategy: RollingUpdate, MaxSurge: 1, MaxUnavailable: 0, NewHash: "b", HealthyDeadline: 30 * time.Second}
	plan := Compute(spec, ps, t0.Add(time.Hour))
	if len(plan.Unhealthy) != 0 || len(plan.Delete) != 0 || plan.Create != 0 {
		t.Fatalf("pods once available, not Ready now: unhealthy %v, delete %v, create %d; want none", plan.Unhealthy, plan.Delete, plan.Create)
	}
	if plan.Counts.Available != 0 || plan.Counts.Updated != 2 {
		t.Fatalf("counts %+v; want 2 updated, none available", plan.Counts)
	}
}

func TestFinishedPodsAreReplaced(t *testing.T) {
	ps := pods("a", 3, 3)
	ps[1].Finished = true
	plan := Compute(Spec{Replicas: 3, Strategy: RollingUpdate, MaxSurge: 1, NewHash: "a"}, ps, t0)
	if !slices.Equal(plan.Delete, []string{"a-1"}) || plan.Create != 1 {
		t.Fatalf("delete %v create %d; want [a-1] and 1", plan.Delete, plan.Create)
	}
}

func TestPausedTakesNoRolloutStep(t *testing.T) {
	ps := pods("a", 3, 3)
	plan := Compute(Spec{Replicas: 3, Strategy: RollingUpdate, MaxSurge: 1, MaxUnavailable: 1, NewHash: "b", Paused: true}, ps, t0)
	if plan.Create != 0 || len(plan.Delete) != 0 {
		t.Fatalf("paused: create %d delete %v", plan.Create, plan.Delete)
	}
}

func TestTemplateHashFollowsTheTemplateOnly(t *testing.T) {
	a := model.PodTemplate{Metadata: model.TemplateMeta{Labels: map[string]string{"app": "web"}},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "c", Image: "base", Command: []string{"sleep", "1"}}}}}
	b := a
	b.Metadata.Annotations = map[string]string{model.AnnotationRestartedAt: "now"}
	ha, hb := TemplateHash(a), TemplateHash(b)
	if ha == hb || ha != TemplateHash(a) || len(ha) == 0 || len(ha) > 10 {
		t.Fatalf("hashes %q and %q: want stable, distinct, 1-10 characters", ha, hb)
	}
}

// A rollout whose old pods are still terminating is complete, as
// Kubernetes and `rollout status` count it. (Ask Complete for Old == 0
// again to see it wait for the old pod's end.)
func TestARolloutIsCompleteWhileOldPodsTerminate(t *testing.T) {
	ps := append(pods("b", 4, 4), pods("a", 1, 1)...)
	ps[4].Terminating = true
	spec := Spec{Replicas: 4, Strategy: RollingUpdate, MaxSurge: 1, MaxUnavailable: 1, NewHash: "b"}
	plan := Compute(spec, ps, t0.Add(time.Hour))
	if !plan.Counts.Complete(spec.Replicas) || plan.Create != 0 || len(plan.Delete) != 0 || plan.Counts.Old != 1 {
		t.Fatalf("4 new pods available and an old one terminating: counts %+v, create %d, delete %v; want complete, nothing to do, 1 old", plan.Counts, plan.Create, plan.Delete)
	}
}
