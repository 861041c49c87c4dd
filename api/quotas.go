package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
	corev1 "k8s.io/api/core/v1"

	"github.com/zonewright/zonewright/internal/model"
)

// Resource quotas, as Kubernetes serves them: a cluster-admin sets a
// namespace's bounds (spec.hard), every create in the namespace is
// admitted against them in its own transaction (store.admitQuota), and
// status.used is what the namespace holds at the moment of the read.

func (s *Server) listQuotas(c *gin.Context) {
	ns := c.Param("ns")
	opts, ok := s.listRequest(c, typedWatch[model.ResourceQuota, *model.ResourceQuota]{s.store.Quotas()}, ns)
	if !ok {
		return
	}
	list, err := s.store.Quotas().List(c.Request.Context(), opts)
	if err != nil {
		s.fail(c, err)
		return
	}
	used := map[string]model.Usage{}
	for i := range list.Items {
		q := &list.Items[i]
		u, ok := used[q.Metadata.Namespace]
		if !ok {
			if u, err = s.store.QuotaUsage(c.Request.Context(), q.Metadata.Namespace); err != nil {
				s.fail(c, err)
				return
			}
			used[q.Metadata.Namespace] = u
		}
		q.Status = model.QuotaStatus(q, u)
	}
	respond(c, http.StatusOK, list)
}

// quotaNow is the stored quota with its usage as of now.
func (s *Server) quotaNow(c *gin.Context) (*model.ResourceQuota, error) {
	q, err := s.store.Quotas().Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
	if err != nil {
		return nil, err
	}
	u, err := s.store.QuotaUsage(c.Request.Context(), q.Metadata.Namespace)
	if err != nil {
		return nil, err
	}
	q.Status = model.QuotaStatus(q, u)
	return q, nil
}

func (s *Server) getQuota(c *gin.Context) {
	q, err := s.quotaNow(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, q)
}

func decodeQuota(c *gin.Context, ns string) (*model.ResourceQuota, error) {
	var q model.ResourceQuota
	if err := decode(c, &q); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(&q.TypeMeta, model.KindResourceQuota); err != nil {
		return nil, err
	}
	if q.Metadata.Namespace != "" && q.Metadata.Namespace != ns {
		return nil, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", q.Metadata.Namespace, ns)
	}
	q.Metadata.Namespace = ns
	q.Status = model.ResourceQuotaStatus{}
	return &q, nil
}

// createQuota bounds a namespace from now on; what it holds already
// stays, even above the bounds, as in Kubernetes.
func (s *Server) createQuota(c *gin.Context) {
	q, err := decodeQuota(c, c.Param("ns"))
	if err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&q.Metadata)
	if errs := model.ValidateResourceQuota(q); len(errs) > 0 {
		s.fail(c, invalid(model.KindResourceQuota, q.Metadata.Name, errs))
		return
	}
	if err := s.recordCreate(c, q); err != nil {
		s.fail(c, err)
		return
	}
	if err := s.store.CreateQuota(c.Request.Context(), q); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, q)
}

func (s *Server) updateQuota(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	q, err := decodeQuota(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	if q.Metadata.Name != "" && q.Metadata.Name != name {
		s.fail(c, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", q.Metadata.Name, name))
		return
	}
	q.Metadata.Name = name
	cur, err := s.store.Quotas().Get(c.Request.Context(), ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	errs := model.ValidateResourceQuota(q)
	if q.Metadata.ResourceVersion == "" {
		errs = append(errs, model.FieldError{Field: "metadata.resourceVersion", Type: model.FieldRequired,
			Detail: "Required value: an update must say which version it replaces; GET the quota first"})
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindResourceQuota, name, errs))
		return
	}
	if err := s.takeUserMeta(c, cur, q); err != nil {
		s.fail(c, err)
		return
	}
	cur.Spec = q.Spec
	cur.Metadata.ResourceVersion = q.Metadata.ResourceVersion
	if err := s.store.Quotas().Update(c.Request.Context(), cur); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, cur)
}

func (s *Server) patchQuota(c *gin.Context) {
	s.patchWith(c, stored(s.store.Quotas()), corev1.ResourceQuota{}, s.updateQuota, s.createQuota)
}

func (s *Server) deleteQuota(c *gin.Context) {
	q, err := s.store.Quotas().Delete(c.Request.Context(), c.Param("ns"), c.Param("name"), c.Query("resourceVersion"))
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, q)
}
