package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
)

// newSecretsAPI serves the API with an encryption key; callers sending
// the header X-Test-Viewer may not see secrets' values.
func newSecretsAPI(t *testing.T) *client {
	t.Helper()
	key, err := encryption.NewKey(bytes.Repeat([]byte{3}, encryption.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return serveConfig(t, pgtest.NewDatabase(t), api.Config{ImageMap: &imagemap.Map{}, EncryptionKey: key,
		MaySeeSecretValues: func(c *gin.Context) bool { return c.GetHeader("X-Test-Viewer") == "" },
		// The node's identity comes from its certificate (the authorisation
		// matrix); here a header stands in for it, behind the admin token.
		RequestingNode: func(c *gin.Context) (string, bool) { n := c.GetHeader(testNodeHeader); return n, n != "" }})
}

func (c *client) withHeaders(method, path string, body []byte, headers map[string]string) response {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return response{resp.StatusCode, b.Bytes()}
}

func TestSecretsKeepStringDataWriteOnlyAndRedactForViewers(t *testing.T) {
	c := newSecretsAPI(t)
	r := c.json("POST", "/api/v1/namespaces/default/secrets",
		`{"metadata":{"name":"db"},"stringData":{"password":"s3cret"},"data":{"user":"`+base64.StdEncoding.EncodeToString([]byte("admin"))+`"}}`)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var sec model.Secret
	if err := json.Unmarshal(r.body, &sec); err != nil {
		t.Fatal(err)
	}
	if sec.Type != model.SecretTypeOpaque || string(sec.Data["password"]) != "s3cret" || string(sec.Data["user"]) != "admin" || sec.StringData != nil {
		t.Fatalf("created secret: %s", r.body)
	}
	if strings.Contains(string(r.body), "stringData") {
		t.Errorf("stringData came back: %s", r.body)
	}

	viewer := map[string]string{"X-Test-Viewer": "1"}
	for _, path := range []string{"/api/v1/namespaces/default/secrets/db", "/api/v1/namespaces/default/secrets", "/api/v1/secrets"} {
		r := c.withHeaders("GET", path, nil, viewer)
		if r.code != 200 || strings.Contains(string(r.body), base64.StdEncoding.EncodeToString([]byte("s3cret"))) || !strings.Contains(string(r.body), `"password"`) {
			t.Errorf("viewer GET %s: %d %s (want the keys without values)", path, r.code, r.body)
		}
	}
	if r := c.json("GET", "/api/v1/namespaces/default/secrets/db", nil); !strings.Contains(string(r.body), base64.StdEncoding.EncodeToString([]byte("s3cret"))) {
		t.Errorf("a caller who may see values does not: %s", r.body)
	}

	// A viewer's watch gets the secret, without its values.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/namespaces/default/secrets?watch=true&resourceVersion="+sec.Metadata.ResourceVersion, nil)
	req.Header.Set("X-Test-Viewer", "1")
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sec.Data["password"] = []byte("n3w-value")
	if r := c.json("PUT", "/api/v1/namespaces/default/secrets/db", sec); r.code != 200 {
		t.Fatalf("update: %d %s", r.code, r.body)
	}
	sc := bufio.NewScanner(resp.Body)
	var event string
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			event = sc.Text()
			break
		}
	}
	if !strings.Contains(event, `"MODIFIED"`) || !strings.Contains(event, `"password"`) ||
		strings.Contains(event, base64.StdEncoding.EncodeToString([]byte("n3w-value"))) || strings.Contains(event, "zw1:") {
		t.Errorf("viewer's watch event: %s", event)
	}

	immutable := `{"metadata":{"name":"fixed"},"immutable":true,"stringData":{"k":"v"}}`
	if r := c.json("POST", "/api/v1/namespaces/default/secrets", immutable); r.code != 201 {
		t.Fatalf("create immutable: %d %s", r.code, r.body)
	}
	var fixed model.Secret
	_ = json.Unmarshal(c.json("GET", "/api/v1/namespaces/default/secrets/fixed", nil).body, &fixed)
	fixed.Data["k"] = []byte("other")
	if r := c.json("PUT", "/api/v1/namespaces/default/secrets/fixed", fixed); r.code != 422 || !hasCause(r, "data") {
		t.Errorf("changing an immutable secret: %d %s", r.code, r.body)
	}
	if r := c.json("DELETE", "/api/v1/namespaces/default/secrets/fixed", nil); r.code != 200 {
		t.Errorf("delete: %d %s", r.code, r.body)
	}
}

func hasCause(r response, field string) bool {
	st := r.status()
	if st.Details == nil {
		return false
	}
	for _, c := range st.Details.Causes {
		if c.Field == field {
			return true
		}
	}
	return false
}

func TestInvalidSecretsAndSecretRefsAre422WithTheirFields(t *testing.T) {
	c := newSecretsAPI(t)
	big := strings.Repeat("x", model.MaxSecretBytes)
	for _, tc := range []struct {
		name, path, body, field string
	}{
		{"bad key", "/api/v1/namespaces/default/secrets", `{"metadata":{"name":"s"},"stringData":{"a/b":"v"}}`, "data[a/b]"},
		{"too large", "/api/v1/namespaces/default/secrets", `{"metadata":{"name":"s"},"stringData":{"a":"` + big[:model.MaxSecretBytes/2] + `","b":"` + big[:model.MaxSecretBytes/2+1] + `"}}`, "data"},
		{"value and valueFrom", "/api/v1/namespaces/default/pods",
			`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i","command":["c"],"env":[{"name":"X","value":"v","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}}]}]}}`,
			"spec.containers[0].env[0].valueFrom"},
		{"empty valueFrom", "/api/v1/namespaces/default/pods",
			`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i","command":["c"],"env":[{"name":"X","valueFrom":{}}]}]}}`,
			"spec.containers[0].env[0].valueFrom"},
		{"bad secret name", "/api/v1/namespaces/default/pods",
			`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i","command":["c"],"env":[{"name":"X","valueFrom":{"secretKeyRef":{"name":"Bad_Name","key":"k"}}}]}]}}`,
			"spec.containers[0].env[0].valueFrom.secretKeyRef.name"},
		{"missing key", "/api/v1/namespaces/default/pods",
			`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"i","command":["c"],"env":[{"name":"X","valueFrom":{"secretKeyRef":{"name":"s"}}}]}]}}`,
			"spec.containers[0].env[0].valueFrom.secretKeyRef.key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.json("POST", tc.path, tc.body)
			if r.code != 422 || !hasCause(r, tc.field) {
				t.Fatalf("got %d %.300s, want 422 naming %s", r.code, r.body, tc.field)
			}
		})
	}
}

func TestSecretEnvAnswersOnlyThePodsNode(t *testing.T) {
	c := newSecretsAPI(t)
	if r := c.json("POST", "/api/v1/namespaces/default/secrets", `{"metadata":{"name":"db"},"stringData":{"password":"s3cret"}}`); r.code != 201 {
		t.Fatalf("create secret: %d %s", r.code, r.body)
	}
	pod := `{"metadata":{"name":"p"},"spec":{"nodeName":"n1","containers":[{"name":"a","image":"i","command":["c"],"env":[
	  {"name":"PASSWORD","valueFrom":{"secretKeyRef":{"name":"db","key":"password"}}},
	  {"name":"OPT","valueFrom":{"secretKeyRef":{"name":"nope","key":"k","optional":true}}},
	  {"name":"MISSING","valueFrom":{"secretKeyRef":{"name":"db","key":"nokey"}}}]}]}}`
	if r := c.json("POST", "/api/v1/namespaces/default/pods", pod); r.code != 201 {
		t.Fatalf("create pod: %d %s", r.code, r.body)
	}
	const path = "/api/v1/namespaces/default/pods/p/secretenv"
	if r := c.json("GET", path, nil); r.code != 403 {
		t.Errorf("without a node: %d %s", r.code, r.body)
	}
	if r := c.withHeaders("GET", path, nil, map[string]string{testNodeHeader: "n2"}); r.code != 403 || strings.Contains(string(r.body), "s3cret") {
		t.Errorf("another node: %d %s", r.code, r.body)
	}
	r := c.withHeaders("GET", path, nil, map[string]string{testNodeHeader: "n1"})
	var env model.PodSecretEnv
	if err := json.Unmarshal(r.body, &env); err != nil || r.code != 200 {
		t.Fatalf("the pod's node: %d %s", r.code, r.body)
	}
	if len(env.Containers) != 1 || len(env.Containers[0].Env) != 1 || env.Containers[0].Env[0] != (model.SecretValue{Name: "PASSWORD", Value: "s3cret"}) {
		t.Errorf("values: %+v", env.Containers)
	}
	if len(env.Missing) != 1 || env.Missing[0].Name != "MISSING" || !strings.Contains(env.Missing[0].Message, "couldn't find key nokey") {
		t.Errorf("missing: %+v", env.Missing)
	}
}

func TestBodiesMustBeJSONOrYAMLAndWritesComeFromOurOrigin(t *testing.T) {
	c := newAPI(t)
	pod := []byte(`{"metadata":{"name":"web"},"spec":{"containers":[{"name":"a","image":"omnios","command":["c"]}]}}`)
	for _, ctype := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		r := c.do("POST", "/api/v1/namespaces/default/pods", ctype, pod)
		if r.code != 415 || r.status().Reason != "UnsupportedMediaType" {
			t.Errorf("Content-Type %q: %d %s", ctype, r.code, r.body)
		}
	}
	if r := c.withHeaders("POST", "/api/v1/namespaces/default/pods", pod, map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}); r.code != 403 || r.status().Kind != "Status" {
		t.Errorf("write from another origin: %d %s", r.code, r.body)
	}
	if r := c.withHeaders("GET", "/api/v1/namespaces/default/pods", nil, map[string]string{"Origin": "https://evil.example"}); r.code != 200 {
		t.Errorf("a read from another origin is refused: %d %s", r.code, r.body)
	}
	if r := c.withHeaders("POST", "/api/v1/namespaces/default/pods", pod, map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": c.base}); r.code != 201 {
		t.Errorf("write from the API's own origin: %d %s", r.code, r.body)
	}
	if r := c.do("DELETE", "/api/v1/namespaces/default/pods/web", "", nil); r.code != 200 {
		t.Errorf("a delete without a body needs no Content-Type: %d %s", r.code, r.body)
	}
}

func TestLoopbackAPIRefusesForeignHostNames(t *testing.T) {
	hosts := api.LoopbackHosts("127.0.0.1:8080", "http://zw.local:8080")
	if strings.Join(hosts, ",") != "localhost,zw.local" {
		t.Fatalf("LoopbackHosts: %v", hosts)
	}
	if got := api.LoopbackHosts("0.0.0.0:8080", ""); got != nil {
		t.Fatalf("a non-loopback API checks no Host: %v", got)
	}
	c := serveConfig(t, pgtest.NewDatabase(t), api.Config{ImageMap: &imagemap.Map{}, AllowedHosts: hosts})
	for host, want := range map[string]int{"rebound.attacker.example": 403, "localhost:8080": 200, "zw.local": 200, "127.0.0.1:9": 200, "[::1]:80": 200} {
		req, _ := http.NewRequest("GET", c.base+"/api/v1/namespaces", nil)
		req.Host = host
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

func TestMergePatchGoesThroughPutsRules(t *testing.T) {
	c := newAPI(t)
	if r := c.json("POST", "/api/v1/nodes", `{"metadata":{"name":"n1","labels":{"a":"1","b":"2"}},"spec":{"podCIDR":"10.88.1.0/24"}}`); r.code != 201 {
		t.Fatalf("create node: %d %s", r.code, r.body)
	}
	patch := func(path, ctype, body string) response { return c.do("PATCH", path, ctype, []byte(body)) }
	r := patch("/api/v1/nodes/n1", "application/merge-patch+json", `{"metadata":{"labels":{"a":null,"c":"3"}},"spec":{"unschedulable":true}}`)
	var n model.Node
	_ = json.Unmarshal(r.body, &n)
	if r.code != 200 || n.Metadata.Labels["a"] != "" || n.Metadata.Labels["b"] != "2" || n.Metadata.Labels["c"] != "3" || !n.Spec.Unschedulable {
		t.Fatalf("merge patch of a node: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1", "application/merge-patch+json", `{"spec":{"podCIDR":"10.99.0.0/24"}}`); r.code != 422 || !hasCause(r, "spec.podCIDR") {
		t.Errorf("patching what PUT refuses: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1", "application/merge-patch+json", `{"metadata":{"resourceVersion":"1"},"spec":{"unschedulable":false}}`); r.code != 409 {
		t.Errorf("a patch naming a stale resourceVersion: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1", "application/strategic-merge-patch+json", `{"metadata":{"labels":{"d":"4"}}}`); r.code != 200 {
		t.Errorf("a strategic merge patch without lists: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1", "application/strategic-merge-patch+json", `{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`); r.code != 200 || !strings.Contains(string(r.body), `"taints":[{"key":"k","effect":"NoSchedule"}]`) {
		t.Errorf("a strategic merge patch with a list: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1", "application/json-patch+json", `[{"op":"test","path":"/spec/unschedulable","value":true},{"op":"add","path":"/metadata/labels/e","value":"5"}]`); r.code != 200 || !strings.Contains(string(r.body), `"e":"5"`) {
		t.Errorf("a JSON patch: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1", "application/json-patch+json", `[{"op":"test","path":"/spec/unschedulable","value":false}]`); r.code != 422 {
		t.Errorf("a JSON patch whose test fails: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1", "application/json-patch+json", `{"op":"add"}`); r.code != 400 {
		t.Errorf("a JSON patch that is not a list: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1?fieldManager=ops", "application/apply-patch+yaml", "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {applied: \"yes\"}}\n"); r.code != 200 || !strings.Contains(string(r.body), `"applied":"yes"`) || !strings.Contains(string(r.body), `"e":"5"`) {
		t.Errorf("a server-side apply of a node's label: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1", "application/json", `{"spec":{"unschedulable":false}}`); r.code != 415 {
		t.Errorf("a PATCH with application/json: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/nodes/n1", "application/merge-patch+json", `{"spec":{"unschedulable":"yes"}}`); r.code != 400 {
		t.Errorf("a patch of the wrong type: %d %s", r.code, r.body)
	}

	if r := c.json("POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"web"},"spec":{"containers":[{"name":"a","image":"omnios","command":["c"]}]}}`); r.code != 201 {
		t.Fatalf("create pod: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/namespaces/default/pods/web", "application/merge-patch+json", `{"metadata":{"labels":{"tier":"front"}}}`); r.code != 200 || !strings.Contains(string(r.body), `"tier":"front"`) {
		t.Errorf("label a pod: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/namespaces/default/pods/web", "application/merge-patch+json", `{"spec":{"restartPolicy":"Never"}}`); r.code != 422 || !hasCause(r, "spec") {
		t.Errorf("patching a pod's fixed spec: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/namespaces/default/pods/nope", "application/merge-patch+json", `{}`); r.code != 404 {
		t.Errorf("patching a missing pod: %d %s", r.code, r.body)
	}

	if r := c.json("POST", "/api/v1/namespaces/default/services", `{"metadata":{"name":"web"},"spec":{"selector":{"app":"web"},"ports":[{"port":80}]}}`); r.code != 201 {
		t.Fatalf("create service: %d %s", r.code, r.body)
	}
	if r := patch("/api/v1/namespaces/default/services/web", "application/merge-patch+json", `{"spec":{"selector":{"app":"web2"}}}`); r.code != 200 || !strings.Contains(string(r.body), `"web2"`) {
		t.Errorf("patch a service's selector: %d %s", r.code, r.body)
	}
}

// testNodeHeader names the asking node in these tests, which run the API
// without node certificates (the route's Config.RequestingNode).
const testNodeHeader = "X-Test-Node"
