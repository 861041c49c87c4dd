package api

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// The committed document is the one the route table and the Go types
// make; a route or a field added without regenerating it fails here.
func TestOpenAPIDocumentIsCurrent(t *testing.T) {
	want, err := BuildOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, openapiJSON) {
		t.Fatal("api/openapi.json is stale: run `go generate ./api/` and commit it")
	}
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadOpenAPI(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("api/openapi.json is not a valid OpenAPI document: %v", err)
	}
	for name, s := range doc.Components.Schemas {
		if s.Value == nil || s.Value.Type == nil && s.Value.AnyOf == nil {
			t.Errorf("schema %s says nothing of its shape", name)
		}
	}
}

// Every route gin serves is in the document, and every operation of the
// document is served.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	served := map[string]bool{}
	for _, r := range (&Server{}).engine().Routes() {
		var segs []string
		for _, seg := range strings.Split(r.Path, "/") {
			if p, ok := strings.CutPrefix(seg, ":"); ok {
				seg = "{" + p + "}"
			}
			segs = append(segs, seg)
		}
		p := strings.Join(segs, "/")
		served[r.Method+" "+p] = true
		if item := doc.Paths.Value(p); item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("%s %s is served but not in the OpenAPI document: describe it in api/openapi_ops.go and run `go generate ./api/`", r.Method, p)
		}
	}
	for p, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+p] {
				t.Errorf("the OpenAPI document has %s %s, which no route serves", method, p)
			}
		}
	}
}

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapiJSON)
	if err != nil {
		t.Fatalf("load api/openapi.json: %v", err)
	}
	return doc
}

// A route added without its documentation fails with what to add, and
// where.
func TestOpenAPISaysWhatANewRouteNeeds(t *testing.T) {
	routes := (&Server{}).routes()
	for _, c := range []struct {
		route route
		want  string
	}{
		{route{"GET", "/api/v1/namespaces/:ns/pods/:name/attach", nil, "get pods/attach"}, `add "get pods/attach" to operations in api/openapi_ops.go`},
		{route{"GET", "/api/v1/widgets", nil, "list widgets"}, `add "widgets" with its Go type to resourceTypes in api/openapi_ops.go`},
		{route{"GET", "/livez", nil, open}, `add "GET /livez" to operations in api/openapi_ops.go`},
	} {
		_, err := buildOpenAPI(append(routes[:len(routes):len(routes)], c.route))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want it to say %s", c.route.method, c.route.path, err, c.want)
		}
	}
	if _, err := buildOpenAPI(routes[1:]); err == nil || !strings.Contains(err.Error(), `has "GET /healthz", which no route does`) {
		t.Errorf("an entry of operations with no route: %v", err)
	}
}
