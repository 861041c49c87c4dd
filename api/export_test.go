package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// UnguardedHandler serves the same routes with no authentication nor
// authorisation: the baseline the authorisation latency is measured against.
func UnguardedHandler(s *Server) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(s.recover, s.logRequests, s.checkRequestText, s.checkHost, s.checkOrigin, s.checkContentType, limitBody)
	s.engine() // the list routes streams knows
	for _, rt := range s.routes() {
		r.Handle(rt.method, rt.path, rt.handler)
	}
	return withTimeouts(r, s.streams, s.requestTimeout, s.bodyTimeout)
}

// OpenAPIDocument is openapi.json, the document those GET /openapi/v3
// lists are cut from.
func OpenAPIDocument() []byte { return openapiJSON }

// OpenAPIV3Documents are the documents GET /openapi/v3 lists, by key.
func OpenAPIV3Documents() (map[string][]byte, error) {
	docs, err := openAPIDocs()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for k, d := range docs.docs {
		out[k] = d.body
	}
	return out, nil
}
