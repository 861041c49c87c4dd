package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

func (s *Server) listDeployments(c *gin.Context) {
	listOrWatch(s, c, s.store.Deployments(), c.Param("ns"))
}
func (s *Server) getDeployment(c *gin.Context) {
	getOne(s, c, s.store.Deployments(), c.Param("ns"), c.Param("name"))
}
func (s *Server) listControllerRevisions(c *gin.Context) {
	listOrWatch(s, c, s.store.ControllerRevisions(), c.Param("ns"))
}
func (s *Server) getControllerRevision(c *gin.Context) {
	getOne(s, c, s.store.ControllerRevisions(), c.Param("ns"), c.Param("name"))
}

// decodeDeployment reads a deployment body addressed to namespace ns.
func decodeDeployment(c *gin.Context, ns string) (*model.Deployment, error) {
	var d model.Deployment
	if err := decode(c, &d); err != nil {
		return nil, err
	}
	if err := checkGroupTypeMeta(&d.TypeMeta, model.KindDeployment, model.APIVersionApps); err != nil {
		return nil, err
	}
	if d.Metadata.Namespace != "" && d.Metadata.Namespace != ns {
		return nil, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", d.Metadata.Namespace, ns)
	}
	d.Metadata.Namespace = ns
	model.DefaultDeployment(&d)
	return &d, nil
}

// checkDeployment validates d and resolves its template's images to the
// catalog's names, as a pod's are at creation, so the pods made from it
// need no resolution and the template's hash follows what runs.
func (s *Server) checkDeployment(ctx context.Context, d, old *model.Deployment) (model.FieldErrors, store.PodImages, error) {
	t := &d.Spec.Template
	for i := range t.Spec.Containers {
		if ct := &t.Spec.Containers[i]; ct.Image == "" && s.imageMap.Resolve("") != "" {
			ct.Image = s.imageMap.Resolve("")
			t.Metadata.Annotations = withAnnotation(t.Metadata.Annotations, model.AnnotationRequestedImagePrefix+ct.Name, "")
		}
	}
	var errs model.FieldErrors
	if old != nil {
		errs = model.ValidateDeploymentUpdate(d, old)
	} else {
		errs = model.ValidateDeployment(d)
	}
	if len(errs) > 0 {
		return errs, store.PodImages{}, nil
	}
	return s.resolveTemplateImages(ctx, d.Metadata.Name, d.Metadata.Namespace, t)
}

func (s *Server) createDeployment(c *gin.Context) {
	d, err := decodeDeployment(c, c.Param("ns"))
	if err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&d.Metadata)
	d.Metadata.Generation = 0
	d.Status = model.DeploymentStatus{}
	errs, add, err := s.checkDeployment(c.Request.Context(), d, nil)
	if err != nil {
		s.fail(c, err)
		return
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindDeployment, d.Metadata.Name, errs))
		return
	}
	if err := s.recordCreate(c, d); err != nil {
		s.fail(c, err)
		return
	}
	made, err := s.store.CreateDeployment(c.Request.Context(), d, add)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.startImports(c.Request.Context(), made)
	respond(c, http.StatusCreated, d)
}

// updateDeployment replaces a deployment's labels, annotations and spec at
// the resourceVersion the client read. A changed template starts a
// rollout; a changed replicas count only scales.
func (s *Server) updateDeployment(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	d, err := decodeDeployment(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	if d.Metadata.Name != "" && d.Metadata.Name != name {
		s.fail(c, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", d.Metadata.Name, name))
		return
	}
	d.Metadata.Name = name
	ctx := c.Request.Context()
	cur, err := s.store.Deployments().Get(ctx, ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	var errs model.FieldErrors
	if d.Metadata.ResourceVersion == "" {
		errs = append(errs, model.FieldError{Field: "metadata.resourceVersion", Type: model.FieldRequired,
			Detail: "Required value: an update must say which version it replaces; GET the deployment first"})
	}
	more, add, err := s.checkDeployment(ctx, d, cur)
	if err != nil {
		s.fail(c, err)
		return
	}
	if errs = append(errs, more...); len(errs) > 0 {
		s.fail(c, invalid(model.KindDeployment, name, errs))
		return
	}
	if cur.Metadata.DeletionTimestamp != nil {
		s.fail(c, &apiError{code: http.StatusConflict, reason: "Conflict", msg: fmt.Sprintf("deployment %q is being deleted", name)})
		return
	}
	if err := s.takeUserMeta(c, cur, d); err != nil {
		s.fail(c, err)
		return
	}
	cur.Spec = d.Spec
	cur.Metadata.ResourceVersion = d.Metadata.ResourceVersion
	made, err := s.store.UpdateDeployment(ctx, cur, add)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.startImports(ctx, made)
	respond(c, http.StatusOK, cur)
}

// deleteDeployment starts a cascading deletion: the deployment's workflow
// deletes its pods gracefully, then its revisions, then the deployment.
func (s *Server) deleteDeployment(c *gin.Context) {
	ns, name, rv := c.Param("ns"), c.Param("name"), c.Query("resourceVersion")
	d, err := store.MarkDeleting(c.Request.Context(), s.store.Deployments(), ns, name, rv)
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, d)
}

// modifyDeployment applies change to a deployment that is not being
// deleted, re-reading it when another write got there first, and answers
// with the deployment; change returns an error to refuse.
func (s *Server) modifyDeployment(c *gin.Context, change func(d *model.Deployment) error) {
	if d, ok := s.modifyDeploymentQuiet(c, change); ok {
		respond(c, http.StatusOK, d)
	}
}

// modifyDeploymentQuiet is modifyDeployment that answers only a failure.
func (s *Server) modifyDeploymentQuiet(c *gin.Context, change func(d *model.Deployment) error) (*model.Deployment, bool) {
	var refused error
	d, err := s.store.Deployments().Modify(c.Request.Context(), c.Param("ns"), c.Param("name"), func(d *model.Deployment) bool {
		if d.Metadata.DeletionTimestamp != nil {
			refused = &apiError{code: http.StatusConflict, reason: "Conflict", msg: fmt.Sprintf("deployment %q is being deleted", d.Metadata.Name)}
			return false
		}
		refused = change(d)
		return refused == nil
	})
	if err == nil {
		err = refused
	}
	if err != nil {
		s.fail(c, err)
		return nil, false
	}
	return d, true
}

func scaleOf(d *model.Deployment) *model.Scale {
	m := d.Metadata
	return &model.Scale{TypeMeta: model.TypeMeta{APIVersion: "autoscaling/v1", Kind: model.KindScale},
		Metadata: model.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp},
		Spec:     model.ScaleSpec{Replicas: d.DesiredReplicas()},
		Status:   model.ScaleStatus{Replicas: d.Status.Replicas, Selector: controlops.SelectorString(d.Spec.Selector)}}
}

func (s *Server) getDeploymentScale(c *gin.Context) {
	d, err := s.store.Deployments().Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, scaleOf(d))
}

// putDeploymentScale sets replicas alone: no new revision.
func (s *Server) putDeploymentScale(c *gin.Context) {
	var sc model.Scale
	if err := decode(c, &sc); err != nil {
		s.fail(c, err)
		return
	}
	if err := checkGroupTypeMeta(&sc.TypeMeta, model.KindScale, "autoscaling/v1"); err != nil {
		s.fail(c, err)
		return
	}
	name := c.Param("name")
	if r := sc.Spec.Replicas; r < 0 || r > model.MaxDeploymentReplicas {
		s.fail(c, invalid(model.KindScale, name, model.FieldErrors{{Field: "spec.replicas", Type: model.FieldInvalid,
			Detail: fmt.Sprintf("Invalid value: %d: must be between 0 and %d, inclusive", r, model.MaxDeploymentReplicas)}}))
		return
	}
	scaled, ok := s.modifyDeploymentQuiet(c, func(d *model.Deployment) error {
		if rv := sc.Metadata.ResourceVersion; rv != "" && rv != d.Metadata.ResourceVersion {
			return fmt.Errorf("%w: precondition failed: resourceVersion %s is stale (now %s)", store.ErrConflict, rv, d.Metadata.ResourceVersion)
		}
		live := *d
		r := sc.Spec.Replicas
		d.Spec.Replicas = &r
		managed, err := s.writeManagers(c, &live, d)
		d.Metadata.ManagedFields = managed
		return err
	})
	if ok {
		respond(c, http.StatusOK, scaleOf(scaled))
	}
}

func (s *Server) pauseDeployment(c *gin.Context) {
	s.modifyDeployment(c, func(d *model.Deployment) error { d.Spec.Paused = true; return nil })
}

func (s *Server) resumeDeployment(c *gin.Context) {
	s.modifyDeployment(c, func(d *model.Deployment) error { d.Spec.Paused = false; return nil })
}

// restartDeployment makes a new revision of the same pods, as kubectl
// rollout restart does: a restartedAt annotation in the template.
func (s *Server) restartDeployment(c *gin.Context) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	s.modifyDeployment(c, func(d *model.Deployment) error {
		if d.Spec.Paused {
			return &apiError{code: http.StatusConflict, reason: "Conflict", msg: "the deployment is paused; resume it first"}
		}
		d.Spec.Template.Metadata.Annotations = withAnnotation(d.Spec.Template.Metadata.Annotations, model.AnnotationRestartedAt, now)
		return nil
	})
}

// RollbackRequest names the revision to return to; 0: the previous one.
type RollbackRequest struct {
	Revision int64 `json:"revision,omitempty"`
}

// rollbackDeployment puts an earlier revision's template back; the
// workflow rolls to it as to any new template (it becomes the newest
// revision, as in Kubernetes).
func (s *Server) rollbackDeployment(c *gin.Context) {
	var req RollbackRequest
	if c.Request.ContentLength != 0 {
		if err := decode(c, &req); err != nil {
			s.fail(c, err)
			return
		}
	}
	if req.Revision < 0 {
		s.fail(c, invalid(model.KindDeployment, c.Param("name"), model.FieldErrors{{Field: "revision", Type: model.FieldInvalid, Detail: "Invalid value: must be 0 (the previous revision) or a revision number"}}))
		return
	}
	ctx := c.Request.Context()
	s.modifyDeployment(c, func(d *model.Deployment) error {
		if d.Spec.Paused {
			return &apiError{code: http.StatusConflict, reason: "Conflict", msg: "the deployment is paused; resume it before rolling back"}
		}
		revs, err := s.store.ControllerRevisions().ListAll(ctx, store.ListOptions{Namespace: d.Metadata.Namespace, LabelSelector: controlops.SelectorString(d.Spec.Selector)})
		if err != nil {
			return err
		}
		current, _ := strconv.ParseInt(d.Metadata.Annotations[model.AnnotationRevision], 10, 64)
		var target *model.ControllerRevision
		for i := range revs {
			r := &revs[i]
			if o := model.ControllerOf(&r.Metadata); o == nil || o.UID != d.Metadata.UID {
				continue
			}
			switch {
			case req.Revision != 0 && r.Revision == req.Revision:
				target = r
			case req.Revision == 0 && r.Revision < current && (target == nil || r.Revision > target.Revision):
				target = r
			}
		}
		if target == nil {
			what := "no earlier revision is kept"
			if req.Revision != 0 {
				what = fmt.Sprintf("revision %d is not kept (GET /apis/apps/v1/namespaces/%s/controllerrevisions)", req.Revision, d.Metadata.Namespace)
			}
			return invalid(model.KindDeployment, d.Metadata.Name, model.FieldErrors{{Field: "revision", Type: model.FieldNotFound, Detail: "Not found: " + what}})
		}
		d.Spec.Template = target.Data
		d.Metadata.Annotations = model.AnnotationsAfterRollback(d.Metadata.Annotations, target.Metadata.Annotations)
		return nil
	})
}
