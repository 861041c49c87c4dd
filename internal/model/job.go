package model

import (
	"slices"
	"time"
)

// KindJob is the batch group's kind.
const KindJob = "Job"

// Labels a job puts on its pods.
const LabelJobName = "job-name"

// Job conditions and their reasons.
const (
	JobComplete = "Complete"
	JobFailed   = "Failed"

	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
	ReasonDeadlineExceeded     = "DeadlineExceeded"
)

// Job defaults and bounds. Completions and parallelism are bounded as
// Kubernetes bounds an indexed job's (completionsSoftLimit 100,000 with
// parallelismLimitForHighCompletions 10,000); every pod is a zone.
const (
	DefaultBackoffLimit = int32(6)
	MaxJobCompletions   = int32(100000)
	MaxJobParallelism   = int32(10000)
	// MaxJobBackoffLimit bounds the failed pods a job tolerates
	// (Kubernetes: int32 alone); each failure is a pod.
	MaxJobBackoffLimit = int32(10000)
	// MaxJobSeconds bounds activeDeadlineSeconds and
	// ttlSecondsAfterFinished: a year, a timer a workflow can hold
	// (Kubernetes: int64 and int32 alone).
	MaxJobSeconds = int64(365 * 86400)
	// MaxJobNameLength leaves room in a pod's name for "-<suffix>".
	MaxJobNameLength = 57
)

// Job runs pods until a number of them succeed.
type Job struct {
	TypeMeta `json:",inline"`
	Metadata ObjectMeta `json:"metadata"`
	Spec     JobSpec    `json:"spec"`
	Status   JobStatus  `json:"status"`
}

// JobSpec is the desired state of a job.
type JobSpec struct {
	// Parallelism bounds the pods running at once (default 1).
	Parallelism *int32 `json:"parallelism,omitempty"`
	// Completions is how many pods must succeed (default 1).
	Completions *int32 `json:"completions,omitempty"`
	// BackoffLimit: more failed pods than this fail the job (default 6).
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// ActiveDeadlineSeconds bounds the job's run from its start; when it
	// passes, running pods are stopped and the job fails.
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// TTLSecondsAfterFinished removes the job and its pods this long after
	// it completed or failed.
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// Selector is set by the server (job-name); it finds the job's pods.
	Selector *LabelSelector `json:"selector,omitempty"`
	Template PodTemplate    `json:"template"`
}

// JobStatus is the observed state of a job.
type JobStatus struct {
	Active         int32          `json:"active"`
	Succeeded      int32          `json:"succeeded"`
	Failed         int32          `json:"failed"`
	StartTime      *time.Time     `json:"startTime,omitempty"`
	CompletionTime *time.Time     `json:"completionTime,omitempty"`
	Conditions     []JobCondition `json:"conditions,omitempty"`
}

// JobCondition is a job's end (Complete or Failed), or a trouble on the
// way (ReplicaFailure).
type JobCondition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	LastProbeTime      *time.Time `json:"lastProbeTime,omitempty"`
	LastTransitionTime *time.Time `json:"lastTransitionTime,omitempty"`
}

// Finished reports the condition the job ended with, or nil.
func (s *JobStatus) Finished() *JobCondition {
	for i := range s.Conditions {
		if c := &s.Conditions[i]; (c.Type == JobComplete || c.Type == JobFailed) && c.Status == ConditionTrue {
			return c
		}
	}
	return nil
}

// Condition returns the condition of type typ, or nil.
func (s *JobStatus) Condition(typ string) *JobCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			return &s.Conditions[i]
		}
	}
	return nil
}

// RemoveCondition drops the condition of type typ; it reports whether
// there was one.
func (s *JobStatus) RemoveCondition(typ string) bool {
	n := len(s.Conditions)
	s.Conditions = slices.DeleteFunc(s.Conditions, func(c JobCondition) bool { return c.Type == typ })
	return len(s.Conditions) != n
}

func (j *Job) GetTypeMeta() *TypeMeta    { return &j.TypeMeta }
func (j *Job) GetMeta() *ObjectMeta      { return &j.Metadata }
func (j *Job) Parts() (spec, status any) { return &j.Spec, &j.Status }

// DefaultJob fills in what a user may leave out, as Kubernetes does.
func DefaultJob(j *Job) {
	j.APIVersion, j.Kind = APIVersionBatch, KindJob
	sp := &j.Spec
	sp.Template.Metadata.CreationTimestamp = nil
	if sp.Parallelism == nil {
		one := int32(1)
		sp.Parallelism = &one
	}
	if sp.Completions == nil {
		one := int32(1)
		sp.Completions = &one
	}
	if sp.BackoffLimit == nil {
		v := DefaultBackoffLimit
		sp.BackoffLimit = &v
	}
	if sp.Template.Spec.RestartPolicy == "" {
		sp.Template.Spec.RestartPolicy = RestartNever
	}
	if j.Metadata.Name != "" {
		sp.Selector = &LabelSelector{MatchLabels: map[string]string{LabelJobName: j.Metadata.Name}}
		if sp.Template.Metadata.Labels == nil {
			sp.Template.Metadata.Labels = map[string]string{}
		}
		sp.Template.Metadata.Labels[LabelJobName] = j.Metadata.Name
	}
	pod := sp.Template.pod("", "")
	DefaultPod(pod)
	sp.Template.Spec = pod.Spec
}

// ValidateJob checks a defaulted job.
func ValidateJob(j *Job) FieldErrors {
	errs := ValidateMeta(&j.Metadata, true)
	if len(j.Metadata.Name) > MaxJobNameLength {
		errs.add("metadata.name", FieldTooLong, "Invalid value: %q: must be no more than %d characters, so its pods' names fit a DNS label", j.Metadata.Name, MaxJobNameLength)
	}
	sp := &j.Spec
	if v := *sp.Parallelism; v < 0 || v > MaxJobParallelism {
		errs.add("spec.parallelism", FieldInvalid, "Invalid value: %d: must be between 0 and %d, inclusive", v, MaxJobParallelism)
	}
	if v := *sp.Completions; v < 0 || v > MaxJobCompletions {
		errs.add("spec.completions", FieldInvalid, "Invalid value: %d: must be between 0 and %d, inclusive", v, MaxJobCompletions)
	}
	if v := *sp.BackoffLimit; v < 0 || v > MaxJobBackoffLimit {
		errs.add("spec.backoffLimit", FieldInvalid, "Invalid value: %d: must be between 0 and %d, inclusive", v, MaxJobBackoffLimit)
	}
	if v := sp.ActiveDeadlineSeconds; v != nil && (*v <= 0 || *v > MaxJobSeconds) {
		errs.add("spec.activeDeadlineSeconds", FieldInvalid, "Invalid value: %d: must be between 1 and %d, inclusive", *v, MaxJobSeconds)
	}
	if v := sp.TTLSecondsAfterFinished; v != nil && (*v < 0 || int64(*v) > MaxJobSeconds) {
		errs.add("spec.ttlSecondsAfterFinished", FieldInvalid, "Invalid value: %d: must be between 0 and %d, inclusive", *v, MaxJobSeconds)
	}
	tmp := DeploymentSpec{Template: sp.Template}
	for _, e := range validateTemplate(&tmp, j.Metadata.Namespace, j.Metadata.Name) {
		if e.Field == "spec.template.spec.restartPolicy" {
			continue // a job's policies differ; checked below
		}
		errs = append(errs, e)
	}
	if rp := sp.Template.Spec.RestartPolicy; rp != RestartNever && rp != RestartOnFailure {
		errs.add("spec.template.spec.restartPolicy", FieldNotSupported, "Unsupported value: %q: supported values: \"OnFailure\", \"Never\"", rp)
	}
	return errs
}
