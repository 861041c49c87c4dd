package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

// send is a request with a body of contentType; it answers the response
// with its headers.
func (c *client) send(method, path, contentType, body string) (int, http.Header, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// ?fieldValidation= says what becomes of a field of the body that its
// kind lacks: Strict, the default, refuses the request naming every such
// field by its path; Warn takes the object without them and names each in
// a Warning header, as Kubernetes does; Ignore drops them silently. A key
// that matches a field only without regard to case is such a field, never
// taken as that field. A value of the wrong type is refused whatever the
// mode, and so is a mode Kubernetes does not have.
func TestFieldValidationModes(t *testing.T) {
	c := newAPI(t)
	const pods = "/api/v1/namespaces/default/pods"
	pod := func(name string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q,"Labels":{"a":"b"}},"spec":{"colour":"blue",
		  "containers":[{"name":"app","image":"omnios","imagee":"x","command":["sleep","1"]}]}}`, name)
	}
	unknown := []string{"metadata.Labels", "spec.colour", "spec.containers[0].imagee"}
	warnings := func() []string {
		var out []string
		for _, f := range unknown {
			out = append(out, fmt.Sprintf(`299 - "unknown field \"%s\""`, f))
		}
		return out
	}

	for _, mode := range []string{"", "?fieldValidation=Strict"} {
		code, h, body := c.send("POST", pods+mode, "application/json", pod("strict"))
		st := statusOf(body)
		if code != http.StatusBadRequest || st.Reason != "BadRequest" || len(h.Values("Warning")) != 0 {
			t.Errorf("POST%s: %d %s, want 400 BadRequest", mode, code, body)
		}
		for _, f := range unknown {
			if !strings.Contains(st.Message, `unknown field "`+f+`"`) {
				t.Errorf("POST%s: %q does not name %s", mode, st.Message, f)
			}
		}
		if !strings.Contains(st.Message, `did you mean "labels"?`) {
			t.Errorf("POST%s: %q does not say Labels is a case away from labels", mode, st.Message)
		}
	}
	if r := c.json("GET", pods+"/strict", nil); r.code != http.StatusNotFound {
		t.Errorf("the refused pod was stored: %d %s", r.code, r.body)
	}

	code, h, body := c.send("POST", pods+"?fieldValidation=Warn", "application/json", pod("warned"))
	if code != http.StatusCreated || !slices.Equal(h.Values("Warning"), warnings()) {
		t.Errorf("POST ?fieldValidation=Warn: %d %q %s, want 201 with warnings %q", code, h.Values("Warning"), body, warnings())
	}
	code, h, body = c.send("POST", pods+"?fieldValidation=Ignore", "application/json", pod("ignored"))
	if code != http.StatusCreated || len(h.Values("Warning")) != 0 {
		t.Errorf("POST ?fieldValidation=Ignore: %d %q %s, want 201 without a warning", code, h.Values("Warning"), body)
	}
	for _, name := range []string{"warned", "ignored"} {
		r := c.json("GET", pods+"/"+name, nil)
		var p model.Pod
		if err := json.Unmarshal(r.body, &p); err != nil || r.code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", name, r.code, r.body)
		}
		if len(p.Metadata.Labels) != 0 || bytes.Contains(r.body, []byte("colour")) || bytes.Contains(r.body, []byte("imagee")) {
			t.Errorf("%s kept an unknown field (Labels taken as labels?): %s", name, r.body)
		}
	}

	// YAML bodies, and merge patches (checked as the object they make).
	code, h, body = c.send("POST", pods+"?fieldValidation=Warn", "application/yaml",
		"metadata: {name: yaml}\nspec:\n  containers: [{name: app, image: omnios, command: [sleep, '1']}]\n  colour: blue\n")
	if code != http.StatusCreated || !slices.Equal(h.Values("Warning"), []string{`299 - "unknown field \"spec.colour\""`}) {
		t.Errorf("POST YAML ?fieldValidation=Warn: %d %q %s", code, h.Values("Warning"), body)
	}
	patch := `{"metadata":{"labels":{"x":"y"}},"spec":{"colour":"blue"}}`
	if code, _, body = c.send("PATCH", pods+"/yaml", "application/merge-patch+json", patch); code != http.StatusBadRequest ||
		!strings.Contains(string(body), `unknown field \"spec.colour\"`) {
		t.Errorf("PATCH with an unknown field: %d %s, want 400 naming it", code, body)
	}
	if code, h, body = c.send("PATCH", pods+"/yaml?fieldValidation=Warn", "application/merge-patch+json", patch); code != http.StatusOK ||
		len(h.Values("Warning")) != 1 || !strings.Contains(string(body), `"x":"y"`) {
		t.Errorf("PATCH ?fieldValidation=Warn: %d %q %s, want 200 with the label and a warning", code, h.Values("Warning"), body)
	}

	for _, c2 := range []struct{ name, query, body, want string }{
		{"a value of the wrong type", "?fieldValidation=Ignore", `{"metadata":{"name":"t"},"spec":{"containers":"app"}}`, "cannot use a JSON string"},
		{"a mode Kubernetes does not have", "?fieldValidation=strict", pod("m"), `fieldValidation: Unsupported value: "strict"`},
		{"a mode on its own", "?fieldValidation=Loose", `{}`, `fieldValidation: Unsupported value: "Loose"`},
	} {
		code, _, body := c.send("POST", pods+c2.query, "application/json", c2.body)
		if code != http.StatusBadRequest || !strings.Contains(statusOf(body).Message, c2.want) {
			t.Errorf("%s: %d %s, want 400 saying %s", c2.name, code, body, c2.want)
		}
	}
}

func statusOf(body []byte) model.Status {
	var s model.Status
	_ = json.Unmarshal(body, &s)
	return s
}

// A body of many unknown fields gets an answer of bounded size: the
// first few named, the rest counted, in the error and in the warnings.
// (Name every field in applyFieldValidation to see 500 warnings.)
func TestManyUnknownFieldsGetABoundedAnswer(t *testing.T) {
	c := newAPI(t)
	var extra strings.Builder
	for i := range 500 {
		fmt.Fprintf(&extra, `,"x%d":1`, i)
	}
	body := `{"metadata":{"name":"many"` + extra.String() + `},"spec":{"containers":[{"name":"a","image":"omnios","command":["c"]}]}}`
	code, _, b := c.send("POST", "/api/v1/namespaces/default/pods", "application/json", body)
	if code != http.StatusBadRequest || !strings.Contains(string(b), "and 480 more unknown fields") || len(b) > 4096 {
		t.Errorf("strict: %d (%d bytes) %.300s", code, len(b), b)
	}
	code, h, b := c.send("POST", "/api/v1/namespaces/default/pods?fieldValidation=Warn", "application/json", body)
	if w := h.Values("Warning"); code != http.StatusCreated || len(w) != 21 || !strings.Contains(w[20], "and 480 more unknown fields") {
		t.Errorf("warn: %d, %d warnings %.200s", code, len(w), b)
	}
}
