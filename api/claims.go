package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

func (s *Server) listClaims(c *gin.Context) { listOrWatch(s, c, s.store.Claims(), c.Param("ns")) }
func (s *Server) getClaim(c *gin.Context) {
	getOne(s, c, s.store.Claims(), c.Param("ns"), c.Param("name"))
}

// decodeClaim reads a claim body addressed to namespace ns.
func decodeClaim(c *gin.Context, ns string) (*model.PersistentVolumeClaim, error) {
	var pvc model.PersistentVolumeClaim
	if err := decode(c, &pvc); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(&pvc.TypeMeta, model.KindPersistentVolumeClaim); err != nil {
		return nil, err
	}
	if pvc.Metadata.Namespace != "" && pvc.Metadata.Namespace != ns {
		return nil, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", pvc.Metadata.Namespace, ns)
	}
	pvc.Metadata.Namespace = ns
	model.DefaultPersistentVolumeClaim(&pvc)
	return &pvc, nil
}

func (s *Server) createClaim(c *gin.Context) {
	pvc, err := decodeClaim(c, c.Param("ns"))
	if err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&pvc.Metadata)
	pvc.Status = model.PersistentVolumeClaimStatus{Phase: model.ClaimPending}
	if errs := model.ValidatePersistentVolumeClaim(pvc); len(errs) > 0 {
		s.fail(c, invalid(model.KindPersistentVolumeClaim, pvc.Metadata.Name, errs))
		return
	}
	if err := s.recordCreate(c, pvc); err != nil {
		s.fail(c, err)
		return
	}
	if err := s.store.CreateClaim(c.Request.Context(), pvc); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, pvc)
}

// updateClaim replaces a claim's labels, annotations and size at the
// resourceVersion the client read. A bound claim grows online: its node
// sets the dataset's new quota, and status.capacity follows.
func (s *Server) updateClaim(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	pvc, err := decodeClaim(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	if pvc.Metadata.Name != "" && pvc.Metadata.Name != name {
		s.fail(c, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", pvc.Metadata.Name, name))
		return
	}
	pvc.Metadata.Name = name
	cur, err := s.store.Claims().Get(c.Request.Context(), ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	var errs model.FieldErrors
	if pvc.Metadata.ResourceVersion == "" {
		errs = append(errs, model.FieldError{Field: "metadata.resourceVersion", Type: model.FieldRequired,
			Detail: "Required value: an update must say which version it replaces; GET the claim first"})
	}
	errs = append(errs, model.ValidatePersistentVolumeClaimUpdate(pvc, cur)...)
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindPersistentVolumeClaim, name, errs))
		return
	}
	grew := model.ClaimBytes(pvc) != model.ClaimBytes(cur)
	if err := s.takeUserMeta(c, cur, pvc); err != nil {
		s.fail(c, err)
		return
	}
	cur.Spec = pvc.Spec
	if grew && cur.Status.NodeName != "" {
		model.SetCondition(&cur.Status.Conditions, model.PersistentVolumeClaimCondition{Type: model.ClaimResizing, Status: model.ConditionTrue,
			Reason: "Resizing", Message: "node " + cur.Status.NodeName + " is growing the dataset's quota to " + cur.Spec.Resources.Requests[model.ResourceStorage]}, time.Now().UTC())
	}
	cur.Metadata.ResourceVersion = pvc.Metadata.ResourceVersion
	if err := s.store.Claims().Update(c.Request.Context(), cur); err != nil {
		s.fail(c, err)
		return
	}
	if grew && cur.Status.NodeName != "" && !store.IsDryRun(c.Request.Context()) {
		if err := s.volumes.SyncClaim(c.Request.Context(), ns, name); err != nil {
			s.fail(c, err)
			return
		}
	}
	respond(c, http.StatusOK, cur)
}

// deleteClaim removes a claim no node holds at once. A bound one is
// marked for deletion and released by its workflow once no pod uses it
// (Kubernetes' pvc-protection): its node destroys the dataset, or keeps
// it under the Retain policy.
func (s *Server) deleteClaim(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	pvc, deleted, err := s.store.DeleteClaim(c.Request.Context(), ns, name, c.Query("resourceVersion"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if !deleted {
		if err := s.volumes.SyncClaim(c.Request.Context(), ns, name); err != nil {
			s.fail(c, err)
			return
		}
	}
	respond(c, http.StatusOK, pvc)
}

// ClaimMoveRequest names the node a claim moves to; "": the scheduler's choice.
type ClaimMoveRequest struct {
	NodeName string `json:"nodeName,omitempty"`
}

// moveClaim moves a claim's data, and then its pods, off its node (to
// body.nodeName if given): the move a drain makes, asked for one claim.
// 202: the claim's workflow does it; status.move follows it.
func (s *Server) moveClaim(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	var body ClaimMoveRequest
	if c.Request.ContentLength != 0 {
		if err := decode(c, &body); err != nil {
			s.fail(c, err)
			return
		}
	}
	if !s.movesClaims {
		s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable",
			msg: "claims cannot move: this server runs no volume transfer relay or workflows"})
		return
	}
	pvc, err := controlops.StartClaimMove(c.Request.Context(), s.store, ns, name, body.NodeName)
	if err != nil {
		s.fail(c, err)
		return
	}
	if err := s.volumes.SyncClaim(c.Request.Context(), ns, name); err != nil {
		s.fail(c, lifecycleError(err))
		return
	}
	respond(c, http.StatusAccepted, pvc)
}
