package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
)

var digest = strings.Repeat("0f", 32)

func TestImageCRUDAndBadInput(t *testing.T) {
	c := newAPI(t)
	good := fmt.Sprintf(`{"metadata":{"name":"alpine","labels":{"os":"linux"}},"spec":{"kind":"lx-tarball","source":"https://example.org/a.tar.gz","sha256":%q,"compression":"gzip","resources":{"cpu":"1","memory":"1Gi"}}}`, digest)
	r := c.json("POST", "/api/v1/images", good)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var img model.Image
	_ = json.Unmarshal(r.body, &img)
	if img.Kind != model.KindImage || img.Status.Phase != model.ImagePending || img.Metadata.UID == "" {
		t.Fatalf("a new sourced image is Pending with a uid: %s", r.body)
	}
	if r := c.json("POST", "/api/v1/images", good); r.code != http.StatusConflict || r.status().Reason != "AlreadyExists" {
		t.Fatalf("a second create must be 409 AlreadyExists: %d %s", r.code, r.body)
	}
	var list model.List[model.Image]
	r = c.json("GET", "/api/v1/images?labelSelector=os%3Dlinux", nil)
	_ = json.Unmarshal(r.body, &list)
	if r.code != 200 || len(list.Items) != 1 || list.Items[0].Metadata.Name != "alpine" {
		t.Fatalf("label selector: %d %s", r.code, r.body)
	}
	r = c.json("GET", "/api/v1/images?fieldSelector=spec.kind%3Dzone-template", nil)
	_ = json.Unmarshal(r.body, &list)
	if r.code != 200 || len(list.Items) != 2 { // omnios and i from the helper
		t.Fatalf("field selector on spec.kind: %d %s", r.code, r.body)
	}
	if r := c.json("GET", "/api/v1/images/alpine", nil); r.code != 200 {
		t.Fatalf("get: %d %s", r.code, r.body)
	}
	if r := c.json("GET", "/api/v1/images/nope", nil); r.code != 404 || r.status().Reason != "NotFound" {
		t.Fatalf("get unknown: %d %s", r.code, r.body)
	}
	if r := c.json("GET", "/api/v1/images/alpine/artefact", nil); r.code != 404 {
		t.Fatalf("a server without an image store has no artefacts: %d %s", r.code, r.body)
	}

	// Watches work as for every kind: the current objects, then changes.
	w := c.watch("/api/v1/images?watch=true&fieldSelector=spec.kind%3Dlx-tarball", "")
	if ev := w.next(t); ev.Type != "ADDED" || ev.Object.Metadata.Name != "alpine" {
		t.Fatalf("a watch starts with the current images: %+v", ev)
	}
	c.json("POST", "/api/v1/images", `{"metadata":{"name":"tmpl"},"spec":{"kind":"zone-template"}}`)
	c.json("POST", "/api/v1/images", strings.Replace(good, `"alpine"`, `"alpine-2"`, 1))
	if ev := w.next(t); ev.Type != "ADDED" || ev.Object.Metadata.Name != "alpine-2" {
		t.Fatalf("the watch sees the new lx image, not the template: %+v", ev)
	}

	for _, tc := range []struct {
		name, body string
		code       int
		field      string
	}{
		{"malformed", `{"metadata":`, 400, ""},
		{"wrong kind", `{"kind":"Pod","metadata":{"name":"x"}}`, 400, ""},
		{"unknown field", `{"metadata":{"name":"x"},"spec":{"kind":"zone-template","sauce":"x"}}`, 400, ""},
		{"bad name", `{"metadata":{"name":"Bad_Name"},"spec":{"kind":"zone-template"}}`, 422, "metadata.name"},
		{"unknown kind", `{"metadata":{"name":"x"},"spec":{"kind":"docker"}}`, 422, "spec.kind"},
		{"source required", `{"metadata":{"name":"x"},"spec":{"kind":"zfs-stream","sha256":"` + digest + `"}}`, 422, "spec.source"},
		{"bad scheme", `{"metadata":{"name":"x"},"spec":{"kind":"zfs-stream","source":"ftp://h/x","sha256":"` + digest + `"}}`, 422, "spec.source"},
		{"sha256 required", `{"metadata":{"name":"x"},"spec":{"kind":"zfs-stream","source":"https://h/x"}}`, 422, "spec.sha256"},
		{"sha256 not hex", `{"metadata":{"name":"x"},"spec":{"kind":"zfs-stream","source":"https://h/x","sha256":"xyz"}}`, 422, "spec.sha256"},
		{"compression", `{"metadata":{"name":"x"},"spec":{"kind":"zfs-stream","source":"file:///x","sha256":"` + digest + `","compression":"bzip2"}}`, 422, "spec.compression"},
		{"resources", `{"metadata":{"name":"x"},"spec":{"kind":"zone-template","resources":{"cpu":"lots"}}}`, 422, "spec.resources.cpu"},
		{"brands", `{"metadata":{"name":"x"},"spec":{"kind":"zone-template","brands":["kvm"]}}`, 422, "spec.brands[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.json("POST", "/api/v1/images", tc.body)
			if r.code != tc.code {
				t.Fatalf("want %d, got %d %s", tc.code, r.code, r.body)
			}
			st := r.status()
			if st.Kind != "Status" || st.Code != tc.code {
				t.Fatalf("not a Status: %s", r.body)
			}
			if tc.field != "" && (st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != tc.field) {
				t.Fatalf("want a cause on %s: %s", tc.field, r.body)
			}
		})
	}
}

func TestPodsUseTheImageMap(t *testing.T) {
	m, err := imagemap.Parse([]byte(`
default: base
aliases: {illumos-latest: omnios-r151054}
sizes:
  small: {cpu: 250m, memory: 256Mi}
  large: {cpu: "4", memory: 8Gi}
`))
	if err != nil {
		t.Fatal(err)
	}
	c := serveStoreWith(t, pgtest.NewDatabase(t), m)
	for _, body := range []string{
		`{"metadata":{"name":"base"},"spec":{"kind":"zone-template","resources":{"cpu":"500m","memory":"512Mi"}}}`,
		`{"metadata":{"name":"omnios-r151054"},"spec":{"kind":"zone-template"}}`,
		`{"metadata":{"name":"debian"},"spec":{"kind":"lx-tarball","source":"file:///srv/debian.tar","sha256":"` + digest + `"}}`,
	} {
		if r := c.json("POST", "/api/v1/images", body); r.code != http.StatusCreated {
			t.Fatalf("create image: %d %s", r.code, r.body)
		}
	}
	create := func(body string) (int, model.Pod, model.Status) {
		r := c.json("POST", "/api/v1/namespaces/default/pods", body)
		var p model.Pod
		_ = json.Unmarshal(r.body, &p)
		return r.code, p, r.status()
	}

	code, p, _ := create(`{"metadata":{"name":"aliased"},"spec":{"containers":[{"name":"app","image":"illumos-latest","command":["sleep","1"]}]}}`)
	if code != 201 || p.Spec.Containers[0].Image != "omnios-r151054" || p.Metadata.Annotations["images.zonewright.io/app"] != "illumos-latest" {
		t.Fatalf("an alias resolves to its image and is kept in an annotation: %d %+v", code, p)
	}
	code, p, _ = create(`{"metadata":{"name":"defaulted"},"spec":{"containers":[{"name":"app","command":["sleep","1"]}]}}`)
	if code != 201 || p.Spec.Containers[0].Image != "base" {
		t.Fatalf("a container naming no image gets the default: %d %+v", code, p.Spec)
	}
	if r := p.Spec.Containers[0].Resources; r.Limits["cpu"] != "500m" || r.Requests["memory"] != "512Mi" {
		t.Fatalf("a pod without resources gets its image's: %+v", r)
	}
	code, p, _ = create(`{"metadata":{"name":"sized","annotations":{"zonewright.io/size":"large"}},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","1"]}]}}`)
	if r := p.Spec.Containers[0].Resources; code != 201 || r.Limits["cpu"] != "4" || r.Limits["memory"] != "8Gi" {
		t.Fatalf("the size annotation picks a preset: %d %+v", code, r)
	}
	code, p, _ = create(`{"metadata":{"name":"explicit","annotations":{"zonewright.io/size":"large"}},"spec":{"containers":[{"name":"app","image":"base","command":["sleep","1"],"resources":{"limits":{"cpu":"2"}}}]}}`)
	if r := p.Spec.Containers[0].Resources; code != 201 || r.Limits["cpu"] != "2" || r.Limits["memory"] != "" {
		t.Fatalf("resources the pod sets win over presets: %d %+v", code, r)
	}

	for _, tc := range []struct{ name, body, field string }{
		{"unknown image", `{"metadata":{"name":"x"},"spec":{"containers":[{"name":"app","image":"nope","command":["c"]}]}}`, "spec.containers[0].image"},
		{"unknown second image", `{"metadata":{"name":"x"},"spec":{"containers":[{"name":"a","image":"base","command":["c"]},{"name":"b","image":"nope","command":["c"]}]}}`, "spec.containers[1].image"},
		{"brand the image cannot install", `{"metadata":{"name":"x"},"spec":{"runtimeClassName":"lx","containers":[{"name":"app","image":"base","command":["c"]}]}}`, "spec.runtimeClassName"},
		{"lx image as sparse", `{"metadata":{"name":"x"},"spec":{"containers":[{"name":"app","image":"debian","command":["c"]}]}}`, "spec.runtimeClassName"},
		{"unknown size", `{"metadata":{"name":"x","annotations":{"zonewright.io/size":"huge"}},"spec":{"containers":[{"name":"app","image":"base","command":["c"]}]}}`, "metadata.annotations[zonewright.io/size]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, st := create(tc.body)
			if code != 422 || st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != tc.field {
				t.Fatalf("want 422 on %s, got %d %+v", tc.field, code, st)
			}
		})
	}
	if code, _, _ := create(`{"metadata":{"name":"lx"},"spec":{"runtimeClassName":"lx","containers":[{"name":"app","image":"debian","command":["c"]}]}}`); code != 201 {
		t.Fatalf("an lx image runs as lx: %d", code)
	}

	// Delete is refused while a pod uses the image, aliases included.
	if r := c.json("DELETE", "/api/v1/images/omnios-r151054", nil); r.code != http.StatusConflict || !strings.Contains(string(r.body), "default/aliased") {
		t.Fatalf("delete of an image in use must be 409 naming the pod: %d %s", r.code, r.body)
	}
	if r := c.json("DELETE", "/api/v1/namespaces/default/pods/aliased", nil); r.code != 200 {
		t.Fatalf("delete pod: %d %s", r.code, r.body)
	}
	if r := c.json("DELETE", "/api/v1/images/omnios-r151054", nil); r.code != http.StatusOK {
		t.Fatalf("delete of an unused image (no Temporal: at once): %d %s", r.code, r.body)
	}
	if r := c.json("GET", "/api/v1/images/omnios-r151054", nil); r.code != 404 {
		t.Fatalf("the image must be gone: %d", r.code)
	}
	if r := c.json("DELETE", "/api/v1/images/omnios-r151054", nil); r.code != 404 {
		t.Fatalf("delete of a missing image: %d %s", r.code, r.body)
	}
}

// Pods created while their image is deleted are refused (422 on the
// container's image) or make the deletion wait (409): no pod is left
// naming an image that is gone.
func TestPodCreationAndImageDeletionDoNotRace(t *testing.T) {
	c := newAPI(t)
	const rounds, creators = 20, 6
	for round := range rounds {
		img := fmt.Sprintf("race-%d", round)
		if r := c.json("POST", "/api/v1/images", fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"kind":"zone-template"}}`, img)); r.code != http.StatusCreated {
			t.Fatalf("create image: %d %s", r.code, r.body)
		}
		codes := make([]int, creators+1)
		var wg sync.WaitGroup
		for i := range creators {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pod := fmt.Sprintf(`{"metadata":{"name":"r%d-%d"},"spec":{"containers":[{"name":"app","image":%q,"command":["sleep","1000"]}]}}`, round, i, img)
				codes[i] = c.json("POST", "/api/v1/namespaces/default/pods", pod).code
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[creators] = c.json("DELETE", "/api/v1/images/"+img, nil).code
		}()
		wg.Wait()
		for i, code := range codes[:creators] {
			if code != http.StatusCreated && code != http.StatusUnprocessableEntity {
				t.Fatalf("round %d: pod %d: %d, want 201 or 422", round, i, code)
			}
		}
		if code := codes[creators]; code != http.StatusOK && code != http.StatusConflict {
			t.Fatalf("round %d: delete image: %d, want 200 or 409", round, code)
		}
	}
	var pods model.List[model.Pod]
	r := c.json("GET", "/api/v1/namespaces/default/pods", nil)
	if err := json.Unmarshal(r.body, &pods); err != nil || r.code != http.StatusOK {
		t.Fatalf("list pods: %d %s", r.code, r.body)
	}
	for _, p := range pods.Items {
		image := p.Spec.Containers[0].Image
		if r := c.json("GET", "/api/v1/images/"+image, nil); r.code != http.StatusOK {
			t.Errorf("pod %s names image %s, which is gone (%d)", p.Metadata.Name, image, r.code)
		}
	}
}
