package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3gen"

	"github.com/zonewright/zonewright/internal/model"
)

//go:generate go run openapi_gen.go

// openapiJSON is the API's OpenAPI document, as BuildOpenAPI wrote it:
// the source of the documents GET /openapi/v3 lists (openapi_v3.go).
//
//go:embed openapi.json
var openapiJSON []byte

// BuildOpenAPI writes the OpenAPI document of every route: paths and
// parameters from the route table and operations, schemas from the Go
// types the handlers decode and answer.
func BuildOpenAPI() ([]byte, error) {
	doc, err := buildOpenAPI((&Server{}).routes())
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Security schemes: a bearer token, or the client certificate of a node
// (or of an operator) signed by the cluster's CA.
const (
	securityBearer = "bearerToken"
	securityCert   = "clientCertificate"
)

func buildOpenAPI(routes []route) (*openapi3.T, error) {
	doc := &openapi3.T{
		OpenAPI: "3.1.0",
		Info: &openapi3.Info{Title: "zonewright", Version: model.APIVersion,
			Description: "illumos zones as pods: Kubernetes-shaped objects, Status-shaped errors, " +
				"watches as server-sent events (?watch=true; one JSON event per line, as Kubernetes streams them, when Accept is application/json). Bodies are JSON, or YAML with Content-Type/Accept application/yaml. " +
				"Every route but the open ones takes a bearer token or a client certificate signed by the cluster's CA (mutual TLS)."},
		Paths: openapi3.NewPaths(),
		Components: &openapi3.Components{
			Schemas:    openapi3.Schemas{},
			Parameters: openapi3.ParametersMap{},
			SecuritySchemes: openapi3.SecuritySchemes{
				securityBearer: {Value: openapi3.NewJWTSecurityScheme().WithBearerFormat("opaque").
					WithDescription("a token from `zonewright token` or POST /api/v1/tokens")},
				securityCert: {Value: &openapi3.SecurityScheme{Type: "mutualTLS",
					Description: "a TLS client certificate signed by the cluster's CA: a node's (CN system:node:<name>, from POST /api/v1/nodes/{name}/join) or a user's"}},
			},
		},
		Security: openapi3.SecurityRequirements{{securityBearer: {}}, {securityCert: {}}},
	}
	structs := map[string]*openapi3.Schema{}
	structTypes := map[string]reflect.Type{}
	b := &docBuilder{doc: doc, gen: newSchemaGenerator(structs, structTypes)}
	b.addParameters()

	ops := operations()
	used := map[string]bool{}
	resources := resourceTypes()
	var missing []string
	for _, rt := range routes {
		op, key, found := routeOperation(rt, ops, resources)
		if !found {
			what := fmt.Sprintf("add %q to operations", key)
			if a, ok := rt.attributes(); ok && a.Subresource == "" {
				if _, plain := plainOperation(a.Verb, nil); plain {
					what = fmt.Sprintf("add %q with its Go type to resourceTypes", a.Resource)
				}
			}
			missing = append(missing, fmt.Sprintf("%s %s: %s in api/openapi_ops.go", rt.method, rt.path, what))
			continue
		}
		used[key] = true
		if err := b.addRoute(rt, op); err != nil {
			return nil, fmt.Errorf("%s %s: %w", rt.method, rt.path, err)
		}
	}
	for key := range ops {
		if !used[key] {
			missing = append(missing, fmt.Sprintf("operations in api/openapi_ops.go has %q, which no route does: remove it", key))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("the OpenAPI document does not match the routes:\n  %s", strings.Join(missing, "\n  "))
	}
	if err := b.markKinds(routes, resources); err != nil {
		return nil, err
	}
	// The generator keeps only the types with properties in the
	// components; those without (IntOrString, empty specs) go there too.
	for name, s := range structs {
		if _, ok := doc.Components.Schemas[name]; !ok {
			doc.Components.Schemas[name] = &openapi3.SchemaRef{Value: s}
		}
	}
	docs, err := newGoDocs()
	if err != nil {
		return nil, err
	}
	for name, t := range structTypes {
		if err := docs.describe(t, doc.Components.Schemas[name].Value); err != nil {
			return nil, fmt.Errorf("the doc comments of %s: %w", t, err)
		}
	}
	for _, s := range doc.Components.Schemas {
		nullAsType(s)
	}
	return doc, nil
}

// nullAsType says "or null" as OpenAPI 3.1 does, a type of its own, where
// the generator wrote 3.0's nullable.
func nullAsType(ref *openapi3.SchemaRef) {
	s := ref.Value
	if ref.Ref != "" || s == nil {
		return
	}
	if s.Nullable && s.Type != nil {
		s.Nullable = false
		*s.Type = append(*s.Type, openapi3.TypeNull)
	}
	for _, p := range s.Properties {
		nullAsType(p)
	}
	if s.Items != nil {
		nullAsType(s.Items)
	}
	if s.AdditionalProperties.Schema != nil {
		nullAsType(s.AdditionalProperties.Schema)
	}
	for _, sub := range s.AnyOf {
		nullAsType(sub)
	}
}

// routeOperation finds what the document says of rt: its entry in ops,
// or the plain verb on its resource; key is where that entry belongs.
func routeOperation(rt route, ops map[string]operation, resources map[string]any) (op operation, key string, found bool) {
	key = rt.does
	if rt.does == open {
		key = rt.method + " " + rt.path
		if strings.HasPrefix(rt.path, openAPIV3Prefix+"/") {
			key = openAPIDocumentOp // one for every document
		}
	}
	if op, ok := ops[key]; ok {
		return op, key, true
	}
	if a, ok := rt.attributes(); ok && a.Subresource == "" {
		if obj, ok := resources[a.Resource]; ok {
			op, found = plainOperation(a.Verb, obj)
		}
	}
	return op, key, found
}

type docBuilder struct {
	doc *openapi3.T
	gen *openapi3gen.Generator
}

var pathParams = map[string]string{
	"ns":   "the namespace",
	"name": "the object's name",
}

func (b *docBuilder) addParameters() {
	for name, desc := range pathParams {
		b.doc.Components.Parameters[name] = &openapi3.ParameterRef{Value: openapi3.NewPathParameter(name).
			WithDescription(desc).WithSchema(openapi3.NewStringSchema())}
	}
	for name, q := range queryParams() {
		s := &openapi3.Schema{Type: &openapi3.Types{q.typ}}
		if q.typ == "array" { // repeated: ?command=a&command=b
			s.Items = openapi3.NewStringSchema().NewRef()
		}
		b.doc.Components.Parameters[name] = &openapi3.ParameterRef{Value: openapi3.NewQueryParameter(name).
			WithDescription(q.description).WithSchema(s)}
	}
}

func (b *docBuilder) addRoute(rt route, op operation) error {
	var segs []string
	var params openapi3.Parameters
	for _, seg := range strings.Split(rt.path, "/") {
		if p, ok := strings.CutPrefix(seg, ":"); ok {
			if _, known := pathParams[p]; !known {
				return fmt.Errorf("path parameter %q: describe it in pathParams", p)
			}
			seg = "{" + p + "}"
			params = append(params, &openapi3.ParameterRef{Ref: "#/components/parameters/" + p})
		}
		segs = append(segs, seg)
	}
	qs := queryParams()
	for _, q := range op.query {
		if _, ok := qs[q]; !ok {
			return fmt.Errorf("query parameter %q: describe it in queryParams", q)
		}
		params = append(params, &openapi3.ParameterRef{Ref: "#/components/parameters/" + q})
	}
	o := &openapi3.Operation{Summary: rt.does, Description: op.summary, Parameters: params, Responses: openapi3.NewResponses()}
	if gvk, ok := kindOf(rt); ok {
		o.Extensions = map[string]any{extGVK: gvk}
		if rt.method == http.MethodPost || rt.method == http.MethodPut || rt.method == http.MethodPatch {
			o.Parameters = append(o.Parameters, &openapi3.ParameterRef{Value: fieldValidationParameter()})
		}
	}
	if rt.does == open {
		o.Summary = strings.TrimPrefix(rt.path, "/")
		o.Security = &openapi3.SecurityRequirements{}
	} else {
		res, _, _ := strings.Cut(strings.TrimPrefix(rt.does, strings.SplitN(rt.does, " ", 2)[0]+" "), "/")
		o.Tags = []string{res}
	}
	o.Responses = openapi3.NewResponses()
	o.Responses.Delete("default")
	if op.body != nil {
		body, err := b.requestBody(op)
		if err != nil {
			return err
		}
		o.RequestBody = body
	}
	for code, v := range op.returns {
		r, err := b.response(code, v)
		if err != nil {
			return err
		}
		o.Responses.Set(fmt.Sprint(code), &openapi3.ResponseRef{Value: r})
	}
	for _, code := range errorCodes(rt, op) {
		if _, ok := op.returns[code]; ok {
			continue
		}
		ref, err := b.failure(code)
		if err != nil {
			return err
		}
		o.Responses.Set(fmt.Sprint(code), ref)
	}
	b.doc.AddOperation(strings.Join(segs, "/"), rt.method, o)
	return nil
}

// errorCodes are the failures a request to rt can meet: those of its
// shape (authentication, parameters, a body) and op's own.
func errorCodes(rt route, op operation) []int {
	codes := map[int]bool{http.StatusForbidden: true, http.StatusInternalServerError: true, http.StatusServiceUnavailable: true}
	// Every route refuses a path or query that is not storable text.
	codes[http.StatusBadRequest] = true
	if rt.does != open {
		codes[http.StatusUnauthorized] = true
	}
	if strings.Contains(rt.path, ":") {
		codes[http.StatusNotFound] = true
	}
	if rt.method != http.MethodGet {
		codes[http.StatusConflict] = true
	}
	if op.body != nil {
		for _, c := range []int{http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity} {
			codes[c] = true
		}
	}
	for _, c := range op.errors {
		codes[c] = true
	}
	if len(op.returns) == 0 { // a route that only refuses
		codes = map[int]bool{}
		for _, c := range op.errors {
			codes[c] = true
		}
		codes[http.StatusUnauthorized], codes[http.StatusForbidden], codes[http.StatusBadRequest] = true, true, true
	}
	out := make([]int, 0, len(codes))
	for c := range codes {
		out = append(out, c)
	}
	sort.Ints(out)
	return out
}

// failure is the response of an error code, a Status, kept in the
// components under the code's name.
func (b *docBuilder) failure(code int) (*openapi3.ResponseRef, error) {
	name := strings.ReplaceAll(http.StatusText(code), " ", "")
	if b.doc.Components.Responses == nil {
		b.doc.Components.Responses = openapi3.ResponseBodies{}
	}
	if _, ok := b.doc.Components.Responses[name]; !ok {
		status, err := b.schema(statusBody)
		if err != nil {
			return nil, err
		}
		b.doc.Components.Responses[name] = &openapi3.ResponseRef{Value: openapi3.NewResponse().
			WithDescription(http.StatusText(code)).WithContent(openapi3.NewContentWithJSONSchemaRef(status))}
	}
	return &openapi3.ResponseRef{Ref: "#/components/responses/" + name}, nil
}

func (b *docBuilder) requestBody(op operation) (*openapi3.RequestBodyRef, error) {
	rb := openapi3.NewRequestBody().WithRequired(!op.optionalBody)
	switch op.body.(type) {
	case binaryStream:
		rb.WithContent(openapi3.Content{"application/octet-stream": openapi3.NewMediaType().WithSchema(openapi3.NewStringSchema().WithFormat("binary"))})
	case mergePatchBody, applyPatchBody:
		merge := openapi3.NewObjectSchema()
		merge.Description = "the fields to change; null removes one, lists are replaced whole"
		strategic := openapi3.NewObjectSchema()
		strategic.Description = "the fields to change; lists of the Kubernetes kinds merge by their keys (containers by name), as Kubernetes' strategic merge patch"
		ops := openapi3.NewArraySchema().WithItems(openapi3.NewObjectSchema())
		ops.Description = "RFC 6902 operations (op, path, value, from)"
		rb.WithContent(openapi3.Content{mediaMergePatch: openapi3.NewMediaType().WithSchema(merge),
			mediaStrategicMergePatch: openapi3.NewMediaType().WithSchema(strategic),
			mediaJSONPatch:           openapi3.NewMediaType().WithSchema(ops)})
		if _, ok := op.body.(applyPatchBody); ok {
			apply := openapi3.NewStringSchema()
			apply.Description = "server-side apply: the object as its manager wants it (YAML or JSON), with apiVersion, kind and metadata.name"
			rb.Content[mediaApplyPatch] = openapi3.NewMediaType().WithSchema(apply)
		}
	default:
		ref, err := b.schema(op.body)
		if err != nil {
			return nil, err
		}
		rb.WithContent(objectContent(ref))
	}
	return &openapi3.RequestBodyRef{Value: rb}, nil
}

func (b *docBuilder) response(code int, v any) (*openapi3.Response, error) {
	r := openapi3.NewResponse().WithDescription(http.StatusText(code))
	switch v := v.(type) {
	case emptyBody:
	case textStream:
		r.WithContent(openapi3.Content{"text/plain": openapi3.NewMediaType().WithSchema(openapi3.NewStringSchema())})
	case binaryStream:
		r.WithContent(openapi3.Content{"application/octet-stream": openapi3.NewMediaType().WithSchema(openapi3.NewStringSchema().WithFormat("binary"))})
	case openAPIDocument:
		r.WithContent(openapi3.NewContentWithJSONSchema(openapi3.NewObjectSchema()))
	case eitherBody:
		any := &openapi3.Schema{}
		for _, body := range v {
			ref, err := b.schema(body)
			if err != nil {
				return nil, err
			}
			any.AnyOf = append(any.AnyOf, ref)
		}
		r.WithContent(objectContent(&openapi3.SchemaRef{Value: any}))
	case listOf:
		list, events, err := b.listSchemas(v.item)
		if err != nil {
			return nil, err
		}
		content := objectContent(list)
		stream := openapi3.NewArraySchema().WithItems(events.Value)
		stream.Items = events
		stream.Description = "with ?watch=true: server-sent events, each `data:` line one item; " +
			"the `id:` of an event is the resourceVersion to resume after"
		content["text/event-stream"] = openapi3.NewMediaType().WithSchema(stream)
		r.WithContent(content)
	default:
		ref, err := b.schema(v)
		if err != nil {
			return nil, err
		}
		r.WithContent(objectContent(ref))
	}
	return r, nil
}

// objectContent is an object's media types: JSON, or YAML when asked for.
func objectContent(ref *openapi3.SchemaRef) openapi3.Content {
	return openapi3.Content{
		"application/json": openapi3.NewMediaType().WithSchemaRef(ref),
		mediaYAML:          openapi3.NewMediaType().WithSchemaRef(ref),
	}
}

// listSchemas adds <Kind>List and <Kind>WatchEvent for the objects of item.
func (b *docBuilder) listSchemas(item any) (list, event *openapi3.SchemaRef, err error) {
	obj, err := b.schema(item)
	if err != nil {
		return nil, nil, err
	}
	status, err := b.schema(statusBody)
	if err != nil {
		return nil, nil, err
	}
	listMeta, err := b.schema(model.ListMeta{})
	if err != nil {
		return nil, nil, err
	}
	kind := reflect.TypeOf(item).Name()
	schemas := b.doc.Components.Schemas
	if _, ok := schemas[kind+"List"]; !ok {
		items := openapi3.NewArraySchema()
		items.Items = obj
		l := openapi3.NewObjectSchema().
			WithProperty("apiVersion", openapi3.NewStringSchema()).
			WithProperty("kind", openapi3.NewStringSchema()).
			WithPropertyRef("metadata", listMeta).
			WithProperty("items", items).WithoutAdditionalProperties()
		l.Description = "a page of " + kind + " objects; metadata.continue fetches the next"
		schemas[kind+"List"] = &openapi3.SchemaRef{Value: l}

		e := openapi3.NewObjectSchema().
			WithProperty("type", openapi3.NewStringSchema().WithEnum("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")).
			WithPropertyRef("object", &openapi3.SchemaRef{Value: &openapi3.Schema{AnyOf: openapi3.SchemaRefs{obj, status}}}).
			WithoutAdditionalProperties()
		e.Description = "a change to a " + kind + "; a BOOKMARK's object holds only metadata.resourceVersion (and ends a streaming list's initial events); " +
			"an ERROR's object is a Status and ends the stream: " +
			"410 Expired: list again; any other: watch again from the last event's id"
		schemas[kind+"WatchEvent"] = &openapi3.SchemaRef{Value: e}
	}
	return openapi3.NewSchemaRef("#/components/schemas/"+kind+"List", nil),
		openapi3.NewSchemaRef("#/components/schemas/"+kind+"WatchEvent", nil), nil
}

// schema is the schema of v's Go type, kept in the components.
func (b *docBuilder) schema(v any) (*openapi3.SchemaRef, error) {
	ref, err := b.gen.NewSchemaRefForValue(v, b.doc.Components.Schemas)
	if err != nil {
		return nil, err
	}
	if ref.Ref == "" {
		return nil, fmt.Errorf("%T has no schema of its own", v)
	}
	return openapi3.NewSchemaRef(ref.Ref, nil), nil
}

// listMapKeys are the keys of the lists whose items Kubernetes merges by
// a field (x-kubernetes-list-type map), by the type of their items.
var listMapKeys = map[reflect.Type]string{
	reflect.TypeFor[model.Container]():            "name",
	reflect.TypeFor[model.EnvVar]():               "name",
	reflect.TypeFor[model.ContainerPort]():        "containerPort",
	reflect.TypeFor[model.ServicePort]():          "port",
	reflect.TypeFor[model.Volume]():               "name",
	reflect.TypeFor[model.VolumeMount]():          "mountPath",
	reflect.TypeFor[model.LocalObjectReference](): "name",
	reflect.TypeFor[model.OwnerReference]():       "uid",
}

var (
	intOrStringType  = reflect.TypeFor[model.IntOrString]()
	resourceListType = reflect.TypeFor[model.ResourceList]()
	timeType         = reflect.TypeFor[time.Time]()
)

func intOrStringSchema() *openapi3.Schema {
	return &openapi3.Schema{Description: "a port number or a port's name", Extensions: map[string]any{"x-kubernetes-int-or-string": true},
		AnyOf: openapi3.SchemaRefs{{Value: openapi3.NewInt32Schema()}, {Value: openapi3.NewStringSchema()}}}
}

// newSchemaGenerator derives schemas from Go types as encoding/json
// writes them: every exported field, null for a nil slice or map that is
// not omitempty, and no properties beyond the type's (the API refuses
// unknown fields). It records the schema of every struct in structs, and
// its type in types.
func newSchemaGenerator(structs map[string]*openapi3.Schema, types map[string]reflect.Type) *openapi3gen.Generator {
	return openapi3gen.NewGenerator(
		openapi3gen.UseAllExportedFields(),
		openapi3gen.CreateComponentSchemas(openapi3gen.ExportComponentSchemasOptions{ExportComponentSchemas: true, ExportTopLevelSchema: true}),
		openapi3gen.CreateTypeNameGenerator(schemaName),
		openapi3gen.SchemaCustomizer(func(_ string, t reflect.Type, tag reflect.StructTag, s *openapi3.Schema) error {
			jsonTag := tag.Get("json")
			switch {
			case t == intOrStringType:
				*s = *intOrStringSchema()
			case t == resourceListType:
				// A quantity is a string, or a number as Kubernetes takes it.
				s.AdditionalProperties = openapi3.AdditionalProperties{Schema: &openapi3.SchemaRef{Value: &openapi3.Schema{
					AnyOf: openapi3.SchemaRefs{{Value: openapi3.NewStringSchema()}, {Value: openapi3.NewFloat64Schema()}}}}}
				if jsonTag != "" && !strings.Contains(jsonTag, ",omitempty") {
					s.Nullable = true
				}
			case (t.Kind() == reflect.Slice || t.Kind() == reflect.Map) && jsonTag != "" && !strings.Contains(jsonTag, ",omitempty"):
				s.Nullable = true
			case t.Kind() == reflect.Struct && s.Type == nil && t != timeType:
				s.Type = &openapi3.Types{"object"} // an empty struct
				s.WithoutAdditionalProperties()
			case t.Kind() == reflect.Struct && s.Properties != nil:
				s.WithoutAdditionalProperties()
			}
			if t.Kind() == reflect.Slice {
				if key, ok := listMapKeys[t.Elem()]; ok {
					// Server-side apply merges these lists by key, as Kubernetes' do.
					s.Extensions = map[string]any{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []string{key}}
				}
			}
			if t.Kind() == reflect.Struct && t.Name() != "" && t != timeType {
				structs[schemaName(t)], types[schemaName(t)] = s, t
			}
			return nil
		}))
}

// schemaName names a type's component: model's types by their names,
// others' qualified by their package's.
func schemaName(t reflect.Type) string {
	if strings.HasSuffix(t.PkgPath(), "/internal/model") {
		return t.Name()
	}
	return path.Base(t.PkgPath()) + "." + t.Name()
}
