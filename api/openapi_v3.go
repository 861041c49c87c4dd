package api

import (
	"bytes"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// OpenAPI v3 as Kubernetes serves it: GET /openapi/v3 is an index of
// documents, one for each group version ("api/v1", "apis/apps/v1") and
// one for each other top-level path ("healthz", "version"); each is at
// /openapi/v3/<key> and holds its paths and the components they use.
// kubectl reads the group version's document to learn whether the server
// validates fields (the fieldValidation parameter on its PATCH
// operations) and to explain a kind.
//
// The documents are cut from openapi.json, the one document that
// go generate writes: there is a single source, and the cut is made once.

// OpenAPIV3Index answers GET /openapi/v3.
type OpenAPIV3Index struct {
	Paths map[string]OpenAPIV3IndexEntry `json:"paths"`
}

// OpenAPIV3IndexEntry locates a document; its hash changes with its
// content, so a client may cache what it fetched at this URL forever.
type OpenAPIV3IndexEntry struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

const openAPIV3Prefix = "/openapi/v3"

// openAPIKey is the document a path of the API belongs in: its group
// version (api/v1, apis/apps/v1), or else its first segment.
func openAPIKey(path string) string {
	p := strings.TrimPrefix(path, "/")
	segs := strings.Split(p, "/")
	switch {
	case segs[0] == "api" && len(segs) >= 2:
		return "api/" + segs[1]
	case segs[0] == "apis" && len(segs) >= 3:
		return strings.Join(segs[:3], "/")
	}
	return segs[0]
}

// openAPIRoutes are the index and the documents of the paths of rs.
func (s *Server) openAPIRoutes(rs []route) []route {
	keys := []string{openAPIKey(openAPIV3Prefix)}
	for _, rt := range rs {
		if k := openAPIKey(rt.path); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := []route{{http.MethodGet, openAPIV3Prefix, s.serveOpenAPIIndex, open}}
	for _, k := range keys {
		out = append(out, route{http.MethodGet, openAPIV3Prefix + "/" + k, s.serveOpenAPIDocument(k), open})
	}
	return out
}

// openAPIDocs are the documents cut from openapi.json, once.
var openAPIDocs = sync.OnceValues(func() (*openAPIV3Docs, error) { return splitOpenAPI(openapiJSON) })

type openAPIV3Docs struct {
	index []byte
	docs  map[string]openAPIV3Doc
}

type openAPIV3Doc struct {
	body []byte
	hash string
}

// splitOpenAPI cuts whole, an OpenAPI 3.1 document, into one OpenAPI 3.0
// document per key (openAPIKey), with their index. They are 3.0, as
// Kubernetes' are, because kubectl's explain reads a schema's type as one
// string: "or null" is said with nullable.
func splitOpenAPI(whole []byte) (*openAPIV3Docs, error) {
	var doc map[string]any
	if err := json.Unmarshal(whole, &doc); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	paths, _ := doc["paths"].(map[string]any)
	components, _ := doc["components"].(map[string]any)
	byKey := map[string]map[string]any{}
	for p, item := range paths {
		k := openAPIKey(p)
		if byKey[k] == nil {
			byKey[k] = map[string]any{}
		}
		byKey[k][p] = item
	}
	out := &openAPIV3Docs{docs: map[string]openAPIV3Doc{}}
	index := OpenAPIV3Index{Paths: map[string]OpenAPIV3IndexEntry{}}
	for k, ps := range byKey {
		d := map[string]any{
			"openapi":    "3.0.0",
			"info":       doc["info"],
			"paths":      ps,
			"components": usedComponents(ps, components),
		}
		if sec, ok := doc["security"]; ok {
			d["security"] = sec
		}
		// A copy of its own: the documents share components, and
		// each is rewritten.
		b, err := json.Marshal(d)
		if err == nil {
			err = json.Unmarshal(b, &d)
		}
		if err != nil {
			return nil, err
		}
		toOpenAPI30(d)
		withoutMutualTLS(d)
		if b, err = json.Marshal(d); err != nil {
			return nil, err
		}
		hash := fmt.Sprintf("%X", sha512.Sum512(b))
		out.docs[k] = openAPIV3Doc{body: b, hash: hash}
		index.Paths[k] = OpenAPIV3IndexEntry{ServerRelativeURL: openAPIDocURL(k, hash)}
	}
	var err error
	out.index, err = json.Marshal(index)
	return out, err
}

func openAPIDocURL(key, hash string) string {
	return openAPIV3Prefix + "/" + key + "?" + url.Values{"hash": {hash}}.Encode()
}

// usedComponents are the components paths refer to, directly or through
// other components; the security schemes go whole.
func usedComponents(paths map[string]any, components map[string]any) map[string]any {
	out := map[string]any{}
	if s, ok := components["securitySchemes"]; ok {
		out["securitySchemes"] = s
	}
	var queue []string
	seen := map[string]bool{}
	var refs func(v any)
	refs = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok && !seen[r] {
				seen[r] = true
				queue = append(queue, r)
			}
			for _, e := range v {
				refs(e)
			}
		case []any:
			for _, e := range v {
				refs(e)
			}
		}
	}
	refs(paths)
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		section, name, ok := strings.Cut(strings.TrimPrefix(r, "#/components/"), "/")
		if !ok {
			continue
		}
		v, ok := components[section].(map[string]any)[name]
		if !ok {
			continue
		}
		if out[section] == nil {
			out[section] = map[string]any{}
		}
		out[section].(map[string]any)[name] = v
		refs(v)
	}
	return out
}

// toOpenAPI30 rewrites a 3.1 "type": [T, "null"] as 3.0's "type": T,
// "nullable": true, throughout v.
func toOpenAPI30(v any) {
	switch v := v.(type) {
	case map[string]any:
		if types, ok := v["type"].([]any); ok {
			var rest []any
			for _, t := range types {
				if t == "null" {
					v["nullable"] = true
				} else {
					rest = append(rest, t)
				}
			}
			if len(rest) == 1 {
				v["type"] = rest[0]
			} else {
				v["type"] = rest
			}
		}
		for _, e := range v {
			toOpenAPI30(e)
		}
	case []any:
		for _, e := range v {
			toOpenAPI30(e)
		}
	}
}

// withoutMutualTLS drops the security schemes 3.0 cannot say (mutual
// TLS, a 3.1 type) and the requirements that name them; the document's
// description still says that a client certificate is taken.
func withoutMutualTLS(d map[string]any) {
	components, _ := d["components"].(map[string]any)
	schemes, _ := components["securitySchemes"].(map[string]any)
	dropped := map[string]bool{}
	for name, s := range schemes {
		if s, _ := s.(map[string]any); s["type"] == "mutualTLS" {
			dropped[name] = true
			delete(schemes, name)
		}
	}
	var drop func(v any) any
	drop = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == "security" {
					v[k] = withoutRequirements(e, dropped)
					continue
				}
				drop(e)
			}
		case []any:
			for _, e := range v {
				drop(e)
			}
		}
		return v
	}
	drop(d)
}

// withoutRequirements is a security requirement list without those that
// name a dropped scheme (an empty list, no requirement, stays).
func withoutRequirements(v any, dropped map[string]bool) any {
	reqs, ok := v.([]any)
	if !ok {
		return v
	}
	out := []any{}
	for _, r := range reqs {
		keep := true
		if r, ok := r.(map[string]any); ok {
			for name := range r {
				keep = keep && !dropped[name]
			}
		}
		if keep {
			out = append(out, r)
		}
	}
	return out
}

// serveOpenAPIIndex answers GET /openapi/v3, open like the health checks:
// the documents say what the API is, nothing of what it holds.
func (s *Server) serveOpenAPIIndex(c *gin.Context) {
	docs, err := openAPIDocs()
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Content-Type", "application/json")
	http.ServeContent(c.Writer, c.Request, "", time.Time{}, bytes.NewReader(docs.index))
}

// serveOpenAPIDocument answers GET /openapi/v3/<key>. Its ETag is the
// hash of the index's URL; with that hash the answer is cached for a
// year (immutable), and with another it is a redirect to the current
// one, as Kubernetes does.
func (s *Server) serveOpenAPIDocument(key string) gin.HandlerFunc {
	return func(c *gin.Context) {
		docs, err := openAPIDocs()
		if err != nil {
			s.fail(c, err)
			return
		}
		d, ok := docs.docs[key]
		if !ok { // openapi.json is older than the routes
			s.fail(c, notFoundf("no OpenAPI document for %s", key))
			return
		}
		c.Header("Etag", `"`+d.hash+`"`)
		if hash := c.Query("hash"); hash != "" {
			if hash != d.hash {
				c.Redirect(http.StatusMovedPermanently, openAPIDocURL(key, d.hash))
				return
			}
			c.Header("Cache-Control", "public, immutable")
			c.Header("Expires", time.Now().AddDate(1, 0, 0).UTC().Format(http.TimeFormat))
		}
		c.Header("Content-Type", "application/json")
		http.ServeContent(c.Writer, c.Request, "", time.Time{}, bytes.NewReader(d.body))
	}
}
