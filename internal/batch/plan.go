// Package batch is the arithmetic of a job: from its spec and its pods as
// they are, how many pods to start, which to stop, and whether the job
// has completed or failed. It is pure (the caller passes now), so it is
// tested without PostgreSQL or Temporal.
package batch

import (
	"fmt"
	"time"
)

// Pod is what the plan needs to know of one pod of the job.
type Pod struct {
	Name string
	// Succeeded or Failed: the pod ended (its exit code decided which).
	Succeeded, Failed bool
	// Restarts counts its containers' restarts (restartPolicy OnFailure
	// restarts a failed container in place; each counts as a failure).
	Restarts int32
	// Terminating: its deletion has begun.
	Terminating bool
}

// Spec is the part of the job's spec the plan follows.
type Spec struct {
	Parallelism, Completions, BackoffLimit int32
	// ActiveDeadline bounds the run from Start; zero: none.
	ActiveDeadline time.Duration
	Start          time.Time
}

// Outcome is how the job ended, if it did.
type Outcome struct {
	Type    string // "Complete" or "Failed"; empty while running
	Reason  string // BackoffLimitExceeded, DeadlineExceeded
	Message string
}

// Plan is what to do now.
type Plan struct {
	Create int32
	// Stop names the running pods to delete (the job ended).
	Stop                      []string
	Active, Succeeded, Failed int32
	Outcome                   Outcome
	// WakeAt is the active deadline, while it may still pass.
	WakeAt time.Time
}

// Compute makes the plan for spec over pods at now.
func Compute(spec Spec, pods []Pod, now time.Time) Plan {
	var plan Plan
	var running []string
	for _, p := range pods {
		plan.Failed += p.Restarts
		switch {
		case p.Succeeded:
			plan.Succeeded++
		case p.Failed:
			plan.Failed++
		case p.Terminating:
		default:
			plan.Active++
			running = append(running, p.Name)
		}
	}
	switch {
	case plan.Succeeded >= spec.Completions:
		plan.Outcome = Outcome{Type: "Complete"}
	case plan.Failed > spec.BackoffLimit:
		plan.Outcome = Outcome{Type: "Failed", Reason: "BackoffLimitExceeded", Message: fmt.Sprintf("Job has reached the specified backoff limit (%d failed pods, limit %d)", plan.Failed, spec.BackoffLimit)}
	case spec.ActiveDeadline > 0 && !now.Before(spec.Start.Add(spec.ActiveDeadline)):
		plan.Outcome = Outcome{Type: "Failed", Reason: "DeadlineExceeded", Message: fmt.Sprintf("Job was active longer than specified deadline (%s)", spec.ActiveDeadline)}
	}
	if plan.Outcome.Type != "" {
		plan.Stop = running
		return plan
	}
	if spec.ActiveDeadline > 0 {
		plan.WakeAt = spec.Start.Add(spec.ActiveDeadline)
	}
	// As many running as parallelism allows and completions still need.
	want := min(spec.Parallelism, spec.Completions-plan.Succeeded)
	plan.Create = max(want-plan.Active, 0)
	return plan
}
