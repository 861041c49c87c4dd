package controlops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/zonewright/zonewright/internal/batch"
	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/progress"
	"github.com/zonewright/zonewright/internal/store"
)

// EventSourceJob signs the events a job's sync records.
const EventSourceJob = "job-controller"

// SyncJob brings a job one step further: it counts the job's pods,
// starts as many as parallelism allows and completions still need, ends
// the job (Complete, or Failed past its backoff limit or its active
// deadline, stopping what runs), and once its TTL after finishing has
// passed deletes its pods and then the job. Level-triggered, like
// SyncDeployment, and like it never beside another sync of the job.
func (a *Control) SyncJob(ctx context.Context, ref controlapi.JobRef) (res controlapi.JobSyncResult, err error) {
	err = a.oneSyncAtATime(ctx, model.KindJob, ref.Namespace, ref.Name, func() error {
		res, err = a.syncJob(ctx, ref)
		return err
	})
	return res, err
}

func (a *Control) syncJob(ctx context.Context, ref controlapi.JobRef) (controlapi.JobSyncResult, error) {
	j, err := a.Store.Jobs().Get(ctx, ref.Namespace, ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		left, err := a.deleteJobPods(ctx, ref, "", nil)
		return controlapi.JobSyncResult{Gone: err == nil && left == 0}, err
	}
	if err != nil {
		return controlapi.JobSyncResult{}, err
	}
	now := time.Now().UTC()
	if j.Metadata.DeletionTimestamp != nil {
		return a.finishJobDeletion(ctx, j)
	}
	pods, err := ownedPodsOf(ctx, a.Store, model.KindJob, ref.Namespace, ref.Name, j.Metadata.UID)
	if err != nil {
		return controlapi.JobSyncResult{}, err
	}
	st := j.Status
	if st.Finished() != nil {
		return a.finishedJob(ctx, j, now)
	}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	spec := batch.Spec{Parallelism: *j.Spec.Parallelism, Completions: *j.Spec.Completions, BackoffLimit: *j.Spec.BackoffLimit, Start: *st.StartTime}
	if d := j.Spec.ActiveDeadlineSeconds; d != nil {
		spec.ActiveDeadline = time.Duration(*d) * time.Second
	}
	plan := batch.Compute(spec, batchPods(pods), now)
	created, refused, err := a.actOnJobPlan(ctx, j, plan)
	if err != nil {
		return controlapi.JobSyncResult{}, err
	}
	st.Active, st.Succeeded, st.Failed = plan.Active+created, plan.Succeeded, plan.Failed
	st.Conditions = slices.Clone(st.Conditions)
	var retryAt time.Time
	if refused == "" {
		st.RemoveCondition(model.ConditionReplicaFailure)
	} else {
		if old := st.Condition(model.ConditionReplicaFailure); old == nil || old.Message != refused {
			_ = a.Store.RecordEvent(ctx, model.ObjectReference{Kind: model.KindJob, Namespace: ref.Namespace, Name: ref.Name, UID: j.Metadata.UID},
				"Warning", model.ReasonFailedCreate, refused, EventSourceJob)
		}
		model.SetCondition(&st.Conditions, model.JobCondition{Type: model.ConditionReplicaFailure, Status: model.ConditionTrue, Reason: model.ReasonFailedCreate, Message: refused}, now)
		retryAt = createRetryAt(st.Condition(model.ConditionReplicaFailure).LastTransitionTime, now)
	}
	if o := plan.Outcome; o.Type != "" {
		st.Active = 0
		st.CompletionTime = &now
		st.Conditions = append(st.Conditions, model.JobCondition{Type: o.Type, Status: model.ConditionTrue, Reason: o.Reason, Message: o.Message, LastProbeTime: &now, LastTransitionTime: &now})
		typ, reason, msg := "Normal", "Completed", "Job completed"
		if o.Type == model.JobFailed {
			typ, reason, msg = "Warning", o.Reason, o.Message
		}
		_ = a.Store.RecordEvent(ctx, model.ObjectReference{Kind: model.KindJob, Namespace: ref.Namespace, Name: ref.Name, UID: j.Metadata.UID}, typ, reason, msg, EventSourceJob)
	}
	res := controlapi.JobSyncResult{}
	if wake := earliest(plan.WakeAt, retryAt); !wake.IsZero() {
		res.WakeAfter = max(wake.Sub(now), time.Second)
	}
	if plan.Outcome.Type != "" {
		res.WakeAfter = time.Second // stop what runs, start the TTL
	}
	if sameJSON(j.Status, st) {
		return res, nil
	}
	j.Status = st
	return res, a.Store.Jobs().Update(ctx, j)
}

// finishedJob syncs a finished job: nothing runs; its TTL removes it all.
func (a *Control) finishedJob(ctx context.Context, j *model.Job, now time.Time) (controlapi.JobSyncResult, error) {
	ref := controlapi.JobRef{Namespace: j.Metadata.Namespace, Name: j.Metadata.Name}
	if _, err := a.deleteJobPods(ctx, ref, j.Metadata.UID, func(p *model.Pod) bool { return !podFinished(p) }); err != nil {
		return controlapi.JobSyncResult{}, err
	}
	ttl, st := j.Spec.TTLSecondsAfterFinished, j.Status
	if ttl == nil || st.CompletionTime == nil {
		return controlapi.JobSyncResult{}, nil
	}
	due := st.CompletionTime.Add(time.Duration(*ttl) * time.Second)
	if now.Before(due) {
		return controlapi.JobSyncResult{WakeAfter: max(due.Sub(now), time.Second)}, nil
	}
	if _, err := a.Store.Jobs().Modify(ctx, ref.Namespace, ref.Name, func(j *model.Job) bool {
		if j.Metadata.DeletionTimestamp != nil {
			return false
		}
		j.Metadata.DeletionTimestamp = &now
		return true
	}); err != nil {
		return controlapi.JobSyncResult{}, err
	}
	return controlapi.JobSyncResult{WakeAfter: time.Second}, nil
}

// actOnJobPlan stops the pods the plan stops and creates those it
// creates; refused says why the creates stopped, when the template is at
// fault (failedCreate).
func (a *Control) actOnJobPlan(ctx context.Context, j *model.Job, plan batch.Plan) (created int32, refused string, err error) {
	for _, name := range plan.Stop {
		if err := a.deletePod(ctx, j.Metadata.Namespace, name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return 0, "", err
		}
		progress.Report(ctx, "stopped "+name)
	}
	for ; created < plan.Create; created++ {
		err := a.createJobPod(ctx, j)
		if msg, ok := failedCreate(err); ok {
			return created, msg, nil // the rest would fail alike
		}
		if err != nil {
			return 0, "", err
		}
		progress.Report(ctx, fmt.Sprintf("created %d of %d", created+1, plan.Create))
	}
	return created, "", nil
}

func podFinished(p *model.Pod) bool {
	return p.Status.Phase == model.PodSucceeded || p.Status.Phase == model.PodFailed
}

func batchPods(pods []model.Pod) []batch.Pod {
	out := make([]batch.Pod, 0, len(pods))
	for _, p := range pods {
		bp := batch.Pod{Name: p.Metadata.Name, Succeeded: p.Status.Phase == model.PodSucceeded, Failed: p.Status.Phase == model.PodFailed,
			Terminating: p.Metadata.DeletionTimestamp != nil}
		if p.Spec.RestartPolicy == model.RestartOnFailure {
			for _, c := range p.Status.ContainerStatuses {
				bp.Restarts += c.RestartCount
			}
		}
		out = append(out, bp)
	}
	return out
}

// ownedPodsOf lists the pods whose controller is the named object of kind
// (by uid too, unless uid is empty).
func ownedPodsOf(ctx context.Context, st *store.Store, kind, ns, name, uid string) ([]model.Pod, error) {
	all, err := st.Pods().ListAll(ctx, store.ListOptions{Namespace: ns})
	if err != nil {
		return nil, err
	}
	var out []model.Pod
	for _, p := range all {
		o := model.ControllerOf(&p.Metadata)
		if o == nil || o.Kind != kind || o.Name != name || (uid != "" && o.UID != uid) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// createJobPod makes one pod of the job and starts its lifecycle.
func (a *Control) createJobPod(ctx context.Context, j *model.Job) error {
	yes := true
	err := a.createOwnedPod(ctx, func() *model.Pod {
		labels := maps.Clone(j.Spec.Template.Metadata.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[model.LabelJobName] = j.Metadata.Name
		return &model.Pod{
			Metadata: model.ObjectMeta{Name: j.Metadata.Name + "-" + podSuffix(), Namespace: j.Metadata.Namespace, Labels: labels,
				Annotations: maps.Clone(j.Spec.Template.Metadata.Annotations),
				OwnerReferences: []model.OwnerReference{{APIVersion: model.APIVersionBatch, Kind: model.KindJob, Name: j.Metadata.Name,
					UID: j.Metadata.UID, Controller: &yes}}},
			Spec:   j.Spec.Template.Spec,
			Status: model.PodStatus{Phase: model.PodPending},
		}
	})
	if err != nil {
		return fmt.Errorf("create a pod of job %s: %w", j.Metadata.Name, err)
	}
	return nil
}

// deleteJobPods starts the deletion of the job's pods that pick selects
// (nil: all) and says how many pods of the job are left.
func (a *Control) deleteJobPods(ctx context.Context, ref controlapi.JobRef, uid string, pick func(*model.Pod) bool) (int, error) {
	pods, err := ownedPodsOf(ctx, a.Store, model.KindJob, ref.Namespace, ref.Name, uid)
	if err != nil {
		return 0, err
	}
	for i := range pods {
		p := &pods[i]
		if p.Metadata.DeletionTimestamp != nil || (pick != nil && !pick(p)) {
			continue
		}
		if err := a.deletePod(ctx, p.Metadata.Namespace, p.Metadata.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return len(pods), err
		}
	}
	return len(pods), nil
}

// finishJobDeletion deletes a deleting job's pods, and once the last is
// gone the job.
func (a *Control) finishJobDeletion(ctx context.Context, j *model.Job) (controlapi.JobSyncResult, error) {
	ref := controlapi.JobRef{Namespace: j.Metadata.Namespace, Name: j.Metadata.Name}
	left, err := a.deleteJobPods(ctx, ref, j.Metadata.UID, nil)
	if err != nil || left > 0 {
		return controlapi.JobSyncResult{}, err
	}
	if _, err := a.Store.Jobs().Delete(ctx, ref.Namespace, ref.Name, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		return controlapi.JobSyncResult{}, err
	}
	return controlapi.JobSyncResult{Gone: true}, nil
}
