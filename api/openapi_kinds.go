package api

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Kubernetes' extensions of the OpenAPI document, which kubectl reads: the
// kind of each object schema and of each operation on a kind (explain
// finds a resource's kind through its operations, then the schema of
// that kind), and the fieldValidation parameter of the writes (kubectl
// validates a manifest itself only when the PATCH of its kind lacks it).

const extGVK = "x-kubernetes-group-version-kind"

// groupVersionKind is the value of x-kubernetes-group-version-kind.
type groupVersionKind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// kindOf is the kind a route reads or writes: that of its resource, if
// discovery shows it, or the kind of a subresource that is another
// group's (subresourceKinds: a deployment's Scale, a pod's Eviction).
func kindOf(rt route) (groupVersionKind, bool) {
	a, ok := rt.attributes()
	if !ok {
		return groupVersionKind{}, false
	}
	if a.Subresource != "" {
		sk, ok := subresourceKinds[a.Resource+"/"+a.Subresource]
		return groupVersionKind{Group: sk.group, Version: sk.version, Kind: sk.kind}, ok
	}
	info, known := discoverable[a.Resource]
	gv, _, inGV := groupVersionOf(rt.path)
	if !known || !inGV {
		return groupVersionKind{}, false
	}
	group, version, isGroup := strings.Cut(gv, "/")
	if !isGroup {
		group, version = "", gv
	}
	return groupVersionKind{Group: group, Version: version, Kind: info.kind}, true
}

// markKinds puts x-kubernetes-group-version-kind on the schema of each
// kind the routes serve: a list, as Kubernetes writes it (a type may be
// served as several group versions).
func (b *docBuilder) markKinds(routes []route, resources map[string]any) error {
	for _, rt := range routes {
		gvk, ok := kindOf(rt)
		a, _ := rt.attributes()
		if !ok || a.Subresource != "" {
			continue
		}
		obj, ok := resources[a.Resource]
		if !ok {
			return fmt.Errorf("%s %s: add %q with its Go type to resourceTypes in api/openapi_ops.go", rt.method, rt.path, a.Resource)
		}
		ref, ok := b.doc.Components.Schemas[schemaName(reflect.TypeOf(obj))]
		if !ok || ref.Value == nil {
			return fmt.Errorf("%s %s: no schema of %T", rt.method, rt.path, obj)
		}
		s := ref.Value
		if s.Extensions == nil {
			s.Extensions = map[string]any{}
		}
		kinds, _ := s.Extensions[extGVK].([]groupVersionKind)
		if !slices.Contains(kinds, gvk) {
			s.Extensions[extGVK] = append(kinds, gvk)
		}
	}
	return nil
}

// fieldValidationParameter is written out on each write, not referred
// to: kubectl looks for it by name among the operation's parameters.
func fieldValidationParameter() *openapi3.Parameter {
	p := openapi3.NewQueryParameter("fieldValidation").WithSchema(openapi3.NewStringSchema().WithEnum(fieldValidationStrict, fieldValidationWarn, fieldValidationIgnore))
	p.Description = "what to do with a field of the body the kind does not have: Strict (the default) refuses the request naming it (400); " +
		"Warn accepts the request without it and names it in a Warning header; Ignore drops it silently"
	return p
}
