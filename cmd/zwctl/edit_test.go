package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// An edit goes through when the object changed meanwhile only in its
// status (a pod's status changes on its own), and still fails when its
// spec or metadata changed: no one's change is lost. (Drop the retry
// loop in edit to see the first refused as a conflict.)
func TestAnEditSurvivesAStatusChangeButNotAnotherEdit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		what      string
		meanwhile func(pod map[string]any)
		wantCode  int
	}{
		{"status changed", func(p map[string]any) { p["status"] = map[string]any{"phase": "Running", "podIP": "10.0.0.9"} }, 0},
		{"labels changed", func(p map[string]any) { p["metadata"].(map[string]any)["labels"] = map[string]any{"app": "theirs"} }, 1},
	} {
		t.Run(tc.what, func(t *testing.T) {
			var mu sync.Mutex
			rv := 1
			pod := func() map[string]any {
				return map[string]any{"apiVersion": "v1", "kind": "Pod",
					"metadata": map[string]any{"name": "web", "namespace": "edit", "resourceVersion": "1", "labels": map[string]any{"app": "web"}},
					"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "base"}}}}
			}
			current := pod()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				switch r.Method {
				case http.MethodGet:
					json.NewEncoder(w).Encode(current)
					if rv == 1 { // the change lands between the edit's read and its write
						rv = 2
						tc.meanwhile(current)
						current["metadata"].(map[string]any)["resourceVersion"] = "2"
					}
				case http.MethodPut:
					var sent map[string]any
					b, _ := io.ReadAll(r.Body)
					json.Unmarshal(b, &sent)
					if sent["metadata"].(map[string]any)["resourceVersion"] != current["metadata"].(map[string]any)["resourceVersion"] {
						w.WriteHeader(http.StatusConflict)
						json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "code": 409, "reason": "Conflict", "message": "the object has been modified"})
						return
					}
					sent["status"] = current["status"]
					current = sent
					json.NewEncoder(w).Encode(current)
				}
			}))
			defer srv.Close()
			r := zwctlWith(t, "", map[string]string{"EDITOR": `sed -i 's/image: base/image: mine/'`, "ZWCONFIG": t.TempDir() + "/none"},
				"edit", "pod/web", "-n", "edit", "--server", srv.URL, "--token", "t")
			if r.code != tc.wantCode {
				t.Fatalf("edit: %s", r)
			}
			mu.Lock()
			defer mu.Unlock()
			image := current["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"]
			if (tc.wantCode == 0) != (image == "mine") {
				t.Errorf("the image after the edit: %v", image)
			}
		})
	}
}
