package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	corev1 "k8s.io/api/core/v1"

	"github.com/zonewright/zonewright/internal/model"
)

// Limit ranges, as Kubernetes serves them: a cluster-admin sets a
// namespace's per-container defaults and bounds, applied to every pod and
// claim created there in its create's transaction (store.admitLimits).

func (s *Server) listLimitRanges(c *gin.Context) {
	listOrWatch(s, c, s.store.LimitRanges(), c.Param("ns"))
}

func (s *Server) getLimitRange(c *gin.Context) {
	getOne(s, c, s.store.LimitRanges(), c.Param("ns"), c.Param("name"))
}

func decodeLimitRange(c *gin.Context, ns string) (*model.LimitRange, error) {
	var l model.LimitRange
	if err := decode(c, &l); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(&l.TypeMeta, model.KindLimitRange); err != nil {
		return nil, err
	}
	if l.Metadata.Namespace != "" && l.Metadata.Namespace != ns {
		return nil, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", l.Metadata.Namespace, ns)
	}
	l.Metadata.Namespace = ns
	return &l, nil
}

// createLimitRange applies to pods and claims created from now on.
func (s *Server) createLimitRange(c *gin.Context) {
	l, err := decodeLimitRange(c, c.Param("ns"))
	if err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&l.Metadata)
	if errs := model.ValidateLimitRange(l); len(errs) > 0 {
		s.fail(c, invalid(model.KindLimitRange, l.Metadata.Name, errs))
		return
	}
	if err := s.recordCreate(c, l); err != nil {
		s.fail(c, err)
		return
	}
	if err := s.store.CreateLimitRange(c.Request.Context(), l); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, l)
}

func (s *Server) updateLimitRange(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	l, err := decodeLimitRange(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	if l.Metadata.Name != "" && l.Metadata.Name != name {
		s.fail(c, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", l.Metadata.Name, name))
		return
	}
	l.Metadata.Name = name
	cur, err := s.store.LimitRanges().Get(c.Request.Context(), ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	errs := model.ValidateLimitRange(l)
	if l.Metadata.ResourceVersion == "" {
		errs = append(errs, model.FieldError{Field: "metadata.resourceVersion", Type: model.FieldRequired,
			Detail: "Required value: an update must say which version it replaces; GET the limit range first"})
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindLimitRange, name, errs))
		return
	}
	if err := s.takeUserMeta(c, cur, l); err != nil {
		s.fail(c, err)
		return
	}
	cur.Spec = l.Spec
	cur.Metadata.ResourceVersion = l.Metadata.ResourceVersion
	if err := s.store.LimitRanges().Update(c.Request.Context(), cur); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, cur)
}

func (s *Server) patchLimitRange(c *gin.Context) {
	s.patchWith(c, stored(s.store.LimitRanges()), corev1.LimitRange{}, s.updateLimitRange, s.createLimitRange)
}

func (s *Server) deleteLimitRange(c *gin.Context) {
	l, err := s.store.LimitRanges().Delete(c.Request.Context(), c.Param("ns"), c.Param("name"), c.Query("resourceVersion"))
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, l)
}
