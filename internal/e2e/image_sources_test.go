package e2e_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/model"
)

// The adversarial imports of the security review, against the whole
// control plane: a file outside the source directory is refused at create
// without its digest, a redirect to the metadata service fails the import
// at fetch, and an endless body stops at --image-max-bytes leaving nothing.
func TestImageSourcesTheControlPlaneMayNotRead(t *testing.T) {
	t.Parallel()
	storeDir, sourceDir := t.TempDir(), t.TempDir()
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) {
		cfg.ImageStore, cfg.ImageSourceDir, cfg.ImageMaxBytes = storeDir, sourceDir, 1<<20
	})

	secret := []byte("root:$6$hash:19000:0:99999:7:::\n")
	secretPath := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secretPath, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(secret)
	realDigest := hex.EncodeToString(sum[:])
	wrong := strings.Repeat("ab", 32)
	body := func(name, source string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"kind":"lx-tarball","source":%q,"sha256":%q}}`, name, source, wrong)
	}
	code, b := c.do("POST", "/api/v1/images", body("shadow", "file://"+secretPath))
	var st model.Status
	if err := json.Unmarshal(b, &st); err != nil || code != http.StatusUnprocessableEntity || st.Details == nil ||
		len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != "spec.source" {
		t.Fatalf("a file outside the source directory: %d %s, want 422 on spec.source", code, b)
	}
	if strings.Contains(string(b), realDigest) {
		t.Fatalf("the refusal reveals the file's digest: %s", b)
	}

	metadata := httptest.NewServer(http.RedirectHandler("http://169.254.169.254/latest/meta-data/", http.StatusFound))
	t.Cleanup(metadata.Close)
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		for {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}))
	t.Cleanup(endless.Close)
	for name, source := range map[string]string{"metadata": metadata.URL, "endless": endless.URL} {
		if code, b := c.do("POST", "/api/v1/images", body(name, source)); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, code, b)
		}
	}
	img := c.waitImage("metadata", model.ImageFailed, nil, time.Minute)
	if img.Status.Reason != model.ImageReasonFetchFailed || !strings.Contains(img.Status.Message, "source refused") {
		t.Errorf("a redirect to the metadata service: %+v", img.Status)
	}
	img = c.waitImage("endless", model.ImageFailed, nil, time.Minute)
	if img.Status.Reason != model.ImageReasonFetchFailed || !strings.Contains(img.Status.Message, "--image-max-bytes") {
		t.Errorf("an endless body: %+v", img.Status)
	}
	for _, name := range []string{"metadata", "endless"} {
		if got := storeFiles(t, storeDir, name); len(got) != 0 {
			t.Errorf("%s left files in the store: %v", name, got)
		}
	}
}
