package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/model"
)

func (s *Server) listServices(c *gin.Context) { listOrWatch(s, c, s.store.Services(), c.Param("ns")) }
func (s *Server) getService(c *gin.Context) {
	getOne(s, c, s.store.Services(), c.Param("ns"), c.Param("name"))
}

// decodeService reads a service body addressed to namespace ns.
func decodeService(c *gin.Context, ns string) (*model.Service, error) {
	var svc model.Service
	if err := decode(c, &svc); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(&svc.TypeMeta, model.KindService); err != nil {
		return nil, err
	}
	if svc.Metadata.Namespace != "" && svc.Metadata.Namespace != ns {
		return nil, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", svc.Metadata.Namespace, ns)
	}
	svc.Metadata.Namespace = ns
	model.DefaultService(&svc)
	return &svc, nil
}

func (s *Server) createService(c *gin.Context) {
	svc, err := decodeService(c, c.Param("ns"))
	if err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&svc.Metadata)
	svc.Status = model.ServiceStatus{}
	if errs := model.ValidateService(svc); len(errs) > 0 {
		s.fail(c, invalid(model.KindService, svc.Metadata.Name, errs))
		return
	}
	if err := s.recordCreate(c, svc); err != nil {
		s.fail(c, err)
		return
	}
	if err := s.store.CreateService(c.Request.Context(), svc, s.serviceCIDR); err != nil {
		s.fail(c, serviceError(svc.Metadata.Name, err))
		return
	}
	respond(c, http.StatusCreated, svc)
}

// serviceError gives the allocator's refusals their statuses: a requested
// address that cannot be had is the request's fault (422); a full range
// is a conflict with the services already there (409).
func serviceError(name string, err error) error {
	var fe model.FieldErrors
	switch {
	case errors.As(err, &fe):
		return invalid(model.KindService, name, fe)
	case errors.Is(err, clusterip.ErrExhausted):
		return &apiError{code: http.StatusConflict, reason: "Conflict", msg: err.Error() + "; delete a service or widen --service-cidr"}
	}
	return err
}

// updateService replaces a service's labels, annotations and spec at the
// resourceVersion the client read. Its clusterIP cannot change (an empty
// one keeps the current address).
func (s *Server) updateService(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	svc, err := decodeService(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	if svc.Metadata.Name != "" && svc.Metadata.Name != name {
		s.fail(c, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", svc.Metadata.Name, name))
		return
	}
	svc.Metadata.Name = name
	cur, err := s.store.Services().Get(c.Request.Context(), ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	var errs model.FieldErrors
	if svc.Metadata.ResourceVersion == "" {
		errs = append(errs, model.FieldError{Field: "metadata.resourceVersion", Type: model.FieldRequired,
			Detail: "Required value: an update must say which version it replaces; GET the service first"})
	}
	errs = append(errs, model.ValidateServiceUpdate(svc, cur)...)
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindService, name, errs))
		return
	}
	if err := s.takeUserMeta(c, cur, svc); err != nil {
		s.fail(c, err)
		return
	}
	cur.Spec = svc.Spec
	cur.Metadata.ResourceVersion = svc.Metadata.ResourceVersion
	if err := s.store.Services().Update(c.Request.Context(), cur); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, cur)
}

func (s *Server) deleteService(c *gin.Context) {
	svc, err := s.store.DeleteService(c.Request.Context(), c.Param("ns"), c.Param("name"), c.Query("resourceVersion"))
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, svc)
}

func (s *Server) listEndpoints(c *gin.Context) {
	listOrWatch(s, c, s.store.Endpoints(), c.Param("ns"))
}
func (s *Server) getEndpoints(c *gin.Context) {
	getOne(s, c, s.store.Endpoints(), c.Param("ns"), c.Param("name"))
}

// refuseEndpointsWrite: Endpoints follow their service's pods and are
// written only by zonewright's endpoints controller, which would undo any
// other write.
func (s *Server) refuseEndpointsWrite(c *gin.Context) {
	c.Header("Allow", "GET")
	s.fail(c, &apiError{code: http.StatusMethodNotAllowed, reason: "MethodNotAllowed",
		msg: c.Request.Method + " is not supported on " + c.Request.URL.Path + ": endpoints are written only by zonewright, from the service's selector and its pods' readiness"})
}

// MaxServiceNetWait bounds a servicenet long poll.
const MaxServiceNetWait = 30 * time.Second

// serviceNet answers the service network snapshot nodes program their NAT
// from: the current one, or with ?after=N the first with a generation
// above N, waiting up to 30 s (?timeoutSeconds= shortens it) and
// answering 304 Not Modified if none came.
func (s *Server) serviceNet(c *gin.Context) {
	if s.serviceNetH == nil {
		s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", msg: "this server keeps no service network snapshot"})
		return
	}
	afterText := c.Query("after")
	if afterText == "" {
		snap := s.serviceNetH.Load()
		if snap == nil {
			s.fail(c, &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable", msg: "the service network snapshot is not built yet; retry shortly"})
			return
		}
		respond(c, http.StatusOK, snap)
		return
	}
	after, err := strconv.ParseInt(afterText, 10, 64)
	if err != nil || after < 0 {
		s.fail(c, badRequestf("after %q must be a non-negative generation", afterText))
		return
	}
	wait := s.serviceNetWait
	if t := c.Query("timeoutSeconds"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > int(MaxServiceNetWait/time.Second) { // in seconds: a duration would overflow
			s.fail(c, badRequestf("timeoutSeconds %q must be between 1 and %d", t, int(MaxServiceNetWait/time.Second)))
			return
		}
		wait = min(wait, time.Duration(n)*time.Second)
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), wait)
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	snap := s.serviceNetH.Newer(ctx, after)
	if snap == nil {
		c.Status(http.StatusNotModified)
		return
	}
	respond(c, http.StatusOK, snap)
}
