package api

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/model"
)

// SelfSubjectAccessReview asks whether the caller may do something, as
// Kubernetes' authorization.k8s.io/v1 kind (kubectl auth can-i sends it);
// zonewright's roles answer.
type SelfSubjectAccessReview struct {
	APIVersion string                      `json:"apiVersion,omitempty"`
	Kind       string                      `json:"kind,omitempty"`
	Metadata   map[string]any              `json:"metadata,omitempty"`
	Spec       SelfSubjectAccessReviewSpec `json:"spec"`
	Status     *SubjectAccessReviewStatus  `json:"status,omitempty"`
}

// SelfSubjectAccessReviewSpec is what is asked: a resource, or a path.
type SelfSubjectAccessReviewSpec struct {
	ResourceAttributes    *ResourceAttributes    `json:"resourceAttributes,omitempty"`
	NonResourceAttributes *NonResourceAttributes `json:"nonResourceAttributes,omitempty"`
}

// ResourceAttributes name a request on a resource.
type ResourceAttributes struct {
	Namespace   string `json:"namespace,omitempty"`
	Verb        string `json:"verb,omitempty"`
	Group       string `json:"group,omitempty"`
	Version     string `json:"version,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Name        string `json:"name,omitempty"`
}

// NonResourceAttributes name a request on a path.
type NonResourceAttributes struct {
	Path string `json:"path,omitempty"`
	Verb string `json:"verb,omitempty"`
}

// SubjectAccessReviewStatus is the answer.
type SubjectAccessReviewStatus struct {
	Allowed bool   `json:"allowed"`
	Denied  bool   `json:"denied,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// selfSubjectAccessReview is POST
// /apis/authorization.k8s.io/v1/selfsubjectaccessreviews: the caller's
// own roles decide, exactly as they decide its requests.
func (s *Server) selfSubjectAccessReview(c *gin.Context) {
	var r SelfSubjectAccessReview
	if err := decode(c, &r); err != nil {
		s.fail(c, err)
		return
	}
	ra, nra := r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes
	if (ra == nil) == (nra == nil) {
		s.fail(c, invalid("SelfSubjectAccessReview", "", model.FieldErrors{{Field: "spec", Type: model.FieldRequired,
			Detail: "exactly one of resourceAttributes and nonResourceAttributes is required"}}))
		return
	}
	id := identity(c)
	status := &SubjectAccessReviewStatus{}
	switch {
	case nra != nil:
		status.Reason = "zonewright does not review non-resource URLs; its roles name resources"
	case ra.Verb == "" || ra.Resource == "":
		s.fail(c, invalid("SelfSubjectAccessReview", "", model.FieldErrors{{Field: "spec.resourceAttributes", Type: model.FieldRequired,
			Detail: "verb and resource are required"}}))
		return
	case strings.Contains(ra.Verb+ra.Resource+ra.Subresource, "*"):
		status.Reason = "zonewright's roles are decided request by request: ask about one verb and one resource"
	default:
		a := auth.Attributes{Verb: ra.Verb, Resource: ra.Resource, Subresource: ra.Subresource, Namespace: ra.Namespace, Name: ra.Name}
		ok, err := s.authz.Allowed(c.Request.Context(), id, a)
		if err != nil {
			s.fail(c, err)
			return
		}
		status.Allowed = ok
		if !ok {
			status.Reason = forbidden(id, a).msg
		}
	}
	r.APIVersion, r.Kind, r.Status = "authorization.k8s.io/v1", "SelfSubjectAccessReview", status
	respond(c, http.StatusCreated, r)
}
