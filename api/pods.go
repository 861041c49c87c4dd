package api

import (
	"net/http"
	"reflect"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
)

func (s *Server) listPods(c *gin.Context) { listOrWatch(s, c, s.store.Pods(), c.Param("ns")) }
func (s *Server) getPod(c *gin.Context) {
	getOne(s, c, s.store.Pods(), c.Param("ns"), c.Param("name"))
}

// decodePod reads a pod body addressed to namespace ns.
func decodePod(c *gin.Context, ns string) (*model.Pod, error) {
	var p model.Pod
	if err := decode(c, &p); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(&p.TypeMeta, model.KindPod); err != nil {
		return nil, err
	}
	if p.Metadata.Namespace != "" && p.Metadata.Namespace != ns {
		return nil, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", p.Metadata.Namespace, ns)
	}
	p.Metadata.Namespace = ns
	model.DefaultPod(&p)
	return &p, nil
}

func (s *Server) createPod(c *gin.Context) {
	p, err := decodePod(c, c.Param("ns"))
	if err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&p.Metadata)
	if errs := model.ValidatePod(p); len(errs) > 0 {
		s.fail(c, invalid(model.KindPod, p.Metadata.Name, errs))
		return
	}
	// Observed state is the system's to write; a new pod waits for a node.
	p.Status = model.PodStatus{Phase: model.PodPending}
	if err := s.store.CreatePod(c.Request.Context(), p); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, p)
}

// updatePod replaces labels, annotations and tolerations of a pod at the
// resourceVersion the client read. The rest of the spec is fixed at
// creation, as the zone was built from it.
func (s *Server) updatePod(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	p, err := decodePod(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	if p.Metadata.Name != "" && p.Metadata.Name != name {
		s.fail(c, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", p.Metadata.Name, name))
		return
	}
	p.Metadata.Name = name
	var errs model.FieldErrors
	if p.Metadata.ResourceVersion == "" {
		errs = append(errs, model.FieldError{Field: "metadata.resourceVersion", Type: model.FieldRequired,
			Detail: "Required value: an update must say which version it replaces; GET the pod first"})
	}
	errs = append(errs, model.ValidatePod(p)...)
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindPod, name, errs))
		return
	}
	cur, err := s.store.Pods().Get(c.Request.Context(), ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	wantSpec, curSpec := p.Spec, cur.Spec
	wantSpec.Tolerations, curSpec.Tolerations = nil, nil
	if !reflect.DeepEqual(wantSpec, curSpec) {
		s.fail(c, invalid(model.KindPod, name, model.FieldErrors{{Field: "spec", Type: model.FieldForbidden,
			Detail: "Forbidden: pod updates may not change fields other than metadata.labels, metadata.annotations and spec.tolerations"}}))
		return
	}
	cur.Metadata.Labels, cur.Metadata.Annotations = p.Metadata.Labels, p.Metadata.Annotations
	cur.Spec.Tolerations = p.Spec.Tolerations
	cur.Metadata.ResourceVersion = p.Metadata.ResourceVersion
	if err := s.store.Pods().Update(c.Request.Context(), cur); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, cur)
}

// deletePod removes a pod. A pod that never reached a node has nothing to
// stop, so it goes at once, as in Kubernetes.
func (s *Server) deletePod(c *gin.Context) {
	if g := c.Query("gracePeriodSeconds"); g != "" {
		if n, err := strconv.ParseInt(g, 10, 64); err != nil || n < 0 {
			s.fail(c, badRequestf("gracePeriodSeconds %q must be a non-negative integer", g))
			return
		}
	}
	p, err := s.store.Pods().Delete(c.Request.Context(), c.Param("ns"), c.Param("name"), c.Query("resourceVersion"))
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, p)
}
