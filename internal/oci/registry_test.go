package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/zonewright/zonewright/internal/ocilayer"
)

// testRegistry is an in-process registry behind an optional wrapper (for
// auth and faults), and a Client that may speak plain http to it.
type testRegistry struct {
	srv    *httptest.Server
	host   string
	client *Client
	push   []remote.Option
}

func newTestRegistry(t *testing.T, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(discardLogger()))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	return &testRegistry{
		srv:    srv,
		host:   host,
		client: &Client{Insecure: func(r string) bool { return r == host }},
	}
}

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }

func (r *testRegistry) ref(t *testing.T, s string) Reference {
	t.Helper()
	ref, err := ParseReference(r.host + "/" + s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func (r *testRegistry) write(t *testing.T, s string, img v1.Image) {
	t.Helper()
	ref, err := name.ParseReference(r.host+"/"+s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, r.push...); err != nil {
		t.Fatalf("push %s: %v", s, err)
	}
}

func (r *testRegistry) writeIndex(t *testing.T, s string, idx v1.ImageIndex) {
	t.Helper()
	ref, err := name.ParseReference(r.host+"/"+s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx, r.push...); err != nil {
		t.Fatalf("push index %s: %v", s, err)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func randomImage(t *testing.T, layers int64) v1.Image {
	return must[v1.Image](t)(random.Image(512, layers))
}

func digestOf(t *testing.T, d interface{ Digest() (v1.Hash, error) }) string {
	return must[v1.Hash](t)(d.Digest()).String()
}

func readBlob(t *testing.T, c *Client, ref Reference, keys Keyring, digest string, offset int64) []byte {
	t.Helper()
	rc, err := c.Blob(context.Background(), ref, keys, digest, offset)
	if err != nil {
		t.Fatalf("Blob %s @%d: %v", digest, offset, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compressed(t *testing.T, l v1.Layer) []byte {
	rc := must[io.ReadCloser](t)(l.Compressed())
	defer rc.Close()
	return must[[]byte](t)(io.ReadAll(rc))
}

// A single Docker schema-2 image: digest, layers, config and blobs come
// back as pushed.
func TestResolveImage(t *testing.T) {
	r := newTestRegistry(t, nil)
	img := randomImage(t, 3)
	img = must[v1.Image](t)(mutate.Config(img, v1.Config{
		Entrypoint:   []string{"/bin/sh", "-c"},
		Cmd:          []string{"echo hi"},
		Env:          []string{"PATH=/usr/bin:/bin", "A=b"},
		WorkingDir:   "/srv",
		User:         "1000:1000",
		ExposedPorts: map[string]struct{}{"80/tcp": {}, "53/udp": {}},
	}))
	r.write(t, "team/app:v1", img)

	ref := r.ref(t, "team/app:v1")
	got, err := r.client.Resolve(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Reference != r.host+"/team/app:v1" {
		t.Errorf("Reference %q", got.Reference)
	}
	if want := digestOf(t, img); got.Digest != want {
		t.Errorf("Digest %s, want %s", got.Digest, want)
	}
	wantCfg := Config{
		Entrypoint:   []string{"/bin/sh", "-c"},
		Cmd:          []string{"echo hi"},
		Env:          []string{"PATH=/usr/bin:/bin", "A=b"},
		WorkingDir:   "/srv",
		User:         "1000:1000",
		ExposedPorts: []string{"53/udp", "80/tcp"},
	}
	if !reflect.DeepEqual(got.Config, wantCfg) {
		t.Errorf("Config %+v, want %+v", got.Config, wantCfg)
	}
	layers := must[[]v1.Layer](t)(img.Layers())
	if len(got.Layers) != len(layers) {
		t.Fatalf("%d layers, want %d", len(got.Layers), len(layers))
	}
	var size int64
	for i, l := range layers {
		want := Layer{
			Digest:    digestOf(t, l),
			DiffID:    must[v1.Hash](t)(l.DiffID()).String(),
			Size:      must[int64](t)(l.Size()),
			MediaType: string(must[types.MediaType](t)(l.MediaType())),
		}
		size += want.Size
		if got.Layers[i] != want {
			t.Errorf("layer %d: %+v, want %+v", i, got.Layers[i], want)
		}
		if b := readBlob(t, r.client, ref, nil, want.Digest, 0); !bytes.Equal(b, compressed(t, l)) {
			t.Errorf("layer %d: blob differs", i)
		}
	}
	if got.Size != size {
		t.Errorf("Size %d, want %d", got.Size, size)
	}

	// By digest, and by tag and digest: the same image.
	for _, s := range []string{"team/app@" + got.Digest, "team/app:other@" + got.Digest} {
		again, err := r.client.Resolve(context.Background(), r.ref(t, s), nil)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if again.Digest != got.Digest || !reflect.DeepEqual(again.Layers, got.Layers) {
			t.Errorf("%s resolved differently: %+v", s, again)
		}
	}
}

func platformIndex(t *testing.T, mt types.MediaType, imgs map[string]v1.Image) v1.ImageIndex {
	var adds []mutate.IndexAddendum
	for _, p := range []string{"linux/arm64", "linux/amd64/v3", "linux/amd64", "windows/amd64"} {
		img, ok := imgs[p]
		if !ok {
			continue
		}
		plat := must[*v1.Platform](t)(v1.ParsePlatform(p))
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
	}
	return mutate.IndexMediaType(mutate.AppendManifests(empty.Index, adds...), mt)
}

// Manifest lists and OCI indexes: linux/amd64 (without a variant) is chosen.
func TestResolveIndex(t *testing.T) {
	r := newTestRegistry(t, nil)
	for _, mt := range []types.MediaType{types.OCIImageIndex, types.DockerManifestList} {
		t.Run(string(mt), func(t *testing.T) {
			amd := randomImage(t, 2)
			imgs := map[string]v1.Image{
				"linux/arm64":    randomImage(t, 2),
				"linux/amd64/v3": randomImage(t, 1),
				"linux/amd64":    amd,
				"windows/amd64":  randomImage(t, 1),
			}
			idx := platformIndex(t, mt, imgs)
			r.writeIndex(t, "multi:1", idx)
			got, err := r.client.Resolve(context.Background(), r.ref(t, "multi:1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := digestOf(t, amd); got.Digest != want {
				t.Errorf("Digest %s, want linux/amd64's %s (index %s)", got.Digest, want, digestOf(t, idx))
			}
			if len(got.Layers) != 2 {
				t.Errorf("%d layers", len(got.Layers))
			}
			// The index's digest names the same choice.
			byDigest, err := r.client.Resolve(context.Background(), r.ref(t, "multi@"+digestOf(t, idx)), nil)
			if err != nil || byDigest.Digest != got.Digest {
				t.Errorf("by index digest: %+v, %v", byDigest, err)
			}
		})
	}
}

func TestResolveNoPlatform(t *testing.T) {
	r := newTestRegistry(t, nil)
	r.writeIndex(t, "armonly:1", platformIndex(t, types.OCIImageIndex, map[string]v1.Image{
		"linux/arm64":   randomImage(t, 1),
		"windows/amd64": randomImage(t, 1),
	}))
	_, err := r.client.Resolve(context.Background(), r.ref(t, "armonly:1"), nil)
	if !errors.Is(err, ErrNoPlatform) {
		t.Fatalf("Resolve: %v, want ErrNoPlatform", err)
	}
	if !strings.Contains(err.Error(), "linux/arm64") || !strings.Contains(err.Error(), "windows/amd64") {
		t.Errorf("error does not list the platforms: %v", err)
	}

	// A single image whose config says arm64.
	img := randomImage(t, 1)
	cf := must[*v1.ConfigFile](t)(img.ConfigFile()).DeepCopy()
	cf.OS, cf.Architecture = "linux", "arm64"
	r.write(t, "arm:1", must[v1.Image](t)(mutate.ConfigFile(img, cf)))
	if _, err := r.client.Resolve(context.Background(), r.ref(t, "arm:1"), nil); !errors.Is(err, ErrNoPlatform) {
		t.Errorf("arm64 image: %v, want ErrNoPlatform", err)
	}
}

func TestResolveNotFound(t *testing.T) {
	r := newTestRegistry(t, nil)
	r.write(t, "there:1", randomImage(t, 1))
	for _, s := range []string{"there:2", "absent:1", "there@sha256:" + hex64} {
		_, err := r.client.Resolve(context.Background(), r.ref(t, s), nil)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(%s): %v, want ErrNotFound", s, err)
		}
		t.Logf("%s: %v", s, err)
	}
	if _, err := r.client.Blob(context.Background(), r.ref(t, "there:1"), nil, "sha256:"+hex64, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Blob of an unknown digest: %v, want ErrNotFound", err)
	}
}

// An OCI image with gzip, zstd and uncompressed layers: each layer fetched
// with Blob unpacks to the DiffID the config promises.
func TestResolveOCIAndApply(t *testing.T) {
	r := newTestRegistry(t, nil)
	tarOf := func(name, body string) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	opener := func(b []byte) tarball.Opener {
		return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	l1 := must[v1.Layer](t)(tarball.LayerFromOpener(opener(tarOf("etc/os-release", "ID=test\n")), tarball.WithMediaType(types.OCILayer)))
	l2 := must[v1.Layer](t)(tarball.LayerFromOpener(opener(tarOf("bin/app", "app")), tarball.WithCompression(compression.ZStd), tarball.WithMediaType(types.OCILayerZStd)))
	l3 := static.NewLayer(tarOf("etc/motd", "welcome"), types.OCIUncompressedLayer)
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img = must[v1.Image](t)(mutate.AppendLayers(img, l1, l2, l3))
	img = must[v1.Image](t)(mutate.Config(img, v1.Config{Cmd: []string{"/bin/app"}}))
	r.write(t, "oci:1", img)

	ref := r.ref(t, "oci:1")
	got, err := r.client.Resolve(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != digestOf(t, img) {
		t.Errorf("Digest %s, want %s", got.Digest, digestOf(t, img))
	}
	wantTypes := []string{string(types.OCILayer), string(types.OCILayerZStd), string(types.OCIUncompressedLayer)}
	root := t.TempDir()
	for i, l := range got.Layers {
		if l.MediaType != wantTypes[i] {
			t.Errorf("layer %d media type %s, want %s", i, l.MediaType, wantTypes[i])
		}
		rc, err := r.client.Blob(context.Background(), ref, nil, l.Digest, 0)
		if err != nil {
			t.Fatal(err)
		}
		diffID, err := ocilayer.ApplyLayer(root, rc, l.MediaType)
		rc.Close()
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		if diffID != l.DiffID {
			t.Errorf("layer %d: DiffID %s, config says %s", i, diffID, l.DiffID)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "bin/app")); err != nil || string(b) != "app" {
		t.Errorf("the layers did not unpack: %q %v", b, err)
	}
	if !reflect.DeepEqual(got.Config.Cmd, []string{"/bin/app"}) {
		t.Errorf("Cmd %v", got.Config.Cmd)
	}
}

// Images Resolve refuses: a foreign layer, diff_ids that do not match the
// layers, a manifest larger than allowed, a manifest served by digest
// that does not have that digest.
func TestResolveRejects(t *testing.T) {
	var tamper atomic.Bool
	r := newTestRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if !tamper.Load() || req.Method != http.MethodGet || !strings.Contains(req.URL.Path, "/manifests/sha256:") {
				h.ServeHTTP(w, req)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body := append(rec.Body.Bytes(), ' ')
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			w.WriteHeader(rec.Code)
			w.Write(body)
		})
	})

	foreign := must[v1.Image](t)(mutate.AppendLayers(randomImage(t, 1), static.NewLayer([]byte("windows"), types.DockerForeignLayer)))
	r.write(t, "foreign:1", foreign)
	if _, err := r.client.Resolve(context.Background(), r.ref(t, "foreign:1"), nil); err == nil || !strings.Contains(err.Error(), "foreign") {
		t.Errorf("foreign layer: %v", err)
	}

	img := randomImage(t, 2)
	cf := must[*v1.ConfigFile](t)(img.ConfigFile()).DeepCopy()
	cf.RootFS.DiffIDs = cf.RootFS.DiffIDs[:1]
	r.write(t, "diffids:1", must[v1.Image](t)(mutate.ConfigFile(img, cf)))
	if _, err := r.client.Resolve(context.Background(), r.ref(t, "diffids:1"), nil); err == nil || !strings.Contains(err.Error(), "diff_ids") {
		t.Errorf("diff_ids mismatch: %v", err)
	}

	r.write(t, "big:1", randomImage(t, 20))
	small := &Client{Insecure: r.client.Insecure, MaxManifestBytes: 1000}
	if _, err := small.Resolve(context.Background(), r.ref(t, "big:1"), nil); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("manifest over the limit: %v", err)
	}

	ok := randomImage(t, 1)
	r.write(t, "tampered:1", ok)
	r.writeIndex(t, "tampered-index:1", platformIndex(t, types.OCIImageIndex, map[string]v1.Image{"linux/amd64": ok}))
	tamper.Store(true)
	for _, s := range []string{"tampered@" + digestOf(t, ok), "tampered-index:1"} {
		if _, err := r.client.Resolve(context.Background(), r.ref(t, s), nil); err == nil || !strings.Contains(err.Error(), "has digest") {
			t.Errorf("%s: tampered manifest: %v", s, err)
		}
	}
}

// Blob from an offset returns the tail, whether the registry honours the
// range (206) or ignores it (200).
func TestBlobOffset(t *testing.T) {
	var partial atomic.Int32
	// pkg/registry only understands "bytes=N-M": complete an open range
	// with the blob's size, as a real registry would.
	completeRange := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if rg := req.Header.Get("Range"); strings.HasSuffix(rg, "-") && strings.Contains(req.URL.Path, "/blobs/") {
				head := httptest.NewRecorder()
				h.ServeHTTP(head, httptest.NewRequest(http.MethodHead, req.URL.String(), nil))
				size := mustAtoi(t, head.Header().Get("Content-Length"))
				if mustAtoi(t, strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-")) >= size {
					w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
					return
				}
				req.Header.Set("Range", rg+fmt.Sprint(size-1))
				partial.Add(1)
			}
			h.ServeHTTP(w, req)
		})
	}
	ignoreRange := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			req.Header.Del("Range")
			h.ServeHTTP(w, req)
		})
	}
	for _, tc := range []struct {
		name string
		wrap func(http.Handler) http.Handler
	}{{"206", completeRange}, {"200", ignoreRange}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRegistry(t, tc.wrap)
			img := randomImage(t, 1)
			r.write(t, "blob:1", img)
			l := must[[]v1.Layer](t)(img.Layers())[0]
			whole := compressed(t, l)
			ref := r.ref(t, "blob:1")
			partial.Store(0)
			for _, off := range []int64{0, 1, 100, int64(len(whole)) - 1} {
				if got := readBlob(t, r.client, ref, nil, digestOf(t, l), off); !bytes.Equal(got, whole[off:]) {
					t.Errorf("offset %d: %d bytes, want the last %d", off, len(got), len(whole)-int(off))
				}
			}
			if tc.name == "206" && partial.Load() != 3 {
				t.Errorf("%d range requests, want 3", partial.Load())
			}
			if _, err := r.client.Blob(context.Background(), ref, nil, digestOf(t, l), int64(len(whole))+10); err == nil {
				t.Errorf("offset past the end: no error")
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// A private repository behind a bearer-token challenge: anonymous and a
// wrong password are ErrUnauthorized, the pull secret's credentials work,
// and Resolve plus Blob calls do one token exchange.
func TestPrivateRegistry(t *testing.T) {
	const user, pass, token = "alice", "s3cret", "tok-0123"
	var tokens atomic.Int32
	var host string
	r := newTestRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/token" {
				u, p, ok := req.BasicAuth()
				if !ok || u != user || p != pass {
					w.WriteHeader(http.StatusUnauthorized)
					fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}`)
					return
				}
				if req.URL.Query().Get("service") != "test" {
					t.Errorf("token request for service %q", req.URL.Query().Get("service"))
				}
				tokens.Add(1)
				json.NewEncoder(w).Encode(map[string]string{"token": token})
				return
			}
			if req.Header.Get("Authorization") != "Bearer "+token {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="http://%s/token",service="test",scope="repository:private/app:pull"`, host))
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	host = r.host
	r.push = []remote.Option{remote.WithAuth(&authn.Basic{Username: user, Password: pass})}
	img := randomImage(t, 2)
	r.write(t, "private/app:1", img)
	ref := r.ref(t, "private/app:1")

	if _, err := r.client.Resolve(context.Background(), ref, nil); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("anonymous: %v, want ErrUnauthorized", err)
	}

	secret := func(u, p string) Keyring {
		auth := base64.StdEncoding.EncodeToString([]byte(u + ":" + p))
		keys, err := ParseDockerConfigJSON([]byte(`{"auths":{"http://` + host + `/v2/":{"auth":"` + auth + `"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	if _, err := r.client.Resolve(context.Background(), ref, secret(user, "wrong")); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("wrong password: %v, want ErrUnauthorized", err)
	}

	tokens.Store(0)
	keys := secret(user, pass)
	got, err := r.client.Resolve(context.Background(), ref, keys)
	if err != nil {
		t.Fatalf("with the pull secret: %v", err)
	}
	if got.Digest != digestOf(t, img) {
		t.Errorf("Digest %s", got.Digest)
	}
	for i, l := range must[[]v1.Layer](t)(img.Layers()) {
		if b := readBlob(t, r.client, ref, keys, got.Layers[i].Digest, 0); !bytes.Equal(b, compressed(t, l)) {
			t.Errorf("layer %d differs", i)
		}
	}
	if n := tokens.Load(); n != 1 {
		t.Errorf("%d token exchanges for a Resolve and 2 Blobs, want 1", n)
	}

	// Concurrent first calls on a new client wait for one exchange.
	tokens.Store(0)
	fresh := &Client{Insecure: r.client.Insecure}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			rc, err := fresh.Blob(context.Background(), ref, keys, got.Layers[0].Digest, 0)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, rc)
			rc.Close()
		})
	}
	wg.Wait()
	if n := tokens.Load(); n != 1 {
		t.Errorf("%d token exchanges for 8 concurrent Blobs, want 1", n)
	}

	// The right credentials are cached; the wrong ones still fail.
	if _, err := r.client.Resolve(context.Background(), ref, secret(user, "wrong")); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("wrong password after a good one: %v, want ErrUnauthorized", err)
	}
}

// A registry not marked insecure is spoken to over https only, even on
// loopback, where go-containerregistry would fall back to http.
func TestSecureByDefault(t *testing.T) {
	r := newTestRegistry(t, nil)
	r.write(t, "app:1", randomImage(t, 1))
	_, err := (&Client{}).Resolve(context.Background(), r.ref(t, "app:1"), nil)
	if err == nil {
		t.Fatal("Resolve over plain http succeeded without Insecure")
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnauthorized) {
		t.Errorf("error %v is a registry answer, want a transport failure", err)
	}
	t.Log(err)
}

func TestParseDockerConfigJSON(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cfg := `{"auths":{
		"https://index.docker.io/v1/": {"auth": "` + b64("hub:hubpw") + `"},
		"registry.example.com:5000": {"username": "u5000", "password": "p"},
		"https://registry.example.com": {"username": "u443", "password": "p"},
		"*.example.org": {"username": "glob", "password": "p"},
		"quay.io/team": {"username": "team", "password": "p"},
		"quay.io": {"username": "quay", "password": "p"},
		"ghcr.io/org/repo": {"username": "ghcr", "password": "p", "identitytoken": "idt"},
		"token.example.net": {"registrytoken": "rt"}
	}}`
	keys, err := ParseDockerConfigJSON([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		registry string
		user     string // "" = not found
	}{
		{"index.docker.io", "hub"},
		{"docker.io", "hub"},
		{"registry.example.com:5000", "u5000"},
		{"registry.example.com", "u443"},
		{"registry.example.com:5001", ""},
		{"a.example.org", "glob"},
		{"a.b.example.org", ""},
		{"example.org", ""},
		{"quay.io", "quay"},
		{"ghcr.io", "ghcr"},
		{"gcr.io", ""},
	} {
		c, ok := keys(tc.registry)
		if ok != (tc.user != "") || c.Username != tc.user {
			t.Errorf("keys(%q) = %+v, %v; want user %q", tc.registry, c, ok, tc.user)
		}
	}
	if c, _ := keys("index.docker.io"); c.Password != "hubpw" {
		t.Errorf("auth not decoded: %+v", c)
	}
	if c, _ := keys("ghcr.io"); c.IdentityToken != "idt" {
		t.Errorf("identity token: %+v", c)
	}
	if c, ok := keys("token.example.net"); !ok || c.RegistryToken != "rt" {
		t.Errorf("registry token: %+v", c)
	}

	for _, bad := range []string{`{`, `{"auths":{"x.io":{"auth":"***"}}}`, `{"auths":{"x.io":{"auth":"` + b64("nocolon") + `"}}}`} {
		if _, err := ParseDockerConfigJSON([]byte(bad)); err == nil {
			t.Errorf("ParseDockerConfigJSON(%s) succeeded", bad)
		}
	}
	// docker.io as a key, too.
	keys, _ = ParseDockerConfigJSON([]byte(`{"auths":{"docker.io":{"username":"d","password":"p"}}}`))
	if c, ok := keys("index.docker.io"); !ok || c.Username != "d" {
		t.Errorf("docker.io key: %+v %v", c, ok)
	}
}
