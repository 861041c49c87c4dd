package api

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// ReplicaSets are how Kubernetes clients find a deployment's revisions:
// kubectl rollout history and undo list them by the deployment's
// selector and keep those it controls; describe shows the new one and
// the old ones with pods. zonewright keeps revisions as
// ControllerRevisions, so each ReplicaSet here is derived, on every read,
// from a revision, its deployment and the deployment's pods of that
// revision. Nothing writes them: the deployment does, through its
// revisions.

// replicaSetPod is what a ReplicaSet counts of one of its pods.
type replicaSetPod struct {
	ready, available bool
}

// replicaSetOf derives the ReplicaSet of revision rev of deployment d
// (nil when the deployment is gone: the revision is on its way out too)
// from d's active pods of that revision; newest says whether rev is the
// deployment's current revision, which the deployment scales to its
// replicas, where it keeps of an older one only the pods it has not yet
// replaced.
func replicaSetOf(d *model.Deployment, rev *model.ControllerRevision, newest bool, pods []replicaSetPod) model.ReplicaSet {
	hash := rev.Metadata.Labels[model.LabelPodTemplateHash]
	m := rev.Metadata
	rs := model.ReplicaSet{TypeMeta: model.TypeMeta{APIVersion: model.APIVersionApps, Kind: model.KindReplicaSet},
		Metadata: model.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			Generation: max(m.Generation, 1), CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
			OwnerReferences: slices.Clone(m.OwnerReferences)}}
	annotations := maps.Clone(m.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[model.AnnotationRevision] = strconv.FormatInt(rev.Revision, 10)

	t := rev.Data
	t.Metadata.Labels = maps.Clone(t.Metadata.Labels)
	if t.Metadata.Labels == nil {
		t.Metadata.Labels = map[string]string{}
	}
	t.Metadata.Labels[model.LabelPodTemplateHash] = hash
	rs.Metadata.Labels = maps.Clone(t.Metadata.Labels)
	rs.Spec.Template = t

	// The revision's labels are its deployment's selector and the hash:
	// the ReplicaSet's selector even when the deployment is gone.
	rs.Spec.Selector = &model.LabelSelector{MatchLabels: maps.Clone(m.Labels)}
	var active, ready, available int32
	for _, p := range pods {
		active++
		if p.ready {
			ready++
		}
		if p.available {
			available++
		}
	}
	replicas := active
	if d != nil {
		rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
		if newest && d.Metadata.DeletionTimestamp == nil {
			replicas = d.DesiredReplicas()
		}
		annotations[model.AnnotationDesiredReplicas] = strconv.FormatInt(int64(d.DesiredReplicas()), 10)
		rs.Metadata.ResourceVersion = newestVersion(m.ResourceVersion, d.Metadata.ResourceVersion)
	}
	rs.Metadata.Annotations = annotations
	rs.Spec.Replicas = &replicas
	rs.Status = model.ReplicaSetStatus{Replicas: active, FullyLabeledReplicas: active, ReadyReplicas: ready, AvailableReplicas: available,
		ObservedGeneration: rs.Metadata.Generation}
	return rs
}

// newestVersion is the greater of two resourceVersions: a derived object
// changes when any of its sources does.
func newestVersion(a, b string) string {
	x, _ := strconv.ParseInt(a, 10, 64)
	y, _ := strconv.ParseInt(b, 10, 64)
	if y > x {
		return b
	}
	return a
}

// replicaSets derives the ReplicaSets of the revisions revs, whose
// deployments are among deps and whose pods among pods, in revs' order.
// A revision its deployment does not control (another of the same name
// since, or none) is no ReplicaSet.
func replicaSets(deps []model.Deployment, revs []model.ControllerRevision, pods []model.Pod, now time.Time) []model.ReplicaSet {
	type key struct{ ns, name string }
	byName := map[key]*model.Deployment{}
	for i := range deps {
		byName[key{deps[i].Metadata.Namespace, deps[i].Metadata.Name}] = &deps[i]
	}
	newest := map[string]int64{} // by deployment uid
	owned := func(r *model.ControllerRevision) *model.Deployment {
		o := model.ControllerOf(&r.Metadata)
		if o == nil || o.Kind != model.KindDeployment {
			return nil
		}
		d := byName[key{r.Metadata.Namespace, o.Name}]
		if d == nil || d.Metadata.UID != o.UID || r.Metadata.Labels[model.LabelPodTemplateHash] == "" {
			return nil
		}
		return d
	}
	for i := range revs {
		if d := owned(&revs[i]); d != nil {
			newest[d.Metadata.UID] = max(newest[d.Metadata.UID], revs[i].Revision)
		}
	}
	type podKey struct{ owner, hash string }
	counted := map[podKey][]replicaSetPod{}
	versions := map[podKey]string{}
	for i := range pods {
		p := &pods[i]
		o := model.ControllerOf(&p.Metadata)
		if o == nil || o.Kind != model.KindDeployment {
			continue
		}
		k := podKey{o.UID, p.Metadata.Labels[model.LabelPodTemplateHash]}
		versions[k] = newestVersion(versions[k], p.Metadata.ResourceVersion)
		// Active as Kubernetes counts a ReplicaSet's pods: neither
		// finished nor being deleted.
		if p.Metadata.DeletionTimestamp != nil || p.Status.Phase == model.PodSucceeded || p.Status.Phase == model.PodFailed {
			continue
		}
		var rp replicaSetPod
		for _, c := range p.Status.Conditions {
			if c.Type != model.PodReady || c.Status != model.ConditionTrue {
				continue
			}
			rp.ready, rp.available = true, true
			if d := byName[key{p.Metadata.Namespace, o.Name}]; d != nil && c.LastTransitionTime != nil {
				minReady := time.Duration(d.Spec.MinReadySeconds) * time.Second
				rp.available = !now.Before(c.LastTransitionTime.Add(minReady))
			}
		}
		counted[k] = append(counted[k], rp)
	}
	out := []model.ReplicaSet{}
	for i := range revs {
		r := &revs[i]
		d := owned(r)
		if d == nil {
			continue
		}
		k := podKey{d.Metadata.UID, r.Metadata.Labels[model.LabelPodTemplateHash]}
		rs := replicaSetOf(d, r, r.Revision == newest[d.Metadata.UID], counted[k])
		rs.Metadata.ResourceVersion = newestVersion(rs.Metadata.ResourceVersion, versions[k])
		out = append(out, rs)
	}
	return out
}

// replicaSetSources reads what the ReplicaSets of namespace ns ("" for
// all) derive from, and the version they are at least as new as.
func (s *Server) replicaSetSources(c *gin.Context, ns string) ([]model.ReplicaSet, int64, error) {
	ctx := c.Request.Context()
	// Read first: every change after it is in the lists or comes after.
	rv, err := s.store.ResourceVersion(ctx)
	if err != nil {
		return nil, 0, err
	}
	deps, err := s.store.Deployments().ListAll(ctx, store.ListOptions{Namespace: ns})
	if err != nil {
		return nil, 0, err
	}
	revs, err := s.store.ControllerRevisions().ListAll(ctx, store.ListOptions{Namespace: ns, LabelSelector: model.LabelPodTemplateHash})
	if err != nil {
		return nil, 0, err
	}
	pods, err := s.store.Pods().ListAll(ctx, store.ListOptions{Namespace: ns, LabelSelector: model.LabelPodTemplateHash})
	if err != nil {
		return nil, 0, err
	}
	slices.SortFunc(revs, func(a, b model.ControllerRevision) int {
		return strings.Compare(a.Metadata.Namespace+"/"+a.Metadata.Name, b.Metadata.Namespace+"/"+b.Metadata.Name)
	})
	return replicaSets(deps, revs, pods, time.Now()), rv, nil
}

// selectReplicaSets keeps the ReplicaSets the list's selectors match;
// the selectors were checked by listRequest.
func selectReplicaSets(all []model.ReplicaSet, o store.ListOptions) ([]model.ReplicaSet, error) {
	labels, err := store.ParseLabelSelector(o.LabelSelector)
	if err != nil {
		return nil, err
	}
	fields, err := store.ParseFieldSelector(o.FieldSelector, replicaSetFields)
	if err != nil {
		return nil, err
	}
	out := []model.ReplicaSet{}
	for _, rs := range all {
		doc := map[string]any{"metadata": map[string]any{"name": rs.Metadata.Name, "namespace": rs.Metadata.Namespace}}
		if labels.Matches(rs.Metadata.Labels) && fields.Matches(doc) {
			out = append(out, rs)
		}
	}
	return out, nil
}

// replicaSetFields are the fields a ReplicaSet's field selector may name.
var replicaSetFields = map[string]string{"metadata.name": "name", "metadata.namespace": "namespace"}

func (s *Server) listReplicaSets(c *gin.Context) {
	ns := c.Param("ns")
	opts, ok := s.listRequest(c, replicaSetWatch{s}, ns)
	if !ok {
		return
	}
	if opts.Continue != "" {
		s.fail(c, badRequestf("continue %q: ReplicaSets are listed whole, with no continue token to follow", opts.Continue))
		return
	}
	all, rv, err := s.replicaSetSources(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	items, err := selectReplicaSets(all, opts)
	if err != nil {
		s.fail(c, err)
		return
	}
	list := model.List[model.ReplicaSet]{TypeMeta: model.TypeMeta{APIVersion: model.APIVersionApps, Kind: model.KindReplicaSet + "List"}, Items: items}
	list.Metadata.ResourceVersion = strconv.FormatInt(rv, 10)
	respond(c, http.StatusOK, list)
}

func (s *Server) getReplicaSet(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	all, _, err := s.replicaSetSources(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	for _, rs := range all {
		if rs.Metadata.Name == name {
			respond(c, http.StatusOK, rs)
			return
		}
	}
	s.fail(c, notFoundf("replicasets.apps %q not found in namespace %q", name, ns))
}

// refuseReplicaSetWrite: a ReplicaSet is a view of a deployment's
// revision; the deployment is what to change.
func (s *Server) refuseReplicaSetWrite(c *gin.Context) {
	c.Header("Allow", "GET")
	s.fail(c, &apiError{code: http.StatusMethodNotAllowed, reason: "MethodNotAllowed",
		msg: c.Request.Method + " is not supported on " + c.Request.URL.Path +
			": ReplicaSets are managed by their deployment (each is one of its revisions); change, scale or roll back the deployment instead"})
}

// replicaSetWatch watches ReplicaSets through their revisions: a
// revision made, promoted again (a rollback) or pruned is a ReplicaSet
// added, modified or deleted, sent as derived when the change is. A
// change of its pods alone is not an event of it (their counts are the
// deployment's status, which a watch of the deployment follows).
type replicaSetWatch struct{ s *Server }

func (w replicaSetWatch) fieldSelectors() map[string]string { return replicaSetFields }

func (w replicaSetWatch) snapshot(c *gin.Context, o store.ListOptions) ([]initialObject, int64, error) {
	all, rv, err := w.s.replicaSetSources(c, o.Namespace)
	if err != nil {
		return nil, 0, err
	}
	items, err := selectReplicaSets(all, o)
	if err != nil {
		return nil, 0, err
	}
	out := make([]initialObject, 0, len(items))
	for i := range items {
		b, err := json.Marshal(&items[i])
		if err != nil {
			return nil, 0, err
		}
		out = append(out, initialObject{b})
	}
	return out, rv, nil
}

// watch follows the revisions; the ReplicaSets' labels are their
// templates', not the revisions', so present applies the label selector.
func (w replicaSetWatch) watch(c *gin.Context, o store.WatchOptions) (*store.Watch, error) {
	c.Set(replicaSetSelectorKey, o.LabelSelector)
	o.LabelSelector = model.LabelPodTemplateHash
	return w.s.store.ControllerRevisions().Watch(c.Request.Context(), o)
}

// replicaSetSelectorKey is where watch leaves the client's label
// selector for present.
const replicaSetSelectorKey = "zonewright.replicaSetSelector"

// present sends the revision's ReplicaSet as it is now; one whose
// revision is gone (pruned, or its deployment deleted) as the revision
// last was, with no pods.
func (w replicaSetWatch) present(c *gin.Context, object json.RawMessage) (json.RawMessage, error) {
	var rev model.ControllerRevision
	if err := json.Unmarshal(object, &rev); err != nil {
		return nil, err
	}
	rs := replicaSetOf(nil, &rev, false, nil)
	all, _, err := w.s.replicaSetSources(c, rev.Metadata.Namespace)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Metadata.UID == rev.Metadata.UID {
			rs = all[i]
		}
	}
	sel, err := store.ParseLabelSelector(c.GetString(replicaSetSelectorKey))
	if err != nil {
		return nil, err
	}
	if !sel.Matches(rs.Metadata.Labels) {
		return nil, nil // not one the client watches
	}
	return json.Marshal(&rs)
}
