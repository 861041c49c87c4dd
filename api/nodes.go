package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// Events the API records on nodes.
const nodeEventSource = "zonewright-api"

func (s *Server) listNodes(c *gin.Context) { listOrWatch(s, c, s.store.Nodes(), "") }
func (s *Server) getNode(c *gin.Context)   { getOne(s, c, s.store.Nodes(), "", c.Param("name")) }

func (s *Server) createNode(c *gin.Context) {
	var n model.Node
	if err := decode(c, &n); err != nil {
		s.fail(c, err)
		return
	}
	if err := checkTypeMeta(&n.TypeMeta, model.KindNode); err != nil {
		s.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	systemMeta(&n.Metadata)
	n.Metadata.Namespace = ""
	// The node's own reports are the only source of its status.
	n.Status = model.NodeStatus{}
	model.DefaultNode(&n)
	if errs := model.ValidateNode(&n); len(errs) > 0 {
		s.fail(c, invalid(model.KindNode, n.Metadata.Name, errs))
		return
	}
	if _, err := s.store.Nodes().Get(ctx, "", n.Metadata.Name); err == nil {
		s.fail(c, fmt.Errorf("%w: node %s", store.ErrAlreadyExists, n.Metadata.Name))
		return
	}
	if err := s.recordCreate(c, &n); err != nil {
		s.fail(c, err)
		return
	}
	cidr, err := s.podCIDRs.Assign(ctx, n.Metadata.Name, n.Spec.PodCIDR)
	if err != nil {
		s.fail(c, cidrError(err))
		return
	}
	n.Spec.PodCIDR = cidr
	if err := s.store.Nodes().Create(ctx, &n); err != nil {
		if !errors.Is(err, store.ErrAlreadyExists) {
			_ = s.podCIDRs.Release(ctx, n.Metadata.Name)
		}
		s.fail(c, err)
		return
	}
	s.ensureNodeHealth(ctx, n.Metadata.Name)
	respond(c, http.StatusCreated, &n)
}

// deleteNode removes a node with no pods bound to it; ?force=true evicts
// them first (as from a lost node: they are marked Failed/NodeLost, and
// those that restart are scheduled elsewhere), then removes the node.
func (s *Server) deleteNode(c *gin.Context) {
	ctx := c.Request.Context()
	name := c.Param("name")
	force := c.Query("force")
	if force != "" && force != "true" && force != "false" {
		s.fail(c, badRequestf("force %q must be true or false", force))
		return
	}
	if force != "true" {
		n, err := s.store.DeleteNode(ctx, name, c.Query("resourceVersion"))
		if err != nil {
			s.fail(c, err)
			return
		}
		s.nodeDeleted(ctx, n, "Node deleted")
		respond(c, http.StatusOK, n)
		return
	}
	if rv := c.Query("resourceVersion"); rv != "" {
		cur, err := s.store.Nodes().Get(ctx, "", name)
		if err == nil && cur.Metadata.ResourceVersion != rv {
			err = fmt.Errorf("%w: precondition failed: resourceVersion %s is stale (now %s)", store.ErrConflict, rv, cur.Metadata.ResourceVersion)
		}
		if err != nil {
			s.fail(c, err)
			return
		}
	}
	// Cordon first, so nothing new lands on it meanwhile.
	if _, err := s.editNode(ctx, name, func(n *model.Node) bool {
		n.Spec.Unschedulable = true
		return true
	}); err != nil {
		s.fail(c, err)
		return
	}
	evicted, err := s.control.EvictNodePods(ctx, controlapi.EvictInput{Node: name, Lost: true,
		Message: fmt.Sprintf("node %s was deleted by force; the pod is treated as lost with it", name)})
	if err != nil {
		s.fail(c, dependencyError(err))
		return
	}
	n, err := s.store.Nodes().Delete(ctx, "", name, "")
	if err != nil {
		s.fail(c, err)
		return
	}
	s.nodeDeleted(ctx, n, fmt.Sprintf("Node deleted by force; %d pod(s) evicted as NodeLost", evicted))
	respond(c, http.StatusOK, n)
}

func (s *Server) nodeDeleted(ctx context.Context, n *model.Node, msg string) {
	s.nodeEvent(ctx, n, model.EventNormal, "NodeDeleted", msg)
	// Its pod CIDR and lease go with it; a node registering again under
	// the name gets a CIDR anew.
	if err := s.podCIDRs.Release(ctx, n.Metadata.Name); err != nil {
		s.log.Warn("could not release the deleted node's pod CIDR", "node", n.Metadata.Name, "err", err)
	}
	if err := s.store.DeleteNodeLease(ctx, n.Metadata.Name); err != nil {
		s.log.Warn("could not delete the deleted node's lease", "node", n.Metadata.Name, "err", err)
	}
	if lost, err := s.store.SetClaimsPhase(ctx, n.Metadata.Name, model.ClaimLost); err != nil {
		s.log.Warn("could not mark the deleted node's claims Lost", "node", n.Metadata.Name, "err", err)
	} else if len(lost) > 0 {
		s.log.Info("the deleted node's claims are Lost", "node", n.Metadata.Name, "claims", lost)
	}
	// Its health workflow finds the row gone and ends.
	if err := s.nodes.Check(ctx, n.Metadata.Name); err != nil {
		s.log.Warn("could not wake the node's health workflow", "node", n.Metadata.Name, "err", err)
	}
}

// cordonNode marks the node unschedulable: new pods go elsewhere, running
// ones stay.
func (s *Server) cordonNode(c *gin.Context) { s.setSchedulable(c, false) }

// uncordonNode makes the node schedulable again.
func (s *Server) uncordonNode(c *gin.Context) { s.setSchedulable(c, true) }

func (s *Server) setSchedulable(c *gin.Context, schedulable bool) {
	ctx := c.Request.Context()
	n, err := s.editNode(ctx, c.Param("name"), func(n *model.Node) bool {
		if n.Spec.Unschedulable == !schedulable {
			return false
		}
		n.Spec.Unschedulable = !schedulable
		return true
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	if n.changed {
		reason, msg := "NodeNotSchedulable", "Node "+n.Metadata.Name+" cordoned: no new pods are scheduled on it"
		if schedulable {
			reason, msg = "NodeSchedulable", "Node "+n.Metadata.Name+" uncordoned: pods may be scheduled on it again"
		}
		s.nodeEvent(ctx, n.Node, model.EventNormal, reason, msg)
	}
	respond(c, http.StatusOK, n.Node)
}

// drainNode cordons the node and tells every pod on it to leave: each
// stops gracefully (its grace period honoured); those with restartPolicy
// Always are scheduled on another node, the others end Failed/Evicted.
// The claims its pods use move with them (controlops.StartClaimMoves):
// their pods are told to leave by the claims' workflows once the data is
// pre-copied. It answers once the pods are told, not when they are gone.
func (s *Server) drainNode(c *gin.Context) {
	ctx := c.Request.Context()
	n, err := s.editNode(ctx, c.Param("name"), func(n *model.Node) bool {
		if n.Spec.Unschedulable {
			return false
		}
		n.Spec.Unschedulable = true
		return true
	})
	if err != nil {
		s.fail(c, err)
		return
	}
	// Claims used there move with their pods: those pods stay until the
	// claims' workflows have copied the data, and leave at their word.
	var moving []string
	if s.movesClaims && s.pods != nil {
		if moving, err = controlops.StartClaimMoves(ctx, s.store, n.Metadata.Name); err != nil {
			s.fail(c, err)
			return
		}
		for _, key := range moving {
			ns, name, _ := strings.Cut(key, "/")
			if err := s.volumes.SyncClaim(ctx, ns, name); err != nil {
				s.fail(c, lifecycleError(err))
				return
			}
		}
	}
	evicted, err := s.control.EvictNodePods(ctx, controlapi.EvictInput{Node: n.Metadata.Name, KeepClaims: moving})
	if err != nil {
		s.fail(c, partlyDrained(n.Metadata.Name, evicted, err))
		return
	}
	msg := fmt.Sprintf("Node %s cordoned and drained: %d pod(s) told to leave", n.Metadata.Name, evicted)
	if len(moving) > 0 {
		msg += fmt.Sprintf("; %d claim(s) move to other nodes first, then their pods follow", len(moving))
	}
	s.nodeEvent(ctx, n.Node, model.EventNormal, "NodeDrain", msg)
	respond(c, http.StatusOK, n.Node)
}

// partlyDrained is the answer to a drain some of whose pods could not be
// told to leave: the node stays cordoned and the pods told are leaving,
// so "nothing was changed" would be untrue. Drained again, the rest are
// told (telling a pod twice is harmless).
func partlyDrained(node string, told int, err error) error {
	var ae *apiError
	if mapped := dependencyError(err); !errors.As(mapped, &ae) || ae.code != http.StatusServiceUnavailable {
		return mapped
	}
	return &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", cause: err,
		msg: fmt.Sprintf("node %s is cordoned and %d of its pods were told to leave, but Temporal did not take the others' word: drain it again shortly to tell them", node, told)}
}

type editedNode struct {
	*model.Node
	changed bool
}

// editNode is a read-modify-write of one node that retries when the
// agent's heartbeat wrote it in between.
func (s *Server) editNode(ctx context.Context, name string, edit func(*model.Node) bool) (editedNode, error) {
	changed := false
	n, err := s.store.Nodes().Modify(ctx, "", name, func(n *model.Node) bool {
		changed = edit(n)
		return changed
	})
	if err != nil {
		return editedNode{}, err
	}
	return editedNode{Node: n, changed: changed}, nil
}

func (s *Server) nodeEvent(ctx context.Context, n *model.Node, typ, reason, msg string) {
	ref := model.ObjectReference{Kind: model.KindNode, Name: n.Metadata.Name, UID: n.Metadata.UID}
	if err := s.store.RecordEvent(ctx, ref, typ, reason, msg, nodeEventSource); err != nil {
		s.log.Warn("could not record a node event", "node", n.Metadata.Name, "reason", reason, "err", err)
	}
}

// dependencyError keeps store errors as they are (they map to their own
// statuses) and makes anything else — Temporal not answering — a 503.
func dependencyError(err error) error {
	for _, known := range []error{store.ErrNotFound, store.ErrConflict, store.ErrUnavailable, store.ErrInvalid, store.ErrAlreadyExists} {
		if errors.Is(err, known) {
			return err
		}
	}
	return lifecycleError(err)
}

// updateNode replaces a node's labels, annotations, unschedulable and
// taints at the resourceVersion the client read. Its podCIDR cannot
// change once set, and its status is its agent's to write.
func (s *Server) updateNode(c *gin.Context) {
	ctx := c.Request.Context()
	name := c.Param("name")
	var n model.Node
	if err := decode(c, &n); err != nil {
		s.fail(c, err)
		return
	}
	if err := checkTypeMeta(&n.TypeMeta, model.KindNode); err != nil {
		s.fail(c, err)
		return
	}
	if n.Metadata.Name != "" && n.Metadata.Name != name {
		s.fail(c, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", n.Metadata.Name, name))
		return
	}
	n.Metadata.Name, n.Metadata.Namespace = name, ""
	cur, err := s.store.Nodes().Get(ctx, "", name)
	if err != nil {
		s.fail(c, err)
		return
	}
	errs := model.ValidateNode(&n)
	if n.Metadata.ResourceVersion == "" {
		errs = append(errs, model.FieldError{Field: "metadata.resourceVersion", Type: model.FieldRequired,
			Detail: "Required value: an update must say which version it replaces; GET the node first"})
	}
	if cur.Spec.PodCIDR != "" && n.Spec.PodCIDR != cur.Spec.PodCIDR {
		errs = append(errs, model.FieldError{Field: "spec.podCIDR", Type: model.FieldForbidden,
			Detail: "Forbidden: podCIDR cannot be changed once set"})
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindNode, name, errs))
		return
	}
	if err := s.takeUserMeta(c, cur, &n); err != nil {
		s.fail(c, err)
		return
	}
	cur.Spec.Unschedulable, cur.Spec.Taints, cur.Spec.PodCIDR = n.Spec.Unschedulable, n.Spec.Taints, n.Spec.PodCIDR
	cur.Metadata.ResourceVersion = n.Metadata.ResourceVersion
	if err := s.store.Nodes().Update(ctx, cur); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, cur)
}
