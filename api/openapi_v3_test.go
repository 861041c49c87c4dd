package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/zonewright/zonewright/api"
)

// get sends GET path with headers and follows no redirect.
func (c *client) getNoRedirect(path string, headers map[string]string) (*http.Response, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	hc := &http.Client{Transport: c.http.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, []byte(b.String())
}

// The index lists a document for every group version discovery shows,
// at a hashed URL that answers it immutably; each document holds its
// group version's paths, with the kind of each resource on its
// operations and schemas, and fieldValidation on every PATCH of a kind
// (which is what kubectl looks for before it skips validating a
// manifest itself).
func TestOpenAPIV3IndexAndGroupVersionDocuments(t *testing.T) {
	c := newAPI(t)
	resp, body := c.getNoRedirect("/openapi/v3", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi/v3: %d %s", resp.StatusCode, body)
	}
	var index api.OpenAPIV3Index
	if err := json.Unmarshal(body, &index); err != nil {
		t.Fatal(err)
	}

	// The group versions, as discovery shows them.
	var groups api.APIGroupList
	if err := json.Unmarshal(c.json("GET", "/apis", nil).body, &groups); err != nil {
		t.Fatal(err)
	}
	gvs := map[string]string{"api/v1": "/api/v1"}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			gvs["apis/"+v.GroupVersion] = "/apis/" + v.GroupVersion
		}
	}
	if len(gvs) < 5 {
		t.Fatalf("discovery shows %d group versions: %v", len(gvs), gvs)
	}
	for key, discoveryPath := range gvs {
		entry, ok := index.Paths[key]
		if !ok {
			t.Errorf("the index has no %s: %s", key, body)
			continue
		}
		u, err := url.Parse(entry.ServerRelativeURL)
		if err != nil || u.Path != "/openapi/v3/"+key || u.Query().Get("hash") == "" {
			t.Errorf("%s: serverRelativeURL %q, want /openapi/v3/%s?hash=…", key, entry.ServerRelativeURL, key)
			continue
		}
		resp, docBody := c.getNoRedirect(entry.ServerRelativeURL, map[string]string{"Accept": "application/json"})
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, immutable" ||
			resp.Header.Get("Etag") != `"`+u.Query().Get("hash")+`"` {
			t.Errorf("GET %s: %d, Cache-Control %q, Etag %q", entry.ServerRelativeURL, resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Etag"))
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal(docBody, &doc); err != nil {
			t.Fatal(err)
		}
		checkGroupVersionDocument(t, c, key, discoveryPath, doc)
	}

	// An old hash is sent to the current one; a known ETag is not sent again.
	hashed := index.Paths["api/v1"].ServerRelativeURL
	resp, _ = c.getNoRedirect("/openapi/v3/api/v1?hash=0ld", nil)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != hashed || resp.Header.Get("Cache-Control") != "" {
		t.Errorf("an old hash: %d, Location %q, Cache-Control %q; want 301 to %s, uncached", resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Cache-Control"), hashed)
	}
	resp, _ = c.getNoRedirect("/openapi/v3/api/v1", nil)
	etag := resp.Header.Get("Etag")
	if resp.StatusCode != http.StatusOK || etag == "" || resp.Header.Get("Cache-Control") != "" {
		t.Errorf("without a hash: %d, Etag %q, Cache-Control %q; want 200 with an Etag, not immutable", resp.StatusCode, etag, resp.Header.Get("Cache-Control"))
	}
	if resp, _ = c.getNoRedirect("/openapi/v3/api/v1", map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match the Etag: %d, want 304", resp.StatusCode)
	}
	if resp, body = c.getNoRedirect("/openapi/v3/apis/widgets.example.com/v1", nil); resp.StatusCode != http.StatusNotFound ||
		!strings.Contains(string(body), `"kind":"Status"`) {
		t.Errorf("a group version zonewright does not serve: %d %s, want a 404 Status", resp.StatusCode, body)
	}
}

func checkGroupVersionDocument(t *testing.T, c *client, key, discoveryPath string, doc map[string]any) {
	t.Helper()
	if doc["openapi"] != "3.0.0" {
		t.Errorf("%s: openapi %v, want 3.0.0 as Kubernetes serves", key, doc["openapi"])
	}
	paths, _ := doc["paths"].(map[string]any)
	for p := range paths {
		if p != discoveryPath && !strings.HasPrefix(p, discoveryPath+"/") {
			t.Errorf("%s holds %s, another group version's path", key, p)
		}
	}
	schemas, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)
	// Every $ref resolves within the document.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok {
				section, name, _ := strings.Cut(strings.TrimPrefix(r, "#/components/"), "/")
				if sec, _ := doc["components"].(map[string]any)[section].(map[string]any); sec[name] == nil {
					t.Errorf("%s: %s is not in the document", key, r)
				}
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)

	// Every resource discovery shows has its kind on an operation of its
	// path, and on its schema.
	var resources api.APIResourceList
	if err := json.Unmarshal(c.json("GET", discoveryPath, nil).body, &resources); err != nil {
		t.Fatal(err)
	}
	group, version, _ := strings.Cut(resources.GroupVersion, "/")
	if version == "" {
		group, version = "", group
	}
	want := map[string]any{"group": group, "version": version}
	for _, r := range resources.Resources {
		if strings.Contains(r.Name, "/") {
			continue
		}
		want["kind"] = r.Kind
		found := false
		for p, item := range paths {
			// A subresource (…/{name}/scale) is its own kind.
			if collection, sub, _ := strings.Cut(p, "/{name}"); sub != "" || !strings.HasSuffix(collection, "/"+r.Name) && p != discoveryPath+"/"+r.Name+"/{ns}" {
				continue
			}
			for method, op := range item.(map[string]any) {
				op, _ := op.(map[string]any)
				if gvk, ok := op["x-kubernetes-group-version-kind"]; ok {
					if !equalJSON(gvk, want) {
						t.Errorf("%s %s: x-kubernetes-group-version-kind %v, want %v", method, p, gvk, want)
					}
					found = true
				}
				if method == "patch" && !hasInlineQueryParameter(op, "fieldValidation") {
					t.Errorf("PATCH %s has no fieldValidation parameter: kubectl would validate manifests itself", p)
				}
			}
		}
		if !found {
			t.Errorf("%s: no operation on %s carries its kind %v", key, r.Name, want)
		}
		marked := false
		for _, s := range schemas {
			if kinds, ok := s.(map[string]any)["x-kubernetes-group-version-kind"].([]any); ok {
				for _, k := range kinds {
					marked = marked || equalJSON(k, want)
				}
			}
		}
		if !marked {
			t.Errorf("%s: no schema carries the kind %v", key, want)
		}
	}
}

func hasInlineQueryParameter(op map[string]any, name string) bool {
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		if p, _ := p.(map[string]any); p["name"] == name && p["in"] == "query" {
			return true
		}
	}
	return false
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Each served document is a valid OpenAPI 3.0 document on its own, with
// the types as one string, "or null" said with nullable (kubectl's explain
// reads a type as one string).
func TestOpenAPIV3DocumentsAreValid(t *testing.T) {
	docs, err := api.OpenAPIV3Documents()
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 10 {
		t.Fatalf("%d documents", len(docs))
	}
	for key, b := range docs {
		doc, err := openapi3.NewLoader().LoadFromData(b)
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		if err := doc.Validate(context.Background()); err != nil {
			t.Errorf("%s is not a valid OpenAPI document: %v", key, err)
		}
		if strings.Contains(string(b), `"type":[`) {
			t.Errorf("%s has a type that is a list", key)
		}
	}
}
