package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/imagestore"
	"github.com/zonewright/zonewright/internal/pgtest"
)

// An image source the control plane may not read is refused when the
// image is created, on spec.source, and the answer tells nothing about
// the file or address it named.
func TestRefusedImageSourcesAre422OnSpecSource(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "sources")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shadow := []byte("root:$6$hash:19000:0:99999:7:::\n")
	shadowPath := filepath.Join(base, "shadow")
	if err := os.WriteFile(shadowPath, shadow, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shadowPath, filepath.Join(dir, "innocent.tar")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "good.tar"), []byte("tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(shadow)
	realDigest := hex.EncodeToString(sum[:])

	sources := &imagestore.Sources{FileDir: dir, AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	c := serveConfig(t, pgtest.NewDatabase(t), api.Config{ImageSources: sources})
	image := func(name, source string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"kind":"lx-tarball","source":%q,"sha256":%q}}`, name, source, digest)
	}
	for _, tc := range []struct{ name, source string }{
		{"a file outside the source directory", "file://" + shadowPath},
		{"the system's shadow file", "file:///etc/shadow"},
		{"a climb out of the directory", "file://" + dir + "/../shadow"},
		{"a symlink out of the directory", "file://" + dir + "/innocent.tar"},
		{"the metadata service", "http://169.254.169.254/latest/meta-data/"},
		{"a private address", "http://10.0.0.5:5432/"},
		{"IPv6 metadata", "http://[fd00:ec2::254]/"},
		{"credentials in the URL", "https://admin:hunter2@images.example.org/x.tar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.json("POST", "/api/v1/images", image("refused", tc.source))
			st := r.status()
			if r.code != http.StatusUnprocessableEntity || st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Field != "spec.source" {
				t.Fatalf("want 422 on spec.source, got %d %s", r.code, r.body)
			}
			body := string(r.body)
			for _, leak := range []string{realDigest, "hunter2", "root:", fmt.Sprint(len(shadow))} {
				if strings.Contains(body, leak) {
					t.Fatalf("the answer tells %q: %s", leak, body)
				}
			}
		})
	}
	if r := c.json("GET", "/api/v1/images", nil); strings.Contains(string(r.body), "hunter2") || strings.Contains(string(r.body), "refused") {
		t.Fatalf("a refused image was stored: %s", r.body)
	}
	for name, source := range map[string]string{"good-file": "file://" + dir + "/good.tar", "loopback": "http://127.0.0.1:8000/x.tar", "public": "https://images.example.org/x.tar"} {
		if r := c.json("POST", "/api/v1/images", image(name, source)); r.code != http.StatusCreated {
			t.Fatalf("%s: %d %s", source, r.code, r.body)
		}
	}
}
