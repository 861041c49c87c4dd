package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/store"
)

// patchObject serves PATCH with a JSON merge patch (RFC 7386): the patch
// is applied to the object as stored and the result goes through the
// kind's PUT handler, so a patch is validated, authorised and
// conflict-checked exactly as the equivalent PUT. Its precondition is the
// resourceVersion read here, or the one the patch itself sets: a write
// in between is a 409, as for PUT.
//
// A strategic merge patch is taken only when it means the same as a
// merge patch: it has no lists (which strategic merge merges by key) and
// no $-directives.
//
// Authorisation: verb "patch" on the kind's resource, granted to whoever
// may "update" it (the PUT handler runs).
func patchObject[T any, PT store.ObjectPtr[T]](s *Server, c *gin.Context, res store.Resource[T, PT], put gin.HandlerFunc) {
	mt, _, _ := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if !contains(patchTypes, mt) {
		s.fail(c, unsupportedMedia("PATCH takes "+strings.Join(patchTypes, " or ")+"; Content-Type "+quoteOrMissing(c.GetHeader("Content-Type"))+" is not supported"))
		return
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.fail(c, err)
			return
		}
		s.fail(c, badRequestf("read request body: %v", err))
		return
	}
	if err := validUTF8(body); err != nil {
		s.fail(c, err)
		return
	}
	var patch any
	if err := json.Unmarshal(body, &patch); err != nil {
		s.fail(c, badRequestf("malformed patch: %s", describeJSONError(err)))
		return
	}
	if _, ok := patch.(map[string]any); !ok {
		s.fail(c, badRequestf("a merge patch of an object must be a JSON object"))
		return
	}
	if mt == mediaStrategicMergePatch && !plainMergePatch(patch) {
		s.fail(c, unsupportedMedia("this strategic merge patch holds lists or $-directives, whose strategic meaning zonewright does not implement; send it as "+mediaMergePatch+" (lists are then replaced whole)"))
		return
	}
	cur, err := res.Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	stored, err := json.Marshal(cur)
	if err != nil {
		s.fail(c, err)
		return
	}
	var doc any
	if err := json.Unmarshal(stored, &doc); err != nil {
		s.fail(c, err)
		return
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(merged))
	c.Request.ContentLength = int64(len(merged))
	c.Request.Header.Set("Content-Type", mediaJSON)
	put(c)
}

// mergePatch applies patch to doc as RFC 7386 says: objects merge key by
// key, null removes a key, anything else replaces.
func mergePatch(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = mergePatch(dm[k], v)
	}
	return dm
}

// plainMergePatch reports whether a strategic merge patch means the same
// as a JSON merge patch: no lists and no $-directives anywhere.
func plainMergePatch(v any) bool {
	switch v := v.(type) {
	case []any:
		return false
	case map[string]any:
		for k, x := range v {
			if strings.HasPrefix(k, "$") || !plainMergePatch(x) {
				return false
			}
		}
	}
	return true
}

func (s *Server) patchPod(c *gin.Context)     { patchObject(s, c, s.store.Pods(), s.updatePod) }
func (s *Server) patchService(c *gin.Context) { patchObject(s, c, s.store.Services(), s.updateService) }
func (s *Server) patchNode(c *gin.Context)    { patchObject(s, c, s.store.Nodes(), s.updateNode) }
