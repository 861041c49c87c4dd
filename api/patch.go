package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// patchWith serves PATCH: the patch is applied to the object as stored
// (current) and the result goes through the kind's PUT handler, so a
// patch is validated, authorised and conflict-checked exactly as the
// equivalent PUT. Its precondition is the resourceVersion read here, or
// the one the patch itself sets: a write in between is a 409, as for PUT.
//
// Four patch types, as Kubernetes takes them: a JSON merge patch (RFC
// 7386), a JSON patch (RFC 6902), a strategic merge patch, which merges
// lists by their keys (containers by name, ports by port) as the
// Kubernetes type of the kind (kubeType) says (kubectl apply, label, set
// image and rollout send it), and a server-side apply configuration
// (apply.go), which creates the object through create when it does not
// exist; create is nil where apply is not served (a subresource).
//
// Authorisation: verb "patch" on the kind's resource, granted to whoever
// may "update" it (the PUT handler runs).
func (s *Server) patchWith(c *gin.Context, current func(*gin.Context) (any, error), kubeType any, put, create gin.HandlerFunc) {
	pr, err := readPatch(c, kubeType, create != nil)
	if err != nil {
		s.fail(c, err)
		return
	}
	// A patch that names no resourceVersion applies to the newest object,
	// as Kubernetes applies it: a write in between (a controller's status)
	// makes it read again, not fail with 409. One that names a version is
	// held to it.
	pinned := pr.config != nil && pr.config.GetResourceVersion() != "" || pr.config == nil && namesResourceVersion(pr.body, pr.mt == mediaJSONPatch)
	for attempt := 1; ; attempt++ {
		write := put
		var stored []byte
		cur, err := current(c)
		switch {
		case err != nil && pr.config != nil && errors.Is(err, store.ErrNotFound):
			write = create // an apply creates what is not there
		case err != nil:
			s.fail(c, err)
			return
		default:
			if stored, err = json.Marshal(cur); err != nil {
				s.fail(c, err)
				return
			}
		}
		patched, err := s.applyPatch(c, pr, stored)
		if err != nil {
			s.fail(c, err)
			return
		}
		c.Request.Body = io.NopCloser(bytes.NewReader(patched))
		c.Request.ContentLength = int64(len(patched))
		c.Request.Header.Set("Content-Type", mediaJSON)
		if pinned || attempt == patchAttempts {
			write(c)
			return
		}
		if !writeUnlessConflict(c, write) {
			return
		}
	}
}

// patchRequest is a PATCH as read: its media type and body, and the
// body decoded as that type asks (a JSON patch's operations, an apply's
// configuration).
type patchRequest struct {
	mt       string
	body     []byte
	kubeType any
	ops      jsonpatch.Patch
	config   *unstructured.Unstructured
}

// readPatch reads and checks a PATCH's body; applies says whether the
// route takes server-side apply.
func readPatch(c *gin.Context, kubeType any, applies bool) (patchRequest, error) {
	mt, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	pr := patchRequest{mt: mt, kubeType: kubeType}
	if mt == mediaApplyPatch && !applies {
		return pr, unsupportedMedia("server-side apply is not supported on " + c.FullPath() + "; apply to the object itself")
	}
	if !contains(patchTypes, mt) && mt != mediaApplyPatch {
		return pr, unsupportedMedia("PATCH takes " + strings.Join(append(slices.Clip(patchTypes), mediaApplyPatch), ", ") + "; Content-Type " + quoteOrMissing(c.GetHeader("Content-Type")) + " is not supported")
	}
	if mt != mediaApplyPatch && c.Query("force") != "" {
		return pr, &apiError{code: http.StatusUnprocessableEntity, reason: "Invalid", msg: "force: Forbidden: may not be specified for non-apply patch",
			details: &model.StatusDetails{Causes: []model.StatusCause{{Type: model.FieldForbidden, Field: "force", Message: "may not be specified for non-apply patch"}}}}
	}
	body, err := requestBody(c)
	if err != nil {
		return pr, err
	}
	if err := validUTF8(body); err != nil {
		return pr, err
	}
	pr.body = body
	switch mt {
	case mediaJSONPatch:
		if pr.ops, err = jsonpatch.DecodePatch(body); err != nil {
			return pr, badRequestf("malformed JSON patch: %v", err)
		}
		err = checkBody(body, nil)
	case mediaApplyPatch:
		pr.config, err = readApplyConfig(c, body, kindOfType(kubeType))
		c.Set(appliedKey, true)
	default:
		err = checkMergePatch(body, kubeType)
	}
	return pr, err
}

// applyPatch is the object stored (nil: none, for an apply that creates)
// with the patch applied.
func (s *Server) applyPatch(c *gin.Context, pr patchRequest, stored []byte) ([]byte, error) {
	switch pr.mt {
	case mediaJSONPatch:
		patched, err := pr.ops.Apply(stored)
		if err != nil {
			return nil, &apiError{code: http.StatusUnprocessableEntity, reason: "Invalid", msg: "the JSON patch does not apply: " + err.Error()}
		}
		return patched, nil
	case mediaStrategicMergePatch:
		patched, err := strategicpatch.StrategicMergePatch(stored, pr.body, pr.kubeType)
		if err != nil {
			return nil, badRequestf("the strategic merge patch does not apply: %v", err)
		}
		return patched, nil
	case mediaApplyPatch:
		return s.appliedObject(c, pr.config.GroupVersionKind(), stored, pr.config)
	}
	patched, err := jsonpatch.MergePatch(stored, pr.body)
	if err != nil {
		return nil, badRequestf("the merge patch does not apply: %v", err)
	}
	return patched, nil
}

// writeUnlessConflict runs write, holding its answer back if it is a
// conflict, and reports whether it was one (the patch is to be applied
// again to the object read anew). A conflict is a write in between;
// AlreadyExists, a create by apply that another got in first with.
func writeUnlessConflict(c *gin.Context, write gin.HandlerFunc) bool {
	held := &heldResponse{ResponseWriter: c.Writer, header: c.Writer.Header().Clone()}
	c.Writer = held
	write(c)
	c.Writer = held.ResponseWriter
	if held.status != http.StatusConflict {
		held.release()
		return false
	}
	return true
}

// namesResourceVersion reports whether a patch sets or tests
// metadata.resourceVersion: a merge patch's key, a JSON patch's path.
func namesResourceVersion(body []byte, jsonPatch bool) bool {
	if jsonPatch {
		var ops []struct{ Path string }
		_ = json.Unmarshal(body, &ops)
		return slices.ContainsFunc(ops, func(op struct{ Path string }) bool { return op.Path == "/metadata/resourceVersion" })
	}
	var patch struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	_ = json.Unmarshal(body, &patch)
	_, ok := patch.Metadata["resourceVersion"]
	return ok
}

// patchAttempts bounds a patch's reads when writes keep coming in between.
const patchAttempts = 5

// heldResponse keeps a handler's answer, headers included, until it is
// known not to be a conflict to retry: a retried attempt's headers (its
// Warnings) are dropped with its body.
type heldResponse struct {
	gin.ResponseWriter
	header http.Header
	status int
	body   bytes.Buffer
}

func (h *heldResponse) Header() http.Header { return h.header }
func (h *heldResponse) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}
func (h *heldResponse) WriteHeaderNow() {}
func (h *heldResponse) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return h.body.Write(b)
}
func (h *heldResponse) WriteString(s string) (int, error) { return h.Write([]byte(s)) }
func (h *heldResponse) Status() int                       { return h.status }
func (h *heldResponse) Written() bool                     { return h.status != 0 }
func (h *heldResponse) Size() int                         { return h.body.Len() }

// release sends the held answer.
func (h *heldResponse) release() {
	out := h.ResponseWriter.Header()
	clear(out)
	for k, v := range h.header {
		out[k] = v
	}
	if h.status != 0 {
		h.ResponseWriter.WriteHeader(h.status)
	}
	_, _ = h.ResponseWriter.Write(h.body.Bytes())
}

// checkMergePatch refuses a merge patch that is not a JSON object, or
// whose keys or text the kind's own body would refuse (a key matching a
// field only without regard to case, a NUL), before anything is read.
func checkMergePatch(body []byte, kubeType any) error {
	var patch any
	if err := json.Unmarshal(body, &patch); err != nil {
		return badRequestf("malformed patch: %s", describeJSONError(err))
	}
	if _, ok := patch.(map[string]any); !ok {
		return badRequestf("a merge patch of an object must be a JSON object")
	}
	return checkBody(body, reflect.TypeOf(kubeType))
}

// stored reads the object a request names, as patchWith's current.
func stored[T any, PT store.ObjectPtr[T]](res store.Resource[T, PT]) func(*gin.Context) (any, error) {
	return func(c *gin.Context) (any, error) {
		return res.Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
	}
}

func (s *Server) patchPod(c *gin.Context) {
	s.patchWith(c, stored(s.store.Pods()), corev1.Pod{}, s.updatePod, s.createPod)
}

func (s *Server) patchService(c *gin.Context) {
	s.patchWith(c, stored(s.store.Services()), corev1.Service{}, s.updateService, s.createService)
}

func (s *Server) patchNode(c *gin.Context) {
	s.patchWith(c, stored(s.store.Nodes()), corev1.Node{}, s.updateNode, s.createNode)
}

// patchSecret patches the secret as the caller sees it: redacted values
// stay redacted, and the update keeps the stored ones.
func (s *Server) patchSecret(c *gin.Context) {
	current := func(c *gin.Context) (any, error) {
		sec, err := s.secrets.Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
		if err != nil {
			return nil, s.secretError(c, err)
		}
		return s.redactSecret(c, sec), nil
	}
	s.patchWith(c, current, corev1.Secret{}, s.updateSecret, s.createSecret)
}

func (s *Server) patchClaim(c *gin.Context) {
	s.patchWith(c, stored(s.store.Claims()), corev1.PersistentVolumeClaim{}, s.updateClaim, s.createClaim)
}

func (s *Server) patchDeployment(c *gin.Context) {
	s.patchWith(c, stored(s.store.Deployments()), appsv1.Deployment{}, s.updateDeployment, s.createDeployment)
}

// patchDeploymentScale patches the deployment's Scale (kubectl scale
// sends a merge patch of spec.replicas).
func (s *Server) patchDeploymentScale(c *gin.Context) {
	current := func(c *gin.Context) (any, error) {
		d, err := s.store.Deployments().Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
		if err != nil {
			return nil, err
		}
		return scaleOf(d), nil
	}
	s.patchWith(c, current, autoscalingv1.Scale{}, s.putDeploymentScale, nil)
}

// kindOfType is the group, version and kind of a Kubernetes type.
func kindOfType(kubeType any) schema.GroupVersionKind {
	switch kubeType.(type) {
	case appsv1.Deployment:
		return appsv1.SchemeGroupVersion.WithKind("Deployment")
	case corev1.Pod:
		return corev1.SchemeGroupVersion.WithKind("Pod")
	case corev1.Service:
		return corev1.SchemeGroupVersion.WithKind("Service")
	case corev1.Node:
		return corev1.SchemeGroupVersion.WithKind("Node")
	case corev1.Secret:
		return corev1.SchemeGroupVersion.WithKind("Secret")
	case corev1.PersistentVolumeClaim:
		return corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	case corev1.ResourceQuota:
		return corev1.SchemeGroupVersion.WithKind("ResourceQuota")
	case corev1.LimitRange:
		return corev1.SchemeGroupVersion.WithKind("LimitRange")
	}
	return schema.GroupVersionKind{}
}
