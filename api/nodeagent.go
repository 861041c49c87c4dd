package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/nodeapi"
	"github.com/zonewright/zonewright/internal/podcidr"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// The node-facing routes: what a node's agent uses instead of the
// database. Every one names the node (or, for pod reports, the pod whose
// report names its node), so an authorisation layer can let a node
// identity use only its own.

// nodeAgentEventSource is the source of the events nodes record.
const nodeAgentEventSource = "zonewright-agent"

// putNodeStatus (nodes/status update) registers the node or writes its
// status: the node is the only source of its status and of what its agent
// owns (its brand and hostname labels, its zone summary annotations); the
// control plane keeps the rest (other labels and annotations, taints,
// unschedulable) and assigns spec.podCIDR. A write that changes nothing
// is not made.
func (s *Server) putNodeStatus(c *gin.Context) {
	ctx := c.Request.Context()
	name := c.Param("name")
	var in model.Node
	if err := decode(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	if err := checkTypeMeta(&in.TypeMeta, model.KindNode); err != nil {
		s.fail(c, err)
		return
	}
	if in.Metadata.Name != "" && in.Metadata.Name != name {
		s.fail(c, invalid(model.KindNode, name, model.FieldErrors{{Field: "metadata.name", Type: model.FieldInvalid,
			Detail: fmt.Sprintf("Invalid value: %q: must be the node of the path, %q", in.Metadata.Name, name)}}))
		return
	}
	in.Metadata.Name = name
	if errs := model.ValidateNode(&in); len(errs) > 0 {
		s.fail(c, invalid(model.KindNode, name, errs))
		return
	}
	for range 10 {
		cur, err := s.store.Nodes().Get(ctx, "", name)
		if errors.Is(err, store.ErrNotFound) {
			n, err := s.registerNode(ctx, &in)
			if errors.Is(err, store.ErrAlreadyExists) {
				continue // registered concurrently: update it
			}
			if err != nil {
				s.fail(c, err)
				return
			}
			respond(c, http.StatusCreated, n)
			return
		}
		if err != nil {
			s.fail(c, err)
			return
		}
		want := in.Spec.PodCIDR
		if cur.Spec.PodCIDR != "" {
			if want != "" && want != cur.Spec.PodCIDR {
				s.fail(c, cidrError(fmt.Errorf("%w: node %s holds %s for its life; it cannot take %s", podcidr.ErrHeld, name, cur.Spec.PodCIDR, want)))
				return
			}
			want = cur.Spec.PodCIDR
		}
		cidr, err := s.podCIDRs.Assign(ctx, name, want)
		if err != nil {
			s.fail(c, cidrError(err))
			return
		}
		next := *cur
		next.Metadata.Labels = copyMap(cur.Metadata.Labels)
		next.Metadata.Annotations = copyMap(cur.Metadata.Annotations)
		applyNodeReport(&next, &in, cidr)
		if reflect.DeepEqual(&next, cur) {
			respond(c, http.StatusOK, cur)
			return
		}
		err = s.store.Nodes().Update(ctx, &next)
		if errors.Is(err, store.ErrConflict) {
			continue // an operator or node health wrote it meanwhile
		}
		if err != nil {
			s.fail(c, err)
			return
		}
		respond(c, http.StatusOK, &next)
		return
	}
	s.fail(c, &apiError{code: http.StatusConflict, reason: "Conflict", msg: "the node kept changing under the status write; retry"})
}

// registerNode creates a node from its first status report.
func (s *Server) registerNode(ctx context.Context, in *model.Node) (*model.Node, error) {
	name := in.Metadata.Name
	cidr, err := s.podCIDRs.Assign(ctx, name, in.Spec.PodCIDR)
	if err != nil {
		return nil, cidrError(err)
	}
	n := &model.Node{Metadata: model.ObjectMeta{Name: name}}
	model.DefaultNode(n)
	applyNodeReport(n, in, cidr)
	if err := s.store.Nodes().Create(ctx, n); err != nil {
		return nil, err
	}
	s.ensureNodeHealth(ctx, name)
	return n, nil
}

// applyNodeReport copies onto n what the node owns from its report.
func applyNodeReport(n, report *model.Node, cidr string) {
	n.Spec.PodCIDR = cidr
	n.Status = report.Status
	if n.Metadata.Labels == nil {
		n.Metadata.Labels = map[string]string{}
	}
	if n.Metadata.Annotations == nil {
		n.Metadata.Annotations = map[string]string{}
	}
	for k := range n.Metadata.Labels {
		if model.AgentOwnedLabel(k) {
			delete(n.Metadata.Labels, k)
		}
	}
	for k, v := range report.Metadata.Labels {
		if model.AgentOwnedLabel(k) {
			n.Metadata.Labels[k] = v
		}
	}
	for k := range n.Metadata.Annotations {
		if model.AgentOwnedAnnotation(k) {
			delete(n.Metadata.Annotations, k)
		}
	}
	for k, v := range report.Metadata.Annotations {
		if model.AgentOwnedAnnotation(k) {
			n.Metadata.Annotations[k] = v
		}
	}
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cidrError maps the pod CIDR allocator's refusals to their statuses.
func cidrError(err error) error {
	switch {
	case errors.Is(err, podcidr.ErrOverlap), errors.Is(err, podcidr.ErrHeld):
		return &apiError{code: http.StatusConflict, reason: "Conflict", msg: err.Error()}
	case errors.Is(err, podcidr.ErrInvalid):
		return &apiError{code: http.StatusUnprocessableEntity, reason: "Invalid", msg: err.Error(),
			details: &model.StatusDetails{Kind: model.KindNode, Causes: []model.StatusCause{{Type: model.FieldInvalid, Field: "spec.podCIDR", Message: err.Error()}}}}
	case errors.Is(err, podcidr.ErrExhausted):
		return &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", msg: err.Error()}
	}
	return err
}

func (s *Server) ensureNodeHealth(ctx context.Context, name string) {
	// The node exists now; should Temporal not answer, the control
	// plane's node watch and the reconciler start its health workflow.
	if err := s.nodes.Ensure(ctx, name); err != nil {
		s.log.Warn("could not start the node's health workflow yet", "node", name, "err", err)
	}
}

// putNodeLease (nodes/lease update) renews the node's lease: its
// heartbeat. The lease lives outside the change feed; its renewTime is
// the control plane's clock. The node must exist (it registers first),
// and be at the version the renewal names, if it names one.
func (s *Server) putNodeLease(c *gin.Context) {
	ctx := c.Request.Context()
	name := c.Param("name")
	var in model.Lease
	if err := decode(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	if err := checkGroupTypeMeta(&in.TypeMeta, model.KindLease, model.APIVersionCoordination); err != nil {
		s.fail(c, err)
		return
	}
	var errs model.FieldErrors
	if in.Metadata.Name != "" && in.Metadata.Name != name {
		errs = append(errs, model.FieldError{Field: "metadata.name", Type: model.FieldInvalid,
			Detail: fmt.Sprintf("Invalid value: %q: must be the node of the path, %q", in.Metadata.Name, name)})
	}
	if d := in.Spec.LeaseDurationSeconds; d <= 0 || d > model.MaxLeaseDurationSeconds {
		errs = append(errs, model.FieldError{Field: "spec.leaseDurationSeconds", Type: model.FieldInvalid,
			Detail: fmt.Sprintf("Invalid value: %d: must be between 1 and %d", d, model.MaxLeaseDurationSeconds)})
	}
	if len(in.Spec.HolderIdentity) > 253 {
		errs = append(errs, model.FieldError{Field: "spec.holderIdentity", Type: model.FieldInvalid, Detail: "must be at most 253 characters"})
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindLease, name, errs))
		return
	}
	n, err := s.store.Nodes().Get(ctx, "", name)
	if err != nil {
		s.fail(c, err)
		return
	}
	if want := in.Metadata.Annotations[model.AnnotationLeaseNodeVersion]; want != "" && want != n.Metadata.ResourceVersion {
		s.fail(c, &apiError{code: http.StatusConflict, reason: "Conflict", msg: fmt.Sprintf(
			"node %s is at resourceVersion %s, not %s: read it again before renewing its lease", name, n.Metadata.ResourceVersion, want)})
		return
	}
	l, err := s.store.RenewNodeLease(ctx, name, in.Spec.HolderIdentity, in.Spec.LeaseDurationSeconds)
	if err != nil {
		s.fail(c, err)
		return
	}
	l.Metadata.Annotations = map[string]string{model.AnnotationLeaseNodeVersion: n.Metadata.ResourceVersion}
	respond(c, http.StatusOK, l)
}

// getNodeLease (nodes/lease get) answers the node's lease.
func (s *Server) getNodeLease(c *gin.Context) {
	l, _, err := s.store.NodeLease(c.Request.Context(), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, l)
}

// createNodeEvent (nodes/events create) records an event a node saw, on
// itself or on a pod bound to it. An event on a pod is a row of the node
// agent's source, never the pod's status, which only its lifecycle
// writes (docs/reconciliation.md, "Who writes a pod").
func (s *Server) createNodeEvent(c *gin.Context) {
	ctx := c.Request.Context()
	name := c.Param("name")
	var ev model.Event
	if err := decode(c, &ev); err != nil {
		s.fail(c, err)
		return
	}
	var errs model.FieldErrors
	if ev.Type != model.EventNormal && ev.Type != model.EventWarning {
		errs = append(errs, model.FieldError{Field: "type", Type: model.FieldNotSupported, Detail: fmt.Sprintf("Unsupported value: %q: Normal or Warning", ev.Type)})
	}
	if ev.Reason == "" || len(ev.Reason) > 128 {
		errs = append(errs, model.FieldError{Field: "reason", Type: model.FieldInvalid, Detail: "must be 1 to 128 characters"})
	}
	if len(ev.Message) > model.MaxMessageBytes {
		errs = append(errs, model.FieldError{Field: "message", Type: model.FieldInvalid, Detail: fmt.Sprintf("must be at most %d bytes", model.MaxMessageBytes)})
	}
	obj := ev.InvolvedObject
	switch obj.Kind {
	case model.KindNode:
		if obj.Name != name {
			errs = append(errs, model.FieldError{Field: "involvedObject.name", Type: model.FieldInvalid,
				Detail: fmt.Sprintf("Invalid value: %q: a node records events on itself (%q) or its pods", obj.Name, name)})
		}
	case model.KindPod:
	default:
		errs = append(errs, model.FieldError{Field: "involvedObject.kind", Type: model.FieldNotSupported,
			Detail: fmt.Sprintf("Unsupported value: %q: Node or Pod", obj.Kind)})
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindEvent, "", errs))
		return
	}
	if obj.Kind == model.KindPod {
		if _, err := s.podOfNode(ctx, obj.Namespace, obj.Name, obj.UID, name); err != nil {
			s.fail(c, err)
			return
		}
	}
	if err := s.store.RecordEvent(ctx, obj, ev.Type, ev.Reason, ev.Message, nodeAgentEventSource); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, success(http.StatusCreated))
}

// podOfNode reads the pod and checks it is bound to node (and, when uid
// is given, is that incarnation): a node speaks only of its own pods.
func (s *Server) podOfNode(ctx context.Context, ns, name, uid, node string) (*model.Pod, error) {
	p, err := s.store.Pods().Get(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if p.Spec.NodeName != node {
		where := "is not bound to a node"
		if p.Spec.NodeName != "" {
			where = "is bound to node " + p.Spec.NodeName
		}
		return nil, &apiError{code: http.StatusConflict, reason: "Conflict", msg: fmt.Sprintf("pod %s/%s %s, not to %s", ns, name, where, node)}
	}
	if uid != "" && uid != p.Metadata.UID {
		return nil, &apiError{code: http.StatusConflict, reason: "Conflict",
			msg: fmt.Sprintf("pod %s/%s is another incarnation (uid %s), not %s", ns, name, p.Metadata.UID, uid)}
	}
	return p, nil
}

func success(code int) model.Status {
	return model.Status{TypeMeta: model.TypeMeta{APIVersion: model.APIVersion, Kind: "Status"}, Status: "Success", Code: code}
}

// reconcileNode (nodes/reconcile create) compares the node's host
// inventory with the pods bound to it, as controlops.ReconcileHost: the
// orphans are recorded and those past their grace are answered for
// removal; running pods whose zone vanished get an event, and a lifecycle
// when they have none.
func (s *Server) reconcileNode(c *gin.Context) {
	ctx := c.Request.Context()
	name := c.Param("name")
	var in nodeapi.ReconcileRequest
	if err := decode(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	var errs model.FieldErrors
	if in.Inventory.Node != "" && in.Inventory.Node != name {
		errs = append(errs, model.FieldError{Field: "inventory.Node", Type: model.FieldInvalid,
			Detail: fmt.Sprintf("Invalid value: %q: must be the node of the path, %q", in.Inventory.Node, name)})
	}
	if g := in.OrphanGraceSeconds; g < 0 || g > nodeapi.MaxOrphanGraceSeconds {
		errs = append(errs, model.FieldError{Field: "orphanGraceSeconds", Type: model.FieldInvalid,
			Detail: fmt.Sprintf("Invalid value: %d: must be between 0 and %d", g, nodeapi.MaxOrphanGraceSeconds)})
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindNode, name, errs))
		return
	}
	// A node that is not registered has no pods: all would look orphaned.
	if _, err := s.store.Nodes().Get(ctx, "", name); err != nil {
		s.fail(c, err)
		return
	}
	res, err := s.control.ReconcileHost(ctx, controlapi.ReconcileHostInput{Node: name, Inventory: in.Inventory,
		OrphanGrace: time.Duration(in.OrphanGraceSeconds) * time.Second})
	if err != nil {
		s.fail(c, dependencyError(err))
		return
	}
	respond(c, http.StatusOK, nodeapi.ReconcileResponse{Adopted: res.Adopted, Orphans: res.Orphans, NewOrphans: res.NewOrphans,
		ZoneMissing: res.ZoneMissing, ZoneNotRunning: res.ZoneNotRunning, LifecyclesStarted: res.LifecyclesStarted, Remove: res.Remove})
}

// createOrphanRemoval (nodes/orphanremovals create) records that the node
// removed an orphan: it is forgotten, with an OrphanRemoved event.
func (s *Server) createOrphanRemoval(c *gin.Context) {
	name := c.Param("name")
	var in nodeapi.OrphanRemoval
	if err := decode(c, &in); err != nil {
		s.fail(c, err)
		return
	}
	if in.Orphan.Key == "" || len(in.Orphan.Key) > 1024 {
		s.fail(c, invalid(model.KindNode, name, model.FieldErrors{{Field: "orphan.Key", Type: model.FieldRequired, Detail: "Required value: 1 to 1024 characters"}}))
		return
	}
	if err := s.control.OrphanRemoved(c.Request.Context(), controlapi.OrphanRemovedInput{Node: name, Orphan: in.Orphan}); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, success(http.StatusCreated))
}

// reportPod (pods/report create) delivers a node's report of one of its
// pods to the pod's lifecycle. The pod must be bound to the reporting
// node and be the incarnation reported (409 otherwise: the node is to
// stop reporting it); 404 when the pod or its lifecycle is gone (stop
// too); 503 when Temporal does not answer (retry). 202: delivered; the
// lifecycle ignores a report older than one it applied (its sequence).
func (s *Server) reportPod(c *gin.Context) {
	ctx := c.Request.Context()
	ns, name := c.Param("ns"), c.Param("name")
	var rep model.PodReport
	if err := decode(c, &rep); err != nil {
		s.fail(c, err)
		return
	}
	var errs model.FieldErrors
	if rep.Node == "" {
		errs = append(errs, model.FieldError{Field: "node", Type: model.FieldRequired, Detail: "Required value: the reporting node"})
	}
	if rep.UID == "" {
		errs = append(errs, model.FieldError{Field: "uid", Type: model.FieldRequired, Detail: "Required value: the pod's uid"})
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindPod, name, errs))
		return
	}
	for i := range rep.Containers {
		// A probe's output may be quoted here: cut, not refused, so the
		// transition still reaches the lifecycle.
		rep.Containers[i].Unhealthy = model.ShortMessage(rep.Containers[i].Unhealthy, model.MaxMessageBytes)
	}
	if _, err := s.podOfNode(ctx, ns, name, rep.UID, rep.Node); err != nil {
		s.fail(c, err)
		return
	}
	if s.pods == nil {
		s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", msg: "pods have no lifecycles on this control plane"})
		return
	}
	err := s.pods.Signal(ctx, ns, name, podcontract.SignalReport, rep)
	switch {
	case errors.Is(err, podcontract.ErrNoLifecycle):
		s.fail(c, notFoundf("the lifecycle of pod %s/%s is not running", ns, name))
		return
	case err != nil:
		s.fail(c, lifecycleError(err))
		return
	}
	respond(c, http.StatusAccepted, success(http.StatusAccepted))
}
