package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/zonewright/zonewright/api"
)

// validatedResponses counts the responses checked against the document;
// answeredOperations holds the operations ("GET /path/{x}") they answered.
var (
	validatedResponses atomic.Int64
	answeredOperations sync.Map
	validationTime     atomic.Int64 // nanoseconds
)

// openAPICoverage says how much of the document the suite exercised.
func openAPICoverage() string {
	answered, total := 0, 0
	answeredOperations.Range(func(any, any) bool { answered++; return true })
	if openAPI.doc != nil {
		for _, item := range openAPI.doc.Paths.Map() {
			total += len(item.Operations())
		}
	}
	return fmt.Sprintf("%d responses validated against the OpenAPI document in %v, answering %d of its %d operations",
		validatedResponses.Load(), time.Duration(validationTime.Load()).Round(time.Millisecond), answered, total)
}

// openAPI is the served document, loaded once for the whole suite.
var openAPI struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

func openAPIRouter(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	openAPI.once.Do(func() {
		if openAPI.doc, openAPI.err = openapi3.NewLoader().LoadFromData(api.OpenAPIDocument()); openAPI.err != nil {
			return
		}
		openAPI.router, openAPI.err = legacy.NewRouter(openAPI.doc)
		// kin-openapi compiles a JSON Schema 2020-12 validator for every
		// response of a 3.1 document, then drops it for schemas with $refs
		// and no 2020-12 keywords (all of ours) and validates as for 3.0,
		// where "null" among the types is honoured too. Validating as 3.0
		// skips the wasted compile: 1 ms a response, 6% of the suite.
		openAPI.doc.OpenAPI = "3.0.3"
		openapi3filter.RegisterBodyDecoder("text/event-stream", decodeEventStream)
	})
	if openAPI.err != nil {
		t.Fatalf("the OpenAPI document: %v", openAPI.err)
	}
	return openAPI.doc, openAPI.router
}

// validated serves h and checks every response it writes against the
// OpenAPI document: its status is documented for the route, its
// Content-Type is one the document gives, its body fits the schema. A
// response to a path the API has no route for must be a Status. The
// failures are reported when the test ends (after its servers closed).
func validated(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	doc, router := openAPIRouter(t)
	var mu sync.Mutex
	var failures []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range failures {
			t.Errorf("response does not match the OpenAPI document (api/openapi_ops.go, then go generate ./api/): %s", f)
		}
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recordingWriter{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.hijacked {
			return
		}
		start := time.Now()
		err := checkResponse(doc, router, r, rec, func(op string) { answeredOperations.Store(op, true) })
		validationTime.Add(int64(time.Since(start)))
		if err != nil {
			mu.Lock()
			failures = append(failures, fmt.Sprintf("%s %s: %d: %v", r.Method, r.URL.RequestURI(), rec.status(), err))
			mu.Unlock()
		}
		validatedResponses.Add(1)
	})
}

// checkResponse checks rec, the response to r; answered, if given, learns
// the operation of a response that passed.
func checkResponse(doc *openapi3.T, router routers.Router, r *http.Request, rec *recordingWriter, answered func(op string)) error {
	route, params, err := router.FindRoute(r)
	// The router also matches a path one segment short of a route's, with
	// an empty parameter.
	if err == nil && (route.Method != r.Method || strings.Count(route.Path, "/") != strings.Count(r.URL.Path, "/")) {
		err = fmt.Errorf("no %s %s", r.Method, r.URL.Path)
	}
	if err != nil {
		// No such route: a 404 or 405 Status.
		if code := rec.status(); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			return fmt.Errorf("no route in the document (%v), yet not a 404 or 405", err)
		}
		var body any
		if err := json.Unmarshal(rec.body.Bytes(), &body); err != nil {
			return fmt.Errorf("not a JSON Status: %v", err)
		}
		return doc.Components.Schemas["Status"].Value.VisitJSON(body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route},
		Status:                 rec.status(),
		Header:                 rec.Header(),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	in.SetBodyBytes(rec.body.Bytes())
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err
	}
	if answered != nil {
		answered(route.Method + " " + route.Path)
	}
	return nil
}

// decodeEventStream reads a watch's server-sent events as the list of
// their data, for the text/event-stream schema (an array of events). A
// stream cut off mid-event ends at the last whole one.
func decodeEventStream(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	events := []any{}
	blocks := strings.Split(string(b), "\n\n")
	for _, block := range blocks[:len(blocks)-1] {
		sc := bufio.NewScanner(strings.NewReader(block))
		for sc.Scan() {
			line := sc.Text()
			data, ok := strings.CutPrefix(line, "data: ")
			switch {
			case ok:
				var ev any
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return nil, fmt.Errorf("event data %q: %w", data, err)
				}
				events = append(events, ev)
			case strings.HasPrefix(line, ":"), strings.HasPrefix(line, "id: "):
			default:
				return nil, fmt.Errorf("not a server-sent event line: %q", line)
			}
		}
	}
	return events, nil
}

// recordingWriter keeps a copy of what passes through it, and lets the
// handler flush, hijack and set deadlines as on the writer it wraps.
type recordingWriter struct {
	http.ResponseWriter
	code     int
	body     bytes.Buffer
	hijacked bool
}

func (w *recordingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *recordingWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

func (w *recordingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *recordingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// The check fails a response the document does not allow, so the suite's
// passing means something.
func TestOpenAPIValidationRefusesWhatTheDocumentDoesNot(t *testing.T) {
	doc, router := openAPIRouter(t)
	const pod = "/api/v1/namespaces/default/pods/web"
	cases := []struct {
		name, method, path, contentType, body string
		code                                  int
	}{
		{"a field of the wrong type", "GET", pod, "application/json", `{"kind":"Pod","metadata":{"name":1}}`, 200},
		{"a field the type does not have", "GET", pod, "application/json", `{"kind":"Pod","colour":"blue"}`, 200},
		{"an undocumented status", "GET", pod, "application/json", `{}`, http.StatusTeapot},
		{"an undocumented content type", "GET", pod, "text/plain", `hello`, 200},
		{"an error that is not a Status", "GET", pod, "application/json", `{"error":"no"}`, 404},
		{"a watch event of another kind", "GET", "/api/v1/namespaces/default/pods?watch=true", "text/event-stream",
			"data: {\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"spec\":{\"replicas\":\"x\"}}}\n\n", 200},
		{"an unrouted answer that is not a Status", "GET", "/nowhere", "application/json", `{"status":404}`, 404},
	}
	for _, c := range cases {
		rec := &recordingWriter{ResponseWriter: httptest.NewRecorder()}
		rec.Header().Set("Content-Type", c.contentType)
		rec.WriteHeader(c.code)
		_, _ = rec.Write([]byte(c.body))
		if err := checkResponse(doc, router, httptest.NewRequest(c.method, c.path, nil), rec, nil); err == nil {
			t.Errorf("%s: passed the check", c.name)
		}
	}
	// And a response as the API writes it passes.
	rec := &recordingWriter{ResponseWriter: httptest.NewRecorder()}
	rec.Header().Set("Content-Type", "text/event-stream")
	_, _ = rec.Write([]byte("id: 7\ndata: {\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\"}}}\n\n: keepalive\n\n"))
	if err := checkResponse(doc, router, httptest.NewRequest("GET", "/api/v1/pods?watch=true", nil), rec, nil); err != nil {
		t.Errorf("a watch event as the API writes it: %v", err)
	}
}

// Every operation of the document answers one request, as a cluster
// admin, with a response the document allows: what the rest of the suite
// does not reach is reached here, on objects named x where the seed made
// them (a job, a deployment) and on refusals elsewhere (a snapshot needs a
// claim that holds data). Deletes go last.
func TestEveryOperationAnswersAsDocumented(t *testing.T) {
	c := newAPI(t)
	for _, seed := range []struct{ path, body string }{
		{"/apis/batch/v1/namespaces/default/jobs", `{"metadata":{"name":"x"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"omnios","command":["true"]}]}}}}`},
		{"/apis/apps/v1/namespaces/default/deployments", `{"metadata":{"name":"x"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"x"}},
		  "template":{"metadata":{"labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"omnios","command":["c"]}]}}}}`},
	} {
		if r := c.json("POST", seed.path, seed.body); r.code != http.StatusCreated {
			t.Fatalf("seed %s: %d %s", seed.path, r.code, r.body)
		}
	}
	doc, _ := openAPIRouter(t)
	type request struct {
		method, path string
		op           *openapi3.Operation
	}
	var requests []request
	for _, p := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(p).Operations() {
			path := strings.NewReplacer("{ns}", "default", "{name}", "x").Replace(p)
			if method == http.MethodDelete && path == "/api/v1/namespaces/default" {
				path = "/api/v1/namespaces/x" // the other requests need the namespace
			}
			requests = append(requests, request{method, path, op})
		}
	}
	sort.SliceStable(requests, func(i, j int) bool {
		return requests[i].method != http.MethodDelete && requests[j].method == http.MethodDelete
	})
	for _, rq := range requests {
		var contentType string
		var body []byte
		if rb := rq.op.RequestBody; rb != nil {
			switch {
			case rb.Value.Content.Get("application/json") != nil:
				contentType, body = "application/json", []byte(`{}`)
			case rb.Value.Content.Get("application/merge-patch+json") != nil:
				contentType, body = "application/merge-patch+json", []byte(`{}`)
			default:
				contentType, body = "application/octet-stream", []byte("stream")
			}
		}
		r := c.do(rq.method, rq.path, contentType, body)
		if r.code >= 500 && r.code != http.StatusServiceUnavailable {
			t.Errorf("%s %s: %d %s", rq.method, rq.path, r.code, r.body)
		}
	}
}
