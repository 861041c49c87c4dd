package controlops

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pglock"
	"github.com/zonewright/zonewright/internal/progress"
	"github.com/zonewright/zonewright/internal/rollout"
	"github.com/zonewright/zonewright/internal/store"
)

// EventSourceDeployment signs the events a deployment's sync records.
const EventSourceDeployment = "deployment-controller"

// SyncDeployment brings a deployment one step closer to its spec: it
// reads the deployment, its revisions and its pods, computes the rollout
// plan, creates and deletes pods as planned, and writes the status. It is
// level-triggered and idempotent: run again after a crash, it starts from
// what is there, so it never creates a pod twice. Two syncs of one
// deployment never overlap (oneSyncAtATime).
func (a *Control) SyncDeployment(ctx context.Context, ref controlapi.DeploymentRef) (res controlapi.DeploymentSyncResult, err error) {
	err = a.oneSyncAtATime(ctx, model.KindDeployment, ref.Namespace, ref.Name, func() error {
		res, err = a.syncDeployment(ctx, ref)
		return err
	})
	return res, err
}

// oneSyncAtATime runs fn, a sync, while no other sync of the same workload runs,
// here or in another control plane: a retried attempt may start while the
// first, alive but late with its heartbeat, still runs, and both would
// create the pods they find missing. It reports progress while it waits.
func (a *Control) oneSyncAtATime(ctx context.Context, kind, namespace, name string, fn func() error) error {
	waiting := make(chan struct{})
	var stopWaiting sync.Once
	stop := func() { stopWaiting.Do(func() { close(waiting) }) }
	defer stop()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				progress.Report(ctx, "waiting for the running sync of "+kind+" "+namespace+"/"+name)
			case <-waiting:
				return
			}
		}
	}()
	return a.Store.Exclusive(ctx, pglock.Sync, kind+"/"+namespace+"/"+name, func() error {
		stop()
		return fn()
	})
}

func (a *Control) syncDeployment(ctx context.Context, ref controlapi.DeploymentRef) (controlapi.DeploymentSyncResult, error) {
	d, err := a.Store.Deployments().Get(ctx, ref.Namespace, ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		left, err := a.deleteOwnedPods(ctx, ref, "")
		return controlapi.DeploymentSyncResult{Gone: err == nil && left == 0}, err
	}
	if err != nil {
		return controlapi.DeploymentSyncResult{}, err
	}
	if d.Metadata.DeletionTimestamp != nil {
		return a.finishDeploymentDeletion(ctx, d)
	}
	s := &deploymentSync{Control: a, d: d, now: time.Now().UTC()}
	return s.run(ctx)
}

// deploymentSync is one sync of one deployment.
type deploymentSync struct {
	*Control
	d         *model.Deployment
	now       time.Time
	revisions []model.ControllerRevision
	current   *model.ControllerRevision
	created   bool // the current revision was made by this sync
	// failedCreate says why the template's pods could not be created.
	failedCreate string
}

func (s *deploymentSync) run(ctx context.Context) (controlapi.DeploymentSyncResult, error) {
	d := s.d
	if err := s.loadRevisions(ctx); err != nil {
		return controlapi.DeploymentSyncResult{}, err
	}
	if err := s.ensureCurrentRevision(ctx); err != nil {
		return controlapi.DeploymentSyncResult{}, err
	}
	if err := s.keepRevisionAnnotations(ctx); err != nil {
		return controlapi.DeploymentSyncResult{}, err
	}
	pods, err := ownedPods(ctx, s.Store, d.Metadata.Namespace, d.Metadata.Name, d.Metadata.UID)
	if err != nil {
		return controlapi.DeploymentSyncResult{}, err
	}
	spec := s.planSpec()
	rpods := rolloutPods(pods, s.now)
	if err := s.markHealthy(ctx, spec, pods, rpods); err != nil {
		return controlapi.DeploymentSyncResult{}, err
	}
	plan := rollout.Compute(spec, rpods, s.now)
	// Deletions first: a finished pod's replacement must not run beside it.
	for _, name := range plan.Delete {
		if err := s.deletePod(ctx, d.Metadata.Namespace, name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return controlapi.DeploymentSyncResult{}, err
		}
		progress.Report(ctx, "deleted "+name)
	}
	for i := int32(0); i < plan.Create; i++ {
		err := s.createPod(ctx)
		if msg, ok := failedCreate(err); ok {
			s.failedCreate = msg // the rest would fail alike
			break
		}
		if err != nil {
			return controlapi.DeploymentSyncResult{}, err
		}
		progress.Report(ctx, fmt.Sprintf("created %d of %d", i+1, plan.Create))
	}
	for _, name := range plan.Unhealthy {
		s.event(ctx, "Warning", "UnhealthyPod", fmt.Sprintf("pod %s was not Ready within healthyDeadlineSeconds; replacing it", name))
	}
	wake, err := s.writeStatus(ctx, spec, plan)
	if err != nil {
		return controlapi.DeploymentSyncResult{}, err
	}
	if err := s.pruneRevisions(ctx, pods); err != nil {
		return controlapi.DeploymentSyncResult{}, err
	}
	res := controlapi.DeploymentSyncResult{}
	if !wake.IsZero() {
		res.WakeAfter = max(wake.Sub(s.now), time.Second)
	}
	return res, nil
}

// planSpec is the deployment's spec as the plan takes it.
func (s *deploymentSync) planSpec() rollout.Spec {
	d := s.d
	replicas := d.DesiredReplicas()
	spec := rollout.Spec{Replicas: replicas, Strategy: d.Spec.Strategy.Type, NewHash: revisionHash(s.current),
		MinReady: time.Duration(d.Spec.MinReadySeconds) * time.Second, Paused: d.Spec.Paused}
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && d.Spec.Strategy.Type == model.StrategyRollingUpdate {
		surge, unavail := int32(0), int32(0)
		if ru.MaxSurge != nil {
			surge, _ = model.ScaledValue(*ru.MaxSurge, replicas, true)
		}
		if ru.MaxUnavailable != nil {
			unavail, _ = model.ScaledValue(*ru.MaxUnavailable, replicas, false)
		}
		spec.MaxSurge, spec.MaxUnavailable = rollout.Fenceposts(surge, unavail)
		spec.HealthyDeadline = time.Duration(ru.HealthyDeadlineSeconds) * time.Second
	}
	return spec
}

func revisionHash(r *model.ControllerRevision) string {
	return r.Metadata.Labels[model.LabelPodTemplateHash]
}

// loadRevisions reads the deployment's revisions, oldest first.
func (s *deploymentSync) loadRevisions(ctx context.Context) error {
	list, err := s.Store.ControllerRevisions().ListAll(ctx, store.ListOptions{Namespace: s.d.Metadata.Namespace, LabelSelector: SelectorString(s.d.Spec.Selector)})
	if err != nil {
		return err
	}
	s.revisions = nil
	for _, r := range list {
		if owner := model.ControllerOf(&r.Metadata); owner != nil && owner.UID == s.d.Metadata.UID {
			s.revisions = append(s.revisions, r)
		}
	}
	sort.Slice(s.revisions, func(i, j int) bool { return s.revisions[i].Revision < s.revisions[j].Revision })
	return nil
}

func (s *deploymentSync) maxRevision() int64 {
	if len(s.revisions) == 0 {
		return 0
	}
	return s.revisions[len(s.revisions)-1].Revision
}

// ensureCurrentRevision finds or makes the revision of the template. A
// paused deployment keeps the revision it runs, so an edit waits for
// resume; a template that matches an older revision (a rollback) makes
// that revision the newest again, as Kubernetes does.
func (s *deploymentSync) ensureCurrentRevision(ctx context.Context) error {
	d := s.d
	if d.Spec.Paused && len(s.revisions) > 0 {
		s.current = &s.revisions[len(s.revisions)-1]
		return nil
	}
	hash := rollout.TemplateHash(d.Spec.Template)
	for i := range s.revisions {
		r := &s.revisions[i]
		if revisionHash(r) != hash {
			continue
		}
		if !sameTemplate(r.Data, d.Spec.Template) {
			// Two templates with one 32-bit hash: refuse rather than run
			// the wrong one; any edit of the template gets another hash.
			return fmt.Errorf("the template's hash %s is that of revision %d, a different template; change the template (an annotation will do)", hash, r.Revision)
		}
		if r.Revision != s.maxRevision() {
			r.Revision = s.maxRevision() + 1
			if err := s.Store.ControllerRevisions().Update(ctx, r); err != nil {
				return err
			}
			sort.Slice(s.revisions, func(i, j int) bool { return s.revisions[i].Revision < s.revisions[j].Revision })
			s.created = true
			return s.ensureCurrentRevision(ctx)
		}
		s.current = r
		return nil
	}
	labels := maps.Clone(d.Spec.Selector.MatchLabels)
	labels[model.LabelPodTemplateHash] = hash
	r := &model.ControllerRevision{
		Metadata: model.ObjectMeta{Name: d.Metadata.Name + "-" + hash, Namespace: d.Metadata.Namespace, Labels: labels,
			Annotations: model.RevisionAnnotations(d), OwnerReferences: []model.OwnerReference{ownerRef(d)}},
		ControllerRevisionData: model.ControllerRevisionData{Data: d.Spec.Template, Revision: s.maxRevision() + 1},
	}
	if err := s.Store.ControllerRevisions().Create(ctx, r); err != nil {
		if errors.Is(err, store.ErrAlreadyExists) {
			// Left by an earlier deployment of this name: not ours.
			return fmt.Errorf("revision %s belongs to another deployment; it goes with that one's cleanup: %w", r.Metadata.Name, err)
		}
		return err
	}
	s.revisions = append(s.revisions, *r)
	s.current = &s.revisions[len(s.revisions)-1]
	s.created = true
	s.event(ctx, "Normal", "NewRevision", fmt.Sprintf("revision %d (%s) of the pod template", r.Revision, hash))
	return nil
}

// keepRevisionAnnotations keeps the current revision's annotations those
// of its deployment, as Kubernetes keeps its new ReplicaSet's: an
// annotation added after the rollout (a change-cause) goes with the
// revision, and kubectl rollout undo brings it back with its template.
// A paused deployment's annotations wait, as its template does.
func (s *deploymentSync) keepRevisionAnnotations(ctx context.Context) error {
	want := model.RevisionAnnotations(s.d)
	if s.d.Spec.Paused || maps.Equal(want, s.current.Metadata.Annotations) {
		return nil
	}
	s.current.Metadata.Annotations = want
	return s.Store.ControllerRevisions().Update(ctx, s.current)
}

func sameTemplate(a, b model.PodTemplate) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func ownerRef(d *model.Deployment) model.OwnerReference {
	yes := true
	return model.OwnerReference{APIVersion: model.APIVersionApps, Kind: model.KindDeployment, Name: d.Metadata.Name, UID: d.Metadata.UID, Controller: &yes}
}

// SelectorString is matchLabels as a label selector query.
func SelectorString(sel *model.LabelSelector) string {
	if sel == nil {
		return ""
	}
	keys := slices.Sorted(maps.Keys(sel.MatchLabels))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + sel.MatchLabels[k]
	}
	return strings.Join(parts, ",")
}

// ownedPods lists the pods whose controller is the deployment (by uid,
// or by name when uid is empty).
func ownedPods(ctx context.Context, st *store.Store, ns, name, uid string) ([]model.Pod, error) {
	return ownedPodsOf(ctx, st, model.KindDeployment, ns, name, uid)
}

// rolloutPods is what the plan needs of each pod.
func rolloutPods(pods []model.Pod, now time.Time) []rollout.Pod {
	out := make([]rollout.Pod, 0, len(pods))
	for _, p := range pods {
		rp := rollout.Pod{Name: p.Metadata.Name, Hash: p.Metadata.Labels[model.LabelPodTemplateHash],
			Scheduled: p.Spec.NodeName != "", Terminating: p.Metadata.DeletionTimestamp != nil,
			Finished: p.Status.Phase == model.PodFailed || p.Status.Phase == model.PodSucceeded}
		if c := p.Metadata.CreationTimestamp; c != nil {
			rp.Created = *c
		}
		_, rp.WasAvailable = p.Metadata.Annotations[model.AnnotationHealthyAt]
		for _, c := range p.Status.Conditions {
			if c.Type == model.PodReady && c.Status == model.ConditionTrue {
				since := now
				if c.LastTransitionTime != nil {
					since = *c.LastTransitionTime
				}
				rp.ReadySince = &since
			}
		}
		out = append(out, rp)
	}
	return out
}

// markHealthy records on each pod available for the first time that it
// has met its healthy deadline, so that losing Ready later (its node
// silent while the control plane restarts, a probe failing) never counts
// as a failed rollout. Without a deadline there is nothing to record.
func (s *deploymentSync) markHealthy(ctx context.Context, spec rollout.Spec, pods []model.Pod, rpods []rollout.Pod) error {
	if spec.HealthyDeadline <= 0 {
		return nil
	}
	at := s.now.Format(time.RFC3339)
	for i := range rpods {
		rp := &rpods[i]
		if rp.WasAvailable || rp.Terminating || !rp.Available(spec.MinReady, s.now) {
			continue
		}
		uid := pods[i].Metadata.UID
		_, err := s.Store.Pods().Modify(ctx, pods[i].Metadata.Namespace, rp.Name, func(p *model.Pod) bool {
			if p.Metadata.UID != uid {
				return false
			}
			if _, ok := p.Metadata.Annotations[model.AnnotationHealthyAt]; ok {
				return false
			}
			if p.Metadata.Annotations == nil {
				p.Metadata.Annotations = map[string]string{}
			}
			p.Metadata.Annotations[model.AnnotationHealthyAt] = at
			return true
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("mark pod %s healthy: %w", rp.Name, err)
		}
		rp.WasAvailable = true
	}
	return nil
}

// createPod makes one pod of the current revision and starts its
// lifecycle.
func (s *deploymentSync) createPod(ctx context.Context) error {
	d, rev := s.d, s.current
	hash := revisionHash(rev)
	err := s.createOwnedPod(ctx, func() *model.Pod {
		labels := maps.Clone(rev.Data.Metadata.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[model.LabelPodTemplateHash] = hash
		return &model.Pod{
			Metadata: model.ObjectMeta{Name: d.Metadata.Name + "-" + hash + "-" + podSuffix(), Namespace: d.Metadata.Namespace,
				Labels: labels, Annotations: maps.Clone(rev.Data.Metadata.Annotations), OwnerReferences: []model.OwnerReference{ownerRef(d)}},
			Spec:   rev.Data.Spec,
			Status: model.PodStatus{Phase: model.PodPending},
		}
	})
	if err != nil {
		return fmt.Errorf("create a pod of deployment %s: %w", d.Metadata.Name, err)
	}
	return nil
}

// podSuffix is five characters of Kubernetes' alphabet for generated names.
func podSuffix() string {
	const chars = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}

// deleteOwnedPods starts the deletion of every pod of a deployment and
// says how many are left (terminating ones included).
func (a *Control) deleteOwnedPods(ctx context.Context, ref controlapi.DeploymentRef, uid string) (int, error) {
	pods, err := ownedPods(ctx, a.Store, ref.Namespace, ref.Name, uid)
	if err != nil {
		return 0, err
	}
	for _, p := range pods {
		if p.Metadata.DeletionTimestamp != nil {
			continue
		}
		if err := a.deletePod(ctx, p.Metadata.Namespace, p.Metadata.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return len(pods), err
		}
	}
	return len(pods), nil
}

// finishDeploymentDeletion deletes a deleting deployment's pods
// gracefully, and once the last is gone its revisions and its row.
func (a *Control) finishDeploymentDeletion(ctx context.Context, d *model.Deployment) (controlapi.DeploymentSyncResult, error) {
	ref := controlapi.DeploymentRef{Namespace: d.Metadata.Namespace, Name: d.Metadata.Name}
	left, err := a.deleteOwnedPods(ctx, ref, d.Metadata.UID)
	if err != nil || left > 0 {
		return controlapi.DeploymentSyncResult{}, err // the pods' removals wake the workflow
	}
	revs, err := a.Store.ControllerRevisions().ListAll(ctx, store.ListOptions{Namespace: d.Metadata.Namespace, LabelSelector: SelectorString(d.Spec.Selector)})
	if err != nil {
		return controlapi.DeploymentSyncResult{}, err
	}
	for _, r := range revs {
		if o := model.ControllerOf(&r.Metadata); o != nil && o.UID == d.Metadata.UID {
			if _, err := a.Store.ControllerRevisions().Delete(ctx, r.Metadata.Namespace, r.Metadata.Name, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
				return controlapi.DeploymentSyncResult{}, err
			}
		}
	}
	if _, err := a.Store.Deployments().Delete(ctx, d.Metadata.Namespace, d.Metadata.Name, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		return controlapi.DeploymentSyncResult{}, err
	}
	return controlapi.DeploymentSyncResult{Gone: true}, nil
}

// writeStatus writes the counts, conditions and revision the sync saw,
// reverts a failed rollout when the deployment asks for it, and returns
// when the next look is due.
func (s *deploymentSync) writeStatus(ctx context.Context, spec rollout.Spec, plan rollout.Plan) (time.Time, error) {
	d, now := s.d, s.now
	old := d.Status
	st := d.Status
	st.Conditions = slices.Clone(old.Conditions)
	st.ObservedGeneration = d.Metadata.Generation
	c := plan.Counts
	st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, st.UnavailableReplicas = c.Replicas, c.Updated, c.Ready, c.Available, c.Unavailable
	if st.Revision != s.current.Revision && s.created {
		st.FailedPods = 0
	}
	st.Revision = s.current.Revision
	st.FailedPods += int32(len(plan.Unhealthy))
	wake := plan.WakeAt

	if c.Available >= spec.Replicas-spec.MaxUnavailable {
		st.SetCondition(model.DeploymentCondition{Type: model.DeploymentAvailable, Status: model.ConditionTrue, Reason: model.ReasonMinimumReplicasAvailable, Message: "Deployment has minimum availability."}, now)
	} else {
		st.SetCondition(model.DeploymentCondition{Type: model.DeploymentAvailable, Status: model.ConditionFalse, Reason: model.ReasonMinimumReplicasUnavailable, Message: "Deployment does not have minimum availability."}, now)
	}
	deadline := time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
	revName := s.current.Metadata.Name
	failed := s.setProgressing(&st, old, spec, plan, deadline)
	if prog := st.Condition(model.DeploymentProgressing); prog.Status == model.ConditionTrue && prog.Reason != model.ReasonNewReplicaSetAvailable && prog.LastUpdateTime != nil {
		if due := prog.LastUpdateTime.Add(deadline); wake.IsZero() || due.Before(wake) {
			wake = due
		}
	}
	// Too many failed new pods fail the rollout once, when the count
	// reaches replicas: every slot had a pod that never became Ready.
	if threshold := max(spec.Replicas, 1); failed == "" && old.FailedPods < threshold && st.FailedPods >= threshold && !c.Complete(spec.Replicas) {
		failed = fmt.Sprintf("%d new pods of revision %d (%s) missed their healthy deadline", st.FailedPods, s.current.Revision, revName)
	}
	revertTo := s.revertTarget(failed, &st)
	wake = earliest(wake, s.replicaFailure(ctx, &st))
	if revertTo == nil && sameJSON(old, st) {
		return wake, nil
	}
	d.Status = st
	reverted := ""
	if revertTo != nil {
		reverted = fmt.Sprintf("%s; reverted to revision %d (%s), the last fully available", failed, revertTo.Revision, revertTo.Metadata.Name)
		d.Spec.Template = revertTo.Data
		d.Status.SetCondition(model.DeploymentCondition{Type: model.DeploymentProgressing, Status: model.ConditionFalse, Reason: model.ReasonRolledBack, Message: reverted}, now)
		d.Status.FailedPods = 0
	}
	if d.Metadata.Annotations == nil {
		d.Metadata.Annotations = map[string]string{}
	}
	d.Metadata.Annotations[model.AnnotationRevision] = strconv.FormatInt(s.current.Revision, 10)
	if err := s.Store.Deployments().Update(ctx, d); err != nil {
		return wake, err
	}
	// The events follow the write: one that said "reverted" before the
	// deployment did would send a reader (zwctl rollout status) to a
	// revert not yet there, or to one a failed write never made.
	if failed != "" {
		s.event(ctx, "Warning", "RolloutFailed", failed)
	}
	if revertTo != nil {
		s.event(ctx, "Warning", model.ReasonRolledBack, reverted)
		wake = now // sync the reverted template at once
	}
	return wake, nil
}

// setProgressing sets the Progressing condition of st, the status the
// sync writes over old; failed says why the rollout failed, if it did
// (its deadline passed).
func (s *deploymentSync) setProgressing(st *model.DeploymentStatus, old model.DeploymentStatus, spec rollout.Spec, plan rollout.Plan, deadline time.Duration) (failed string) {
	d, now, c := s.d, s.now, plan.Counts
	prog := st.Condition(model.DeploymentProgressing)
	revName := s.current.Metadata.Name
	// Kubernetes also counts more Ready pods as progress; a crash-looping
	// pod is Ready for moments between restarts, and would keep a failed
	// rollout from ever reaching its deadline.
	progressed := c.Updated != old.UpdatedReplicas || c.Available > old.AvailableReplicas || c.Replicas-c.Updated < old.Replicas-old.UpdatedReplicas
	switch {
	case d.Spec.Paused:
		st.SetCondition(model.DeploymentCondition{Type: model.DeploymentProgressing, Status: model.ConditionUnknown, Reason: model.ReasonDeploymentPaused, Message: "Deployment is paused"}, now)
	case c.Complete(spec.Replicas) && len(plan.Delete) == 0 && plan.Create == 0:
		st.SetCondition(model.DeploymentCondition{Type: model.DeploymentProgressing, Status: model.ConditionTrue, Reason: model.ReasonNewReplicaSetAvailable,
			Message: fmt.Sprintf("revision %d (%s) has successfully progressed", s.current.Revision, revName)}, now)
		st.StableRevision, st.FailedPods = revName, 0
	case s.created || (prog != nil && prog.Reason == model.ReasonDeploymentPaused):
		t := now
		st.SetCondition(model.DeploymentCondition{Type: model.DeploymentProgressing, Status: model.ConditionTrue, Reason: model.ReasonNewReplicaSetCreated,
			Message: fmt.Sprintf("revision %d (%s) is rolling out", s.current.Revision, revName), LastUpdateTime: &t}, now)
	case progressed || prog == nil:
		t := now
		st.SetCondition(model.DeploymentCondition{Type: model.DeploymentProgressing, Status: model.ConditionTrue, Reason: model.ReasonReplicaSetUpdated,
			Message: fmt.Sprintf("revision %d (%s) is progressing", s.current.Revision, revName), LastUpdateTime: &t}, now)
	case prog.Status == model.ConditionTrue && prog.Reason != model.ReasonNewReplicaSetAvailable && prog.LastUpdateTime != nil && !now.Before(prog.LastUpdateTime.Add(deadline)):
		failed = fmt.Sprintf("revision %d (%s) has timed out progressing", s.current.Revision, revName)
		st.SetCondition(model.DeploymentCondition{Type: model.DeploymentProgressing, Status: model.ConditionFalse, Reason: model.ReasonProgressDeadlineExceeded, Message: failed}, now)
	}
	return failed
}

// revertTarget is the revision a failed rollout reverts to: the stable
// one, when the deployment reverts by itself; nil for none.
func (s *deploymentSync) revertTarget(failed string, st *model.DeploymentStatus) *model.ControllerRevision {
	d := s.d
	if failed == "" || !d.Spec.AutoRevert || d.Spec.Paused || st.StableRevision == "" || st.StableRevision == s.current.Metadata.Name {
		return nil
	}
	var revertTo *model.ControllerRevision
	for i := range s.revisions {
		if s.revisions[i].Metadata.Name == st.StableRevision {
			revertTo = &s.revisions[i]
		}
	}
	return revertTo
}

// replicaFailure sets or clears the ReplicaFailure condition after the
// sync's creates (telling of a new failure in an event) and returns when
// to retry a failed create (zero: none failed).
func (s *deploymentSync) replicaFailure(ctx context.Context, st *model.DeploymentStatus) time.Time {
	if s.failedCreate == "" {
		st.RemoveCondition(model.ConditionReplicaFailure)
		return time.Time{}
	}
	if old := st.Condition(model.ConditionReplicaFailure); old == nil || old.Message != s.failedCreate {
		s.event(ctx, "Warning", model.ReasonFailedCreate, s.failedCreate)
	}
	st.SetCondition(model.DeploymentCondition{Type: model.ConditionReplicaFailure, Status: model.ConditionTrue,
		Reason: model.ReasonFailedCreate, Message: s.failedCreate}, s.now)
	return createRetryAt(st.Condition(model.ConditionReplicaFailure).LastTransitionTime, s.now)
}

// sameJSON reports whether two statuses read the same.
func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// pruneRevisions deletes the oldest revisions beyond revisionHistoryLimit
// that no pod runs any more; the current and the stable one stay.
func (s *deploymentSync) pruneRevisions(ctx context.Context, pods []model.Pod) error {
	limit := int(*s.d.Spec.RevisionHistoryLimit)
	running := map[string]bool{}
	for _, p := range pods {
		running[p.Metadata.Labels[model.LabelPodTemplateHash]] = true
	}
	var old []model.ControllerRevision
	for _, r := range s.revisions {
		if r.Metadata.Name != s.current.Metadata.Name && r.Metadata.Name != s.d.Status.StableRevision && !running[revisionHash(&r)] {
			old = append(old, r)
		}
	}
	for i := 0; i < len(old)-limit; i++ {
		if _, err := s.Store.ControllerRevisions().Delete(ctx, old[i].Metadata.Namespace, old[i].Metadata.Name, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	return nil
}

func (s *deploymentSync) event(ctx context.Context, typ, reason, msg string) {
	d := s.d
	_ = s.Store.RecordEvent(ctx, model.ObjectReference{Kind: model.KindDeployment, Namespace: d.Metadata.Namespace, Name: d.Metadata.Name, UID: d.Metadata.UID},
		typ, reason, msg, EventSourceDeployment)
}
