package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

func (s *Server) listJobs(c *gin.Context) { listOrWatch(s, c, s.store.Jobs(), c.Param("ns")) }
func (s *Server) getJob(c *gin.Context) {
	getOne(s, c, s.store.Jobs(), c.Param("ns"), c.Param("name"))
}

// createJob stores a job; its workflow (started by the workload feed)
// runs its pods. The template's images resolve as a pod's do.
func (s *Server) createJob(c *gin.Context) {
	ns := c.Param("ns")
	var j model.Job
	if err := decode(c, &j); err != nil {
		s.fail(c, err)
		return
	}
	if err := checkGroupTypeMeta(&j.TypeMeta, model.KindJob, model.APIVersionBatch); err != nil {
		s.fail(c, err)
		return
	}
	if j.Metadata.Namespace != "" && j.Metadata.Namespace != ns {
		s.fail(c, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", j.Metadata.Namespace, ns))
		return
	}
	j.Metadata.Namespace = ns
	systemMeta(&j.Metadata)
	j.Status = model.JobStatus{}
	model.DefaultJob(&j)
	ctx := c.Request.Context()
	t := &j.Spec.Template
	for i := range t.Spec.Containers {
		if ct := &t.Spec.Containers[i]; ct.Image == "" && s.imageMap.Resolve("") != "" {
			ct.Image = s.imageMap.Resolve("")
			t.Metadata.Annotations = withAnnotation(t.Metadata.Annotations, model.AnnotationRequestedImagePrefix+ct.Name, "")
		}
	}
	errs := model.ValidateJob(&j)
	var add store.PodImages
	if len(errs) == 0 {
		var err error
		if errs, add, err = s.resolveTemplateImages(ctx, j.Metadata.Name, ns, t); err != nil {
			s.fail(c, err)
			return
		}
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindJob, j.Metadata.Name, errs))
		return
	}
	made, err := s.store.CreateJob(ctx, &j, add)
	if err != nil {
		s.fail(c, err)
		return
	}
	s.startImports(ctx, made)
	respond(c, http.StatusCreated, &j)
}

// deleteJob starts a cascading deletion: the job's workflow deletes its
// pods gracefully, then the job.
func (s *Server) deleteJob(c *gin.Context) {
	ns, name, rv := c.Param("ns"), c.Param("name"), c.Query("resourceVersion")
	j, err := store.MarkDeleting(c.Request.Context(), s.store.Jobs(), ns, name, rv)
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, j)
}
