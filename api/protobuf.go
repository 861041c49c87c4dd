package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/gin-gonic/gin"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// mediaProtobuf is Kubernetes' protobuf encoding, which kubectl's typed
// clients send for built-in kinds (kubectl create deployment|secret|
// service, expose, drain, auth can-i). zonewright reads it with the
// Kubernetes types into the JSON its handlers decode, and answers JSON,
// which those clients accept too.
const mediaProtobuf = "application/vnd.kubernetes.protobuf"

// protobufMagic begins every Kubernetes protobuf body: a runtime.Unknown
// envelope follows, whose raw bytes are the object.
var protobufMagic = []byte("k8s\x00")

// protoObject is a Kubernetes type with its generated protobuf decoder.
type protoObject interface{ Unmarshal([]byte) error }

// protobufTypes are the Kubernetes types of the bodies zonewright reads in
// protobuf, by resource[/subresource] of a create or update. A DELETE's
// body is DeleteOptions whatever the resource.
var protobufTypes = map[string]func() protoObject{
	"pods":                     func() protoObject { return new(corev1.Pod) },
	"pods/eviction":            func() protoObject { return new(policyv1.Eviction) },
	"services":                 func() protoObject { return new(corev1.Service) },
	"secrets":                  func() protoObject { return new(corev1.Secret) },
	"namespaces":               func() protoObject { return new(corev1.Namespace) },
	"nodes":                    func() protoObject { return new(corev1.Node) },
	"persistentvolumeclaims":   func() protoObject { return new(corev1.PersistentVolumeClaim) },
	"resourcequotas":           func() protoObject { return new(corev1.ResourceQuota) },
	"limitranges":              func() protoObject { return new(corev1.LimitRange) },
	"deployments":              func() protoObject { return new(appsv1.Deployment) },
	"deployments/scale":        func() protoObject { return new(autoscalingv1.Scale) },
	"jobs":                     func() protoObject { return new(batchv1.Job) },
	"selfsubjectaccessreviews": func() protoObject { return new(authorizationv1.SelfSubjectAccessReview) },
}

// protobufType is the Kubernetes type of rt's body in protobuf, or nil
// where zonewright takes none (its own kinds and subresources).
func (rt route) protobufType() func() protoObject {
	a, ok := rt.attributes()
	if !ok {
		return nil
	}
	switch rt.method {
	case http.MethodDelete:
		return func() protoObject { return new(metav1.DeleteOptions) }
	case http.MethodPost, http.MethodPut:
		key := a.Resource
		if a.Subresource != "" {
			key += "/" + a.Subresource
		}
		return protobufTypes[key]
	}
	return nil
}

// fromProtobuf turns a protobuf body into the JSON of the same object, so
// the handler reads it as it reads JSON: the same strict decoding, the
// same validation, the same errors.
func (s *Server) fromProtobuf(newObject func() protoObject) gin.HandlerFunc {
	return func(c *gin.Context) {
		if mt, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type")); mt != mediaProtobuf {
			return
		}
		body, err := requestBody(c)
		if err != nil {
			s.fail(c, err)
			c.Abort()
			return
		}
		js, err := protobufToJSON(body, newObject())
		if err != nil {
			s.fail(c, badRequestf("malformed protobuf body: %v", err))
			c.Abort()
			return
		}
		c.Request.Body = io.NopCloser(bytes.NewReader(js))
		c.Request.ContentLength = int64(len(js))
		c.Request.Header.Set("Content-Type", mediaJSON)
	}
}

// protobufToJSON decodes a Kubernetes protobuf body into obj and writes
// it as Kubernetes' JSON, without the empty values protobuf cannot tell
// from absent ones (JSON of the Kubernetes types writes "status": {} and
// "creationTimestamp": null for them).
func protobufToJSON(body []byte, obj protoObject) ([]byte, error) {
	rest, ok := bytes.CutPrefix(body, protobufMagic)
	if !ok {
		return nil, errors.New("not a Kubernetes protobuf body (no k8s\\0 prefix)")
	}
	var envelope runtime.Unknown
	if err := envelope.Unmarshal(rest); err != nil {
		return nil, fmt.Errorf("the envelope: %w", err)
	}
	if envelope.ContentEncoding != "" {
		return nil, fmt.Errorf("content encoding %q is not supported", envelope.ContentEncoding)
	}
	if err := obj.Unmarshal(envelope.Raw); err != nil {
		return nil, fmt.Errorf("the %s: %w", envelope.Kind, err)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	pruneEmpty(doc)
	if envelope.APIVersion != "" {
		doc["apiVersion"] = envelope.APIVersion
	}
	if envelope.Kind != "" {
		doc["kind"] = envelope.Kind
	}
	return json.Marshal(doc)
}

// pruneEmpty removes nulls, empty objects and empty lists, deepest first,
// so an object left empty by its children goes too.
func pruneEmpty(v any) (empty bool) {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		for k, x := range v {
			if pruneEmpty(x) {
				delete(v, k)
			}
		}
		return len(v) == 0
	case []any:
		for _, x := range v {
			pruneEmpty(x)
		}
		return len(v) == 0
	}
	return false
}
