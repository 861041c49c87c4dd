// Package rollout is the arithmetic of a deployment's rollout: from the
// deployment's spec and its pods as they are, which pods to create and
// which to delete now, what the status says, and when to look again. It
// is pure (no I/O, no clock: the caller passes now), so the deployment's
// workflow can replay it and tests can check it against Kubernetes' own
// cases (pkg/controller/deployment/rolling.go, recreate.go).
package rollout

import (
	"cmp"
	"slices"
	"time"
)

// Strategy names, as in the deployment's spec.
const (
	RollingUpdate = "RollingUpdate"
	Recreate      = "Recreate"
)

// Pod is what the plan needs to know of one pod of the deployment.
type Pod struct {
	Name string
	// Hash is its pod-template-hash: the revision it runs.
	Hash    string
	Created time.Time
	// Scheduled: bound to a node.
	Scheduled bool
	// ReadySince is when it last became Ready; nil while not Ready.
	ReadySince *time.Time
	// Terminating: its deletion has begun; it counts for nothing.
	Terminating bool
	// Finished: Failed or Succeeded; it is deleted and replaced.
	Finished bool
	// WasAvailable: it has been available once, so its healthy deadline
	// is behind it for good (Nomad's healthy_deadline): a pod that loses
	// Ready later (its node or the control plane restarting, a failed
	// probe) is not a failed rollout.
	WasAvailable bool
}

// Available: Ready for at least minReady at now.
func (p Pod) Available(minReady time.Duration, now time.Time) bool {
	return p.ReadySince != nil && !now.Before(p.ReadySince.Add(minReady))
}

// Spec is the part of the deployment's spec the plan follows, with
// maxSurge and maxUnavailable already resolved (Fenceposts).
type Spec struct {
	Replicas       int32
	Strategy       string
	MaxSurge       int32
	MaxUnavailable int32
	MinReady       time.Duration
	// HealthyDeadline: a new pod never available this long after its
	// creation has failed and is replaced; zero: no deadline.
	HealthyDeadline time.Duration
	// NewHash is the hash of the current template.
	NewHash string
	// Paused: scale, but start no rollout step.
	Paused bool
}

// Plan is what to do now and what the deployment's status says.
type Plan struct {
	// Create is how many pods of the new revision to create.
	Create int32
	// Delete names the pods to delete, in the order to delete them.
	Delete []string
	// Unhealthy are the new pods among Delete that missed their healthy
	// deadline.
	Unhealthy []string
	Counts    Counts
	// WakeAt is when the plan may change with no pod changing (a pod
	// becomes available after minReadySeconds, or misses its healthy
	// deadline); zero: not before something changes.
	WakeAt time.Time
}

// Counts are the deployment's replica counts as its status shows them,
// before the plan is carried out.
type Counts struct {
	// Replicas counts the pods that are not terminating or finished.
	Replicas, Updated, Ready, Available int32
	// Old counts the pods of other revisions, terminating ones included.
	Old int32
	// Unavailable is how many of spec.replicas are not available.
	Unavailable int32
}

// Complete: every replica runs the new revision and is available, and no
// pod of an old revision is active. Old pods still terminating do not
// count, as in Kubernetes: the rollout is what `rollout status` reports
// done (updated == replicas == available), and a revision said done
// there is the one a failed rollout after it reverts to.
func (c Counts) Complete(replicas int32) bool {
	return c.Updated == replicas && c.Replicas == replicas && c.Available >= replicas
}

// Fenceposts resolves maxSurge and maxUnavailable (already resolved
// against replicas: surge rounded up, unavailable down); when both are 0,
// unavailable becomes 1, so a rollout can always make progress.
func Fenceposts(surge, unavailable int32) (int32, int32) {
	if surge == 0 && unavailable == 0 {
		return 0, 1
	}
	return surge, unavailable
}

// Compute makes the plan for spec over pods at now.
func Compute(spec Spec, pods []Pod, now time.Time) Plan {
	var (
		plan     Plan
		newPods  []Pod // active pods of the new revision
		oldPods  []Pod // active pods of other revisions
		deleting = map[string]bool{}
	)
	available := func(p Pod) bool { return p.Available(spec.MinReady, now) }
	wake := func(t time.Time) {
		if t.After(now) && (plan.WakeAt.IsZero() || t.Before(plan.WakeAt)) {
			plan.WakeAt = t
		}
	}
	del := func(p Pod) {
		if !deleting[p.Name] {
			deleting[p.Name] = true
			plan.Delete = append(plan.Delete, p.Name)
		}
	}
	for _, p := range pods {
		switch {
		case p.Terminating:
			if p.Hash != spec.NewHash {
				plan.Counts.Old++
			}
			continue
		case p.Finished:
			del(p)
			continue
		}
		plan.Counts.Replicas++
		if p.ReadySince != nil {
			plan.Counts.Ready++
			if available(p) {
				plan.Counts.Available++
			} else {
				wake(p.ReadySince.Add(spec.MinReady))
			}
		}
		if p.Hash == spec.NewHash {
			// Healthy means available (Ready for minReadySeconds): a
			// crash-looping pod is Ready for moments between restarts.
			if spec.HealthyDeadline > 0 && !p.WasAvailable && !available(p) && !spec.Paused {
				if deadline := p.Created.Add(spec.HealthyDeadline); !now.Before(deadline) {
					plan.Unhealthy = append(plan.Unhealthy, p.Name)
					del(p)
					continue
				} else {
					wake(deadline)
				}
			}
			plan.Counts.Updated++
			newPods = append(newPods, p)
		} else {
			plan.Counts.Old++
			oldPods = append(oldPods, p)
		}
	}
	plan.Counts.Unavailable = max(spec.Replicas-plan.Counts.Available, 0)

	switch {
	case spec.Strategy == Recreate && plan.Counts.Old > 0 && !spec.Paused:
		// Every old pod goes, and is gone, before the first new one.
		for _, p := range oldPods {
			del(p)
		}
		for _, p := range Victims(newPods, available)[:max(len(newPods)-int(spec.Replicas), 0)] {
			del(p)
		}
	case len(oldPods) == 0:
		// Only scaling: the new revision follows replicas.
		plan.scaleNew(spec, newPods, available)
	case spec.Paused:
		// No rollout step while paused; the caller passes the hash of the
		// revision that runs, so a paused deployment still scales.
	default:
		plan.roll(spec, newPods, oldPods, available, del)
	}
	return plan
}

// scaleNew creates or deletes pods of the new revision to match replicas.
func (plan *Plan) scaleNew(spec Spec, newPods []Pod, available func(Pod) bool) {
	n := int32(len(newPods))
	switch {
	case n < spec.Replicas:
		plan.Create = spec.Replicas - n
	case n > spec.Replicas:
		for _, p := range Victims(newPods, available)[:n-spec.Replicas] {
			plan.Delete = append(plan.Delete, p.Name)
		}
	}
}

// roll is one step of a rolling update: Kubernetes' reconcileNewReplicaSet
// then reconcileOldReplicaSets, counted in pods rather than replica sets.
func (plan *Plan) roll(spec Spec, newPods, oldPods []Pod, available func(Pod) bool, del func(Pod)) {
	newCount, oldCount := int32(len(newPods)), int32(len(oldPods))
	// Scale the new revision up within maxSurge (or down to replicas).
	switch {
	case newCount > spec.Replicas:
		for _, p := range Victims(newPods, available)[:newCount-spec.Replicas] {
			del(p)
		}
		newCount = spec.Replicas
	case newCount < spec.Replicas:
		maxTotal := spec.Replicas + spec.MaxSurge
		plan.Create = max(min(spec.Replicas-newCount, maxTotal-newCount-oldCount), 0)
		newCount += plan.Create
	}
	// Scale the old revisions down, never below minAvailable: first the
	// old pods that are not available (they cost no availability), then
	// available ones while availability allows.
	minAvailable := spec.Replicas - spec.MaxUnavailable
	newAvailable := int32(0)
	for _, p := range newPods {
		if available(p) {
			newAvailable++
		}
	}
	newUnavailable := newCount - newAvailable
	maxScaledDown := newCount + oldCount - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return
	}
	victims := Victims(oldPods, available)
	var oldAvailable int32
	for _, p := range oldPods {
		if available(p) {
			oldAvailable++
		}
	}
	cleaned := int32(0)
	for _, p := range victims {
		if cleaned == maxScaledDown {
			break
		}
		if !available(p) {
			del(p)
			cleaned++
		}
	}
	scaleDown := min(oldAvailable+newAvailable-minAvailable, oldCount-cleaned)
	for _, p := range victims {
		if scaleDown <= 0 {
			break
		}
		if available(p) {
			del(p)
			scaleDown--
		}
	}
}

// Victims orders pods for a scale-down, first to go first: unscheduled
// before scheduled, not Ready before Ready, not yet available before
// available, then the newest first (Kubernetes' ActivePodsWithRanks,
// without the per-node spreading).
func Victims(pods []Pod, available func(Pod) bool) []Pod {
	out := slices.Clone(pods)
	rank := func(p Pod) int {
		switch {
		case !p.Scheduled:
			return 0
		case p.ReadySince == nil:
			return 1
		case !available(p):
			return 2
		}
		return 3
	}
	slices.SortStableFunc(out, func(a, b Pod) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}
