package api_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// hostileCount counts the hostile requests these tests send, by code, for
// `go test -v` to show.
type hostileCount struct {
	mu     sync.Mutex
	byCode map[int]int
}

func (h *hostileCount) add(code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byCode == nil {
		h.byCode = map[int]int{}
	}
	h.byCode[code]++
}

func (h *hostileCount) report(t *testing.T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for _, n := range h.byCode {
		total += n
	}
	t.Logf("%d hostile requests, by status code: %v", total, h.byCode)
}

// hostile sends a request and checks its Status: the code, and the field a
// 422 names.
func hostile(t *testing.T, c *client, count *hostileCount, method, path, ctype, body string, code int, field string) {
	t.Helper()
	r := c.do(method, path, ctype, []byte(body))
	count.add(r.code)
	st := r.status()
	if r.code != code || st.Code != code || st.Kind != "Status" || st.Message == "" {
		t.Fatalf("%s %.200s: got %d %.300s, want %d", method, path, r.code, r.body, code)
	}
	if field == "" {
		return
	}
	for _, cause := range st.Details.Causes {
		if cause.Field == field {
			return
		}
	}
	t.Fatalf("%s %s: no cause names field %s: %s", method, path, field, r.body)
}

// listPaths are collections whose lists and watches take selectors,
// limits, continue tokens and resource versions.
var listPaths = []string{
	"/api/v1/namespaces", "/api/v1/nodes", "/api/v1/images",
	"/api/v1/pods", "/api/v1/namespaces/default/pods",
	"/api/v1/namespaces/default/services", "/api/v1/namespaces/default/endpoints",
	"/api/v1/namespaces/default/events", "/api/v1/namespaces/default/persistentvolumeclaims",
	"/apis/apps/v1/namespaces/default/deployments", "/apis/batch/v1/namespaces/default/jobs",
}

func continueToken(ns, name string) string {
	b, _ := json.Marshal(struct {
		NS string `json:"ns"`
		N  string `json:"n"`
	}{ns, name})
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestHostileQueriesAreBadRequests(t *testing.T) {
	c := newAPI(t)
	var count hostileCount
	t.Cleanup(func() { count.report(t) })
	terms := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("k%d=v", i)
		}
		return strings.Join(parts, ",")
	}
	names := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = "metadata.name=x"
		}
		return strings.Join(parts, ",")
	}
	for _, base := range listPaths {
		for _, q := range []string{
			"labelSelector=app%3D%00", "labelSelector=app%3D%FF", "labelSelector=%00app",
			"fieldSelector=metadata.name%3D%00", "fieldSelector=metadata.name%3D%C3%28",
			"continue=%00", "continue=" + continueToken("\x00", "x"), "continue=" + continueToken("default", "a\x00b"),
			"continue=" + base64.RawURLEncoding.EncodeToString([]byte("{\"ns\":\"default\",\"n\":\"a\xffb\"}")),
			"limit=1&continue=" + continueToken("\x00", "x"),
			"labelSelector=" + terms(70000), "labelSelector=" + terms(store.MaxSelectorTerms+1),
			"fieldSelector=" + names(store.MaxSelectorTerms+1),
			"labelSelector=a%3D" + strings.Repeat("b", store.MaxSelectorBytes),
			"limit=99999999999999999999", "limit=-9223372036854775808", "limit=1e3",
			"resourceVersion=-1", "resourceVersion=99999999999999999999", "resourceVersion=%00",
			"watch=true&resourceVersion=x1", "watch=true&labelSelector=" + terms(store.MaxSelectorTerms+1),
			"watch=true&fieldSelector=metadata.name%3D%00", "%00=1",
		} {
			hostile(t, c, &count, "GET", base+"?"+q, "", "", http.StatusBadRequest, "")
		}
		// Within the bounds, the same shapes are answered.
		for _, q := range []string{"labelSelector=" + terms(store.MaxSelectorTerms), "limit=9223372036854775807", "limit=" + strconv.Itoa(api.MaxListLimit+1)} {
			if r := c.do("GET", base+"?"+q, "", nil); r.code != http.StatusOK {
				t.Fatalf("GET %.100s?%.100s: %d %s", base, q, r.code, r.body)
			}
		}
	}
}

func TestHostilePathsAreBadRequests(t *testing.T) {
	c := newAPI(t)
	var count hostileCount
	t.Cleanup(func() { count.report(t) })
	for _, seg := range []string{"%00", "a%00b", "%FF", "%C3%28", "%ED%A0%80", "x%F0%28%8C%BC"} {
		for _, rt := range []struct{ method, path string }{
			{"GET", "/api/v1/namespaces/" + seg},
			{"DELETE", "/api/v1/namespaces/" + seg},
			{"GET", "/api/v1/namespaces/" + seg + "/pods"},
			{"GET", "/api/v1/namespaces/" + seg + "/pods/web"},
			{"GET", "/api/v1/namespaces/default/pods/" + seg},
			{"DELETE", "/api/v1/namespaces/default/pods/" + seg},
			{"POST", "/api/v1/namespaces/default/pods/" + seg + "/finalize"},
			{"GET", "/api/v1/namespaces/default/pods/" + seg + "/log"},
			{"GET", "/api/v1/nodes/" + seg},
			{"GET", "/api/v1/nodes/" + seg + "/lease"},
			{"GET", "/api/v1/images/" + seg},
			{"GET", "/api/v1/namespaces/default/services/" + seg},
			{"GET", "/api/v1/namespaces/default/secrets/" + seg},
			{"DELETE", "/api/v1/tokens/" + seg},
			{"GET", "/apis/apps/v1/namespaces/" + seg + "/deployments"},
			{"GET", "/apis/batch/v1/namespaces/default/jobs/" + seg},
		} {
			hostile(t, c, &count, rt.method, rt.path, "", "", http.StatusBadRequest, "")
		}
	}
}

// Integer parameters are bounded, so no arithmetic on them overflows.
func TestHostileIntegersAreBadRequests(t *testing.T) {
	c := newAPI(t)
	var count hostileCount
	t.Cleanup(func() { count.report(t) })
	if r := c.json("POST", "/api/v1/namespaces/default/pods", fmt.Sprintf(podJSON, "web")); r.code != http.StatusCreated {
		t.Fatalf("create pod: %d %s", r.code, r.body)
	}
	// Not an integer: 400; an integer out of bounds: 422 naming the parameter.
	for g, want := range map[string]int{"9223372036854775807": http.StatusUnprocessableEntity, "86401": http.StatusUnprocessableEntity,
		"-1": http.StatusUnprocessableEntity, "9223372036854775808": http.StatusBadRequest, "1e3": http.StatusBadRequest, "%00": http.StatusBadRequest} {
		hostile(t, c, &count, "DELETE", "/api/v1/namespaces/default/pods/web?gracePeriodSeconds="+g, "", "", want, "")
	}
	sc, _ := newServiceAPI(t)
	for _, ts := range []string{"9223372036854775807", "9223372037", "0", "31"} {
		hostile(t, sc, &count, "GET", "/api/v1/servicenet?after=0&timeoutSeconds="+ts, "", "", http.StatusBadRequest, "")
	}
	hostile(t, sc, &count, "GET", "/api/v1/servicenet?after=9223372036854775808", "", "", http.StatusBadRequest, "")
	for _, g := range []string{"9223372036854775807", "86401", "-1"} {
		body := `{"metadata":{"name":"g"},"spec":{"terminationGracePeriodSeconds":` + g + `,"containers":[{"name":"a","image":"i","command":["c"]}]}}`
		hostile(t, c, &count, "POST", "/api/v1/namespaces/default/pods", "application/json", body, http.StatusUnprocessableEntity, "spec.terminationGracePeriodSeconds")
	}
}

// createPaths take a new object's body.
var createPaths = []string{
	"/api/v1/namespaces", "/api/v1/nodes", "/api/v1/images",
	"/api/v1/namespaces/default/pods", "/api/v1/namespaces/default/services",
	"/api/v1/namespaces/default/persistentvolumeclaims",
	"/apis/apps/v1/namespaces/default/deployments", "/apis/batch/v1/namespaces/default/jobs",
}

func TestHostileBodiesAreRefused(t *testing.T) {
	c := newAPI(t)
	var count hostileCount
	t.Cleanup(func() { count.report(t) })
	for _, path := range createPaths {
		for _, tc := range []struct {
			ctype, body string
			code        int
			field       string
		}{
			{"application/json", `{"metadata":{"name":"x\u0000"}}`, 422, "metadata.name"},
			{"application/json", `{"metadata":{"name":"x","labels":{"app":"a\u0000"}}}`, 422, "metadata.labels[app]"},
			{"application/json", `{"metadata":{"name":"x","annotations":{"a\u0000":"b"}}}`, 422, "metadata.annotations"},
			{"application/json", "{\"metadata\":{\"name\":\"x\xff\"}}", 400, ""},
			{"application/json", "{\"metadata\":{\"name\":\"x\x00\"}}", 400, ""},
			{"application/yaml", "metadata:\n  name: \"x\\0\"\n", 422, "metadata.name"},
			{"application/yaml", "metadata:\n  name: x\xfe\n", 400, ""},
			{"application/json", `{"Metadata":{"NAME":"x"}}`, 400, ""},
			{"application/json", `{"metadata":{"NAME":"x"}}`, 400, ""},
			{"application/json", `{"metadata":{"name":"x","Labels":{"a":"b"}}}`, 400, ""},
			{"application/json", `{"metadata":{"name":"x"},"Spec":{}}`, 400, ""},
			{"application/json", `{"KIND":"Pod","metadata":{"name":"x"}}`, 400, ""},
			{"application/yaml", "Metadata:\n  name: x\n", 400, ""},
		} {
			hostile(t, c, &count, "POST", path, tc.ctype, tc.body, tc.code, tc.field)
		}
	}
	// Deeper in a pod: a container's field and a list's element.
	for _, tc := range []struct {
		body  string
		code  int
		field string
	}{
		{`{"metadata":{"name":"x"},"spec":{"containers":[{"name":"a","image":"i","Command":["c"]}]}}`, 400, ""},
		{`{"metadata":{"name":"x"},"spec":{"Containers":[{"name":"a","image":"i","command":["c"]}]}}`, 400, ""},
		{`{"metadata":{"name":"x"},"spec":{"containers":[{"name":"a","image":"i","command":["c","\u0000"]}]}}`, 422, "spec.containers[0].command[1]"},
		{`{"metadata":{"name":"x"},"spec":{"containers":[{"name":"a","image":"i","command":["c"],"env":[{"name":"E","value":"\u0000"}]}]}}`, 422, "spec.containers[0].env[0].value"},
	} {
		hostile(t, c, &count, "POST", "/api/v1/namespaces/default/pods", "application/json", tc.body, tc.code, tc.field)
	}
	// The keys' exact spelling is still accepted; patches are checked as
	// bodies.
	if r := c.json("POST", "/api/v1/nodes", `{"metadata":{"name":"n1"}}`); r.code != http.StatusCreated {
		t.Fatalf("create node: %d %s", r.code, r.body)
	}
	for _, tc := range []struct {
		body  string
		code  int
		field string
	}{
		{`{"Metadata":{"labels":{"a":"b"}}}`, 400, ""},
		{`{"metadata":{"Labels":{"a":"b"}}}`, 400, ""},
		{`{"metadata":{"labels":{"a":"\u0000"}}}`, 422, "metadata.labels[a]"},
		{"{\"metadata\":{\"labels\":{\"a\":\"\xff\"}}}", 400, ""},
	} {
		hostile(t, c, &count, "PATCH", "/api/v1/nodes/n1", "application/merge-patch+json", tc.body, tc.code, tc.field)
	}
	if r := c.do("PATCH", "/api/v1/nodes/n1", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"a":"b"}}}`)); r.code != http.StatusOK {
		t.Fatalf("patch with exact keys: %d %s", r.code, r.body)
	}
}

// A bad parameter of a list or a watch is a 400 at once, before any wait
// for a resourceVersion the store has not reached: the wait would end in
// a 504 that hides what is wrong with the request.
func TestBadListParametersAreRefusedBeforeTheResourceVersionWait(t *testing.T) {
	c := newAPI(t)
	var count hostileCount
	t.Cleanup(func() { count.report(t) })
	const future = "999999999999"
	bad := []struct{ name, query, want string }{
		{"a label selector", "labelSelector=" + url.QueryEscape("app in (a"), "labelSelector"},
		{"a field selector naming no field", "fieldSelector=" + url.QueryEscape("spec.nothing=x"), "field label"},
		{"a field selector without a value", "fieldSelector=status", "fieldSelector"},
		{"a continue token", "continue=bm9wZQ", "continue token"},
		{"a limit", "limit=-1", "limit"},
	}
	collections := []string{"/api/v1/namespaces/default/pods", "/api/v1/nodes", "/api/v1/images", "/api/v1/services",
		"/apis/apps/v1/namespaces/default/deployments", "/apis/batch/v1/jobs", "/api/v1/namespaces/default/events",
		"/api/v1/persistentvolumeclaims", "/api/v1/namespaces/default/secrets"}
	type request struct{ path, lastEventID, want string }
	var requests []request
	for _, coll := range collections {
		for _, b := range bad {
			requests = append(requests, request{coll + "?resourceVersion=" + future + "&" + b.query, "", b.want})
			if b.name != "a limit" && b.name != "a continue token" { // a watch has neither
				requests = append(requests,
					request{coll + "?watch=true&resourceVersion=" + future + "&" + b.query, "", b.want},
					request{coll + "?watch=1&" + b.query, future, b.want})
			}
		}
	}
	var wg sync.WaitGroup
	for _, rq := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", c.base+rq.path, nil)
			if rq.lastEventID != "" {
				req.Header.Set("Last-Event-ID", rq.lastEventID)
			}
			resp, err := c.http.Do(req)
			if err != nil {
				t.Errorf("%s: %v", rq.path, err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var st model.Status
			_ = json.Unmarshal(b, &st)
			count.add(resp.StatusCode)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(st.Message, rq.want) {
				t.Errorf("%s (Last-Event-ID %q): %d %s; want 400 naming %s", rq.path, rq.lastEventID, resp.StatusCode, b, rq.want)
			}
		}()
	}
	wg.Wait()
}

// A resourceVersion the store has not reached is waited for, as
// Kubernetes waits, and then refused with its 504 rather than a watch that
// silently skips every change up to it.
func TestResourceVersionFromTheFuture(t *testing.T) {
	c := newAPI(t)
	var count hostileCount
	t.Cleanup(func() { count.report(t) })
	list := c.do("GET", "/api/v1/namespaces/default/pods", "", nil)
	var l struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(list.body, &l); err != nil || list.code != http.StatusOK {
		t.Fatalf("list: %d %s", list.code, list.body)
	}
	now, _ := strconv.ParseInt(l.Metadata.ResourceVersion, 10, 64)
	future := strconv.FormatInt(now+1000, 10)

	// The three waits run together.
	type answer struct {
		code int
		st   model.Status
	}
	requests := []struct{ path, lastEventID string }{
		{"/api/v1/namespaces/default/pods?watch=true&resourceVersion=" + future, ""},
		{"/api/v1/namespaces/default/pods?watch=true", future},
		{"/api/v1/namespaces/default/pods?resourceVersion=" + future, ""},
	}
	answers := make([]answer, len(requests))
	var wg sync.WaitGroup
	for i, rq := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", c.base+rq.path, nil)
			if rq.lastEventID != "" {
				req.Header.Set("Last-Event-ID", rq.lastEventID)
			}
			resp, err := c.http.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers[i].code = resp.StatusCode
			_ = json.Unmarshal(b, &answers[i].st)
		}()
	}
	wg.Wait()
	for i, a := range answers {
		count.add(a.code)
		if a.code != http.StatusGatewayTimeout || a.st.Reason != "Timeout" || a.st.Details == nil ||
			len(a.st.Details.Causes) != 1 || a.st.Details.Causes[0].Type != "ResourceVersionTooLarge" {
			t.Errorf("%s (Last-Event-ID %q): got %d %+v, want 504 Timeout ResourceVersionTooLarge", requests[i].path, requests[i].lastEventID, a.code, a.st)
		}
	}

	// A version the store reaches while the request waits is served.
	if r := c.do("GET", "/api/v1/namespaces/default/pods?resourceVersion="+l.Metadata.ResourceVersion, "", nil); r.code != http.StatusOK {
		t.Fatalf("list at the current version: %d %s", r.code, r.body)
	}
	events := make(chan *sse, 1)
	go func() {
		req, _ := http.NewRequest("GET", c.base+"/api/v1/namespaces/default/pods?watch=true&resourceVersion="+strconv.FormatInt(now+1, 10), nil)
		resp, err := c.http.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			events <- nil
			return
		}
		t.Cleanup(func() { resp.Body.Close() })
		events <- &sse{resp: resp, sc: bufio.NewScanner(resp.Body)}
	}()
	time.Sleep(300 * time.Millisecond)
	for _, name := range []string{"a", "b"} {
		if r := c.json("POST", "/api/v1/namespaces/default/pods", fmt.Sprintf(podJSON, name)); r.code != http.StatusCreated {
			t.Fatalf("create pod %s: %d %s", name, r.code, r.body)
		}
	}
	w := <-events
	if w == nil {
		t.Fatal("the watch from a version reached while it waited was refused")
	}
	if ev := w.next(t); ev.Type != "ADDED" || ev.Object.Metadata.Name != "b" {
		t.Fatalf("first event %s %s, want ADDED b (the watch starts after a's version)", ev.Type, ev.Object.Metadata.Name)
	}
}

// What the server refuses before any handler: a request line or header
// over net/http's limit (1 MiB here, 64 KiB as the control plane serves),
// and a path of 10,000 segments.
func TestOversizedRequestsAre4xx(t *testing.T) {
	c := newAPI(t)
	var count hostileCount
	t.Cleanup(func() { count.report(t) })
	send := func(path string, header string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", c.base+path, nil)
		if header != "" {
			req.Header.Set("X-Filler", header)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		count.add(resp.StatusCode)
		return resp.StatusCode
	}
	big := strings.Repeat("a", 2<<20)
	if code := send("/api/v1/pods?labelSelector="+big, ""); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("2 MiB query: %d, want 431", code)
	}
	if code := send("/api/v1/pods", big); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("2 MiB header: %d, want 431", code)
	}
	if code := send("/api/v1/pods?labelSelector="+big[:1<<20-1024], ""); code != http.StatusBadRequest {
		t.Errorf("1 MiB selector: %d, want 400", code)
	}
	if code := send("/api/v1/pods?labelSelector="+strings.Repeat("a", 60<<10), ""); code != http.StatusBadRequest {
		t.Errorf("60 KiB selector: %d, want 400", code)
	}
	if code := send(strings.Repeat("/a", 10000), ""); code != http.StatusNotFound {
		t.Errorf("10,000 segments: %d, want 404", code)
	}
	if code := send("/api/v1/namespaces/default/pods"+strings.Repeat("/a", 10000), ""); code != http.StatusNotFound {
		t.Errorf("10,000 segments under a route: %d, want 404", code)
	}
}

// A bearer token is the client's text too: one that is not UTF-8 is
// refused as any unknown token is.
func TestBadTokenTextIsUnauthenticated(t *testing.T) {
	c := newAPI(t)
	for _, tok := range []string{auth.TokenPrefix + "\xff_secret", auth.TokenPrefix + "id\xc3\x28_secret"} {
		req, _ := http.NewRequest("GET", c.base+"/api/v1/pods", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: %d, want 401", tok, resp.StatusCode)
		}
	}
}

// Every route of the document, each of its path parameters in turn
// replaced by text PostgreSQL cannot hold, and every route with such a
// query: 400, whatever the route does.
func TestEveryRouteRefusesUnstorableText(t *testing.T) {
	c := newAPI(t)
	var count hostileCount
	t.Cleanup(func() { count.report(t) })
	var doc struct {
		Paths map[string]map[string]json.RawMessage
	}
	if err := json.Unmarshal(api.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	routes := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			method = strings.ToUpper(method)
			if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, method) {
				continue
			}
			routes++
			plain := param.ReplaceAllString(path, "x")
			hostile(t, c, &count, method, plain+"?q=%00", "", "", http.StatusBadRequest, "")
			hostile(t, c, &count, method, plain+"?q=%FF", "", "", http.StatusBadRequest, "")
			params := param.FindAllStringIndex(path, -1)
			for i := range params {
				for _, seg := range []string{"%00", "a%00", "%FF", "%C3%28"} {
					n := 0
					p := param.ReplaceAllStringFunc(path, func(string) string {
						n++
						if n-1 == i {
							return seg
						}
						return "x"
					})
					hostile(t, c, &count, method, p, "", "", http.StatusBadRequest, "")
				}
			}
		}
	}
	if routes < 50 {
		t.Fatalf("only %d routes in the document", routes)
	}
}

// Every route that takes a body, sent bodies encoding/json would bend:
// a key that matches a field only without regard to case, a NUL, bytes
// that are not UTF-8. Some routes refuse them for their path first (404);
// none answers with a 5xx or takes the body.
func TestEveryBodyRouteRefusesBentBodies(t *testing.T) {
	c := newAPI(t)
	var count hostileCount
	t.Cleanup(func() { count.report(t) })
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody *json.RawMessage `json:"requestBody"`
		}
	}
	if err := json.Unmarshal(api.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if op.RequestBody == nil {
				continue
			}
			method = strings.ToUpper(method)
			ctype := "application/json"
			if method == "PATCH" {
				ctype = "application/merge-patch+json"
			}
			p := param.ReplaceAllString(path, "x")
			for _, body := range []string{`{"Metadata":{"name":"x"}}`, `{"metadata":{"name":"x\u0000"}}`, "{\"metadata\":{\"name\":\"x\xff\"}}"} {
				r := c.do(method, p, ctype, []byte(body))
				count.add(r.code)
				if r.code < 400 || r.code >= 500 {
					t.Errorf("%s %s %s: %d %.200s", method, p, body, r.code, r.body)
				}
			}
		}
	}
}
