package api

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/model"
)

// Eviction asks for a pod's graceful deletion, as Kubernetes'
// policy/v1 Eviction (kubectl drain sends one per pod).
type Eviction struct {
	APIVersion    string           `json:"apiVersion,omitempty"`
	Kind          string           `json:"kind,omitempty"`
	Metadata      model.ObjectMeta `json:"metadata"`
	DeleteOptions *DeleteOptions   `json:"deleteOptions,omitempty"`
}

// evictPod is POST …/pods/{name}/eviction. zonewright has no disruption
// budgets, so an eviction is the pod's deletion with the eviction's
// options; its workload replaces it elsewhere if the node is cordoned.
func (s *Server) evictPod(c *gin.Context) {
	var e Eviction
	if err := decode(c, &e); err != nil {
		s.fail(c, err)
		return
	}
	if n := e.Metadata.Name; n != "" && n != c.Param("name") {
		s.fail(c, badRequestf("the name of the eviction (%q) does not match the pod in the URL (%q)", n, c.Param("name")))
		return
	}
	if ns := e.Metadata.Namespace; ns != "" && ns != c.Param("ns") {
		s.fail(c, badRequestf("the namespace of the eviction (%q) does not match the URL's (%q)", ns, c.Param("ns")))
		return
	}
	var opts []byte
	if e.DeleteOptions != nil {
		b, err := json.Marshal(e.DeleteOptions)
		if err != nil {
			s.fail(c, err)
			return
		}
		opts = b
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(opts))
	c.Request.ContentLength = int64(len(opts))
	c.Request.Header.Set("Content-Type", mediaJSON)
	s.deletePod(c)
}
