package e2e_test

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ggtarball "github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/model"
)

// blobCounter is a registry that counts the blob downloads of each digest.
type blobCounter struct {
	http.Handler
	mu   sync.Mutex
	gets map[string]int
}

// ServeHTTP counts, and asks for basic authentication as puller:s3cret
// for the repositories under private/ (and at the version check, where
// clients learn how to authenticate).
func (b *blobCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v2/" || strings.HasPrefix(r.URL.Path, "/v2/private/") {
		if u, p, _ := r.BasicAuth(); u != "puller" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	if i := strings.Index(r.URL.Path, "/blobs/sha256:"); r.Method == http.MethodGet && i >= 0 {
		b.mu.Lock()
		b.gets[r.URL.Path[i+len("/blobs/"):]]++
		b.mu.Unlock()
	}
	b.Handler.ServeHTTP(w, r)
}

func (b *blobCounter) count(digest string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gets[digest]
}

// layer is a gzip layer of the given files (name → content; a name
// ending in "/" is a directory).
func layer(t *testing.T, files ...string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i+1 < len(files); i += 2 {
		h := &tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg, ModTime: time.Unix(1e9, 0)}
		if strings.HasSuffix(files[i], "/") {
			h.Mode, h.Size, h.Typeflag = 0o755, 0, tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, files[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := ggtarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ociImage is an image of the layers with a configuration.
func ociImage(t *testing.T, cfg v1.Config, platform v1.Platform, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Config, cf.OS, cf.Architecture = cfg, platform.OS, platform.Architecture
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

func digestOf(t *testing.T, l v1.Layer) string {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// startRegistry serves an in-process registry through wrap and returns
// its host:port.
func startRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(wrap(registry.New(registry.Logger(log.New(io.Discard, "", 0)))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// push writes an image or an index to host/repo.
func push(t *testing.T, host, repo string, obj any, opts ...remote.Option) {
	t.Helper()
	ref, err := name.ParseReference(host+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	switch o := obj.(type) {
	case v1.Image:
		err = remote.Write(ref, o, opts...)
	case v1.ImageIndex:
		err = remote.WriteIndex(ref, o, opts...)
	}
	if err != nil {
		t.Fatalf("push %s: %v", repo, err)
	}
}

// A container naming a registry image runs it in an lx zone: the image
// is pulled through the registry API (an index picks linux/amd64), its
// layers are applied in order with whiteouts and opaque directories, and
// the container runs the image's entrypoint, command and environment.
// A second image on the same base layer shares it: the control plane
// fetches the base blob once and the node keeps one dataset of it. An
// image the registry lacks, or has for no platform an lx zone runs, is
// refused with the reason.
func TestRegistryImagesRunWithSharedLayers(t *testing.T) {
	t.Parallel()
	reg := &blobCounter{gets: map[string]int{}}
	host := startRegistry(t, func(h http.Handler) http.Handler { reg.Handler = h; return reg })
	pusher := remote.WithAuth(&authn.Basic{Username: "puller", Password: "s3cret"})
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 := v1.Platform{OS: "linux", Architecture: "arm64"}
	base := layer(t, "etc/", "", "etc/greeting", "hello from the base layer\n", "etc/gone", "whited out\n",
		"data/", "", "data/old", "hidden by an opaque directory\n")
	app := layer(t, "etc/.wh.gone", "", "data/.wh..wh..opq", "", "data/new", "from the app layer\n")
	other := layer(t, "srv/", "", "srv/other", "the other image\n")
	cfg := v1.Config{Entrypoint: []string{"/bin/sh", "-c"}, WorkingDir: "/etc",
		Cmd: []string{`cat greeting; echo "greeting=$GREETING"; exec sleep 3600`},
		Env: []string{"GREETING=from the image", "PATH=/usr/bin:/bin"}}
	push(t, host, "demo/app:1", ociImage(t, cfg, amd64, base, app), pusher)
	push(t, host, "private/app:1", ociImage(t, cfg, amd64, base, layer(t, "secret", "only with the pull secret\n")), pusher)

	// The second image is an index: an arm64 variant first, then amd64.
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: ociImage(t, cfg, arm64, layer(t, "arm", "arm\n")), Descriptor: v1.Descriptor{Platform: &arm64}},
		mutate.IndexAddendum{Add: ociImage(t, cfg, amd64, base, other), Descriptor: v1.Descriptor{Platform: &amd64}})
	armOnly := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: ociImage(t, cfg, arm64, layer(t, "arm", "arm\n")), Descriptor: v1.Descriptor{Platform: &arm64}})
	push(t, host, "demo/other:1", idx, pusher)
	push(t, host, "demo/arm:1", armOnly, pusher)

	key, err := encryption.NewKey([]byte(strings.Repeat("k", encryption.KeySize)))
	if err != nil {
		t.Fatal(err)
	}
	storeDir := t.TempDir()
	c := newClusterWith(t, 2, func(cfg *controlplane.Config) { cfg.EncryptionKey, cfg.ImageStore = key, storeDir })
	podOf := func(pod, image string) {
		c.createPod(fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"runtimeClassName":"lx","nodeName":"node-1",
		  "containers":[{"name":"app","image":%q,"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, pod, image))
	}
	asked := host + "/demo/app:1"
	podOf("registry-app", asked)
	p := c.waitPhase("registry-app", model.PodRunning, true, 3*time.Minute)
	if got := p.Metadata.Annotations[model.AnnotationRequestedImagePrefix+"app"]; got != asked || !strings.HasPrefix(p.Spec.Containers[0].Image, "oci-app-1-") {
		t.Errorf("the pod runs catalog image %q and keeps what it asked for (%q) in its annotation", p.Spec.Containers[0].Image, got)
	}
	if ev := c.events("registry-app"); !strings.Contains(ev, "ImagePulling") || !strings.Contains(ev, "Pulled") {
		t.Errorf("the pod's events tell the pull and its end: %s", ev)
	}
	base1 := "/api/v1/namespaces/default/pods/registry-app"
	c.eventually(time.Minute, "the image's command to write its log", func() bool {
		_, b := c.do("GET", base1+"/log", nil)
		return strings.Contains(string(b), "hello from the base layer\ngreeting=from the image\n")
	})
	if out, _, code := c.podExec(t, base1, nil, "ls", "data"); code != 0 || out != "new\n" {
		t.Errorf("an opaque directory hides what lower layers put in it: ls data = %q (exit %d)", out, code)
	}
	if _, _, code := c.podExec(t, base1, nil, "cat", "etc/gone"); code == 0 {
		t.Error("a whiteout removes the lower layer's file")
	}

	podOf("registry-other", host+"/demo/other:1")
	otherImage := c.waitPhase("registry-other", model.PodRunning, true, 3*time.Minute).Spec.Containers[0].Image
	if out, _, code := c.podExec(t, "/api/v1/namespaces/default/pods/registry-other", nil, "cat", "srv/other", "etc/greeting"); code != 0 ||
		out != "the other image\nhello from the base layer\n" {
		t.Errorf("the index's amd64 image runs: %q (exit %d)", out, code)
	}
	if n := reg.count(digestOf(t, base)); n != 1 {
		t.Errorf("the shared base layer was fetched from the registry %d times, want once", n)
	}
	s, _ := c.state(0)
	var layers []string
	for _, d := range s.Datasets {
		if strings.Contains(d.Name, "/zonewright/images/layers/") && !strings.Contains(d.Name, "@") {
			layers = append(layers, d.Name)
		}
	}
	if len(layers) != 3 {
		t.Errorf("node-1 holds one dataset per layer chain (base, base+app, base+other), shared: %v", layers)
	}

	for pod, want := range map[string]string{"registry-missing": "no such image", "registry-arm": "no linux/amd64"} {
		image := host + "/demo/missing:1"
		if pod == "registry-arm" {
			image = host + "/demo/arm:1"
		}
		podOf(pod, image)
		c.eventually(2*time.Minute, pod+" waiting with the registry's answer", func() bool {
			p, ok := c.pod(pod)
			return ok && p.Status.Reason == "ImagePullBackOff" && strings.Contains(p.Status.Message, want)
		})
	}
	// A private repository: refused without the pull secret, pulled with
	// it, and the two pods' images are not the same catalog image.
	private := host + "/private/app:1"
	podOf("private-anonymous", private)
	c.eventually(2*time.Minute, "the anonymous pull refused", func() bool {
		p, ok := c.pod("private-anonymous")
		return ok && p.Status.Reason == "ImagePullBackOff" && strings.Contains(p.Status.Message, "refused access")
	})
	creds := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf(`{"auths":{%q:{"username":"puller","password":"s3cret"}}}`, host)))
	if code, b := c.do("POST", "/api/v1/namespaces/default/secrets", fmt.Sprintf(`{"metadata":{"name":"regcred"},
	  "type":"kubernetes.io/dockerconfigjson","data":{".dockerconfigjson":%q}}`, creds)); code != http.StatusCreated {
		t.Fatalf("create the pull secret: %d %s", code, b)
	}
	c.createPod(fmt.Sprintf(`{"metadata":{"name":"private-pulled"},"spec":{"runtimeClassName":"lx","nodeName":"node-1",
	  "imagePullSecrets":[{"name":"regcred"}],
	  "containers":[{"name":"app","image":%q,"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, private))
	pulled := c.waitPhase("private-pulled", model.PodRunning, true, 3*time.Minute)
	if anon, _ := c.pod("private-anonymous"); anon.Spec.Containers[0].Image == pulled.Spec.Containers[0].Image {
		t.Errorf("a pod with a pull secret shares the catalog image %q of a pod without", anon.Spec.Containers[0].Image)
	}
	if out, _, code := c.podExec(t, "/api/v1/namespaces/default/pods/private-pulled", nil, "cat", "secret"); code != 0 || out != "only with the pull secret\n" {
		t.Errorf("the private image runs: %q (exit %d)", out, code)
	}

	// Deleting an image removes the layers only it had, on the nodes and
	// in the store, and keeps the shared base.
	blobOf := func(l v1.Layer) string { return "blob-" + strings.TrimPrefix(digestOf(t, l), "sha256:")[:58] }
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/registry-other?gracePeriodSeconds=0", nil); code != 200 {
		t.Fatalf("delete pod: %d %s", code, b)
	}
	c.waitGone("registry-other", time.Minute)
	if code, b := c.do("DELETE", "/api/v1/images/"+otherImage, nil); code != http.StatusAccepted {
		t.Fatalf("delete image %s: %d %s", otherImage, code, b)
	}
	c.eventually(time.Minute, "the image gone", func() bool { _, code := c.image(otherImage); return code == 404 })
	if got := storeFiles(t, storeDir, blobOf(other)); len(got) != 0 {
		t.Errorf("the deleted image's own layer stays in the store: %v", got)
	}
	if got := storeFiles(t, storeDir, blobOf(base)); len(got) == 0 {
		t.Error("the shared base layer left the store with one of its images")
	}
	s, _ = c.state(0)
	var chains []string
	for _, d := range s.Datasets {
		if strings.Contains(d.Name, "/zonewright/images/layers/") && strings.HasSuffix(d.Name, "@layer") {
			chains = append(chains, d.Name)
		}
	}
	if len(chains) != 3 {
		t.Errorf("node-1 keeps the layers of the images left (base, base+app, base+secret): %v", chains)
	}

	if code, b := c.do("POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"bad-ref"},"spec":{"runtimeClassName":"lx",
	  "containers":[{"name":"app","image":"example.com/UPPER:1"}]}}`); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "spec.containers[0].image") {
		t.Errorf("a reference that does not parse: %d %s", code, b)
	}
}

// faultyRegistry serves a registry whose blobs of digest corrupt come
// back with a byte changed, and whose blob of digest stall stops halfway
// the first time it is asked for (then waits for the client to give up).
// It completes open-ended ranges, which pkg/registry leaves unanswered.
type faultyRegistry struct {
	http.Handler
	mu             sync.Mutex
	sizes          map[string]int64
	corrupt, stall string
	stalled        bool
	ranges         []string
}

func (f *faultyRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := strings.Index(r.URL.Path, "/blobs/sha256:")
	if i < 0 || r.Method != http.MethodGet {
		f.Handler.ServeHTTP(w, r)
		return
	}
	digest := r.URL.Path[i+len("/blobs/"):]
	f.mu.Lock()
	size := f.sizes[digest]
	stallNow := digest == f.stall && !f.stalled
	f.stalled = f.stalled || stallNow
	if rg := r.Header.Get("Range"); rg != "" && digest == f.stall {
		f.ranges = append(f.ranges, rg)
		if strings.HasSuffix(rg, "-") && size > 0 {
			r.Header.Set("Range", fmt.Sprintf("%s%d", rg, size-1))
		}
	}
	f.mu.Unlock()
	rec := httptest.NewRecorder()
	f.Handler.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	switch {
	case digest == f.corrupt && len(body) > 0:
		body = append([]byte{}, body...)
		body[len(body)/2] ^= 0xff
	case stallNow:
		w.WriteHeader(rec.Code)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// A layer blob that does not match its digest fails the image, and its
// pods say so; one that stalls halfway is given up after the stall
// timeout and resumed from where it stopped; an image pushed after its
// pod asked is imported again at the pod's next look.
func TestRegistryImageFaults(t *testing.T) {
	t.Parallel()
	reg := &faultyRegistry{sizes: map[string]int64{}}
	host := startRegistry(t, func(h http.Handler) http.Handler { reg.Handler = h; return reg })
	cfg := v1.Config{Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"exec sleep 3600"}}
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	bad := layer(t, "bad", "corrupted on the way\n")
	slow := layer(t, "slow", strings.Repeat("stalls halfway\n", 20000))
	for repo, l := range map[string]v1.Layer{"demo/corrupt:1": bad, "demo/stall:1": slow} {
		push(t, host, repo, ociImage(t, cfg, amd64, l))
		size, _ := l.Size()
		reg.sizes[digestOf(t, l)] = size
	}
	reg.corrupt, reg.stall = digestOf(t, bad), digestOf(t, slow)

	c := newClusterWith(t, 1, func(cfg *controlplane.Config) { cfg.ImageStallTimeout = 2 * time.Second })
	for _, p := range []string{"corrupt", "stall"} {
		c.createPod(fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"runtimeClassName":"lx",
		  "containers":[{"name":"app","image":%q,"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, p, host+"/demo/"+p+":1"))
	}
	c.eventually(2*time.Minute, "the corrupt layer refused", func() bool {
		p, ok := c.pod("corrupt")
		return ok && p.Status.Reason == "ImagePullBackOff" && strings.Contains(p.Status.Message, "does not match")
	})
	c.waitPhase("stall", model.PodRunning, true, 2*time.Minute)

	// An image pushed after its pod asked for it: the import fails, and
	// the pod's looks after its back-offs import it again until it is
	// there, as the kubelet retries a pull. (Drop the EnsureImport of a
	// Failed oci image in ResolvePodImage to see the pod wait for ever.)
	c.createPod(fmt.Sprintf(`{"metadata":{"name":"later"},"spec":{"runtimeClassName":"lx",
	  "containers":[{"name":"app","image":%q,"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, host+"/demo/later:1"))
	c.eventually(2*time.Minute, "the image not pushed yet refused", func() bool {
		p, ok := c.pod("later")
		return ok && p.Status.Reason == "ImagePullBackOff"
	})
	push(t, host, "demo/later:1", ociImage(t, cfg, amd64, layer(t, "later", "pushed after the pod\n")))
	c.waitPhase("later", model.PodRunning, true, 2*time.Minute)

	reg.mu.Lock()
	defer reg.mu.Unlock()
	if len(reg.ranges) != 1 || reg.ranges[0] == "bytes=0-" {
		t.Errorf("the stalled blob was resumed with one range request from where it stopped: %q", reg.ranges)
	}
}

// imagePullPolicy Always (the default for the tag latest) follows a tag
// that moved: the next pod runs the new image, while a pod of the old one
// keeps running on its own digest, beside it on the node.
func TestAlwaysFollowsAMovedTag(t *testing.T) {
	t.Parallel()
	host := startRegistry(t, func(h http.Handler) http.Handler { return h })
	cfg := v1.Config{Entrypoint: []string{"/bin/sh", "-c"}, Cmd: []string{"cat version; exec sleep 3600"}, WorkingDir: "/"}
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	push(t, host, "demo/moving", ociImage(t, cfg, amd64, layer(t, "version", "v1\n")))
	c := newCluster(t, 1)
	run := func(pod string) model.Pod {
		c.createPod(fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"runtimeClassName":"lx",
		  "containers":[{"name":"app","image":%q,"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, pod, host+"/demo/moving"))
		return c.waitPhase(pod, model.PodRunning, true, 3*time.Minute)
	}
	logs := func(pod string) string {
		_, b := c.do("GET", "/api/v1/namespaces/default/pods/"+pod+"/log", nil)
		return string(b)
	}
	first := run("moving-1")
	if first.Spec.Containers[0].ImagePullPolicy != model.PullAlways {
		t.Errorf("an image with no tag pulls Always by default: %q", first.Spec.Containers[0].ImagePullPolicy)
	}
	c.eventually(time.Minute, "the first pod's version", func() bool { return logs("moving-1") == "v1\n" })

	push(t, host, "demo/moving", ociImage(t, cfg, amd64, layer(t, "version", "v2\n")))
	run("moving-2")
	c.eventually(time.Minute, "the second pod's version", func() bool { return logs("moving-2") == "v2\n" })
	if p, _ := c.pod("moving-1"); p.Status.Phase != model.PodRunning || logs("moving-1") != "v1\n" {
		t.Errorf("the pod of the old digest: %s, %q", p.Status.Phase, logs("moving-1"))
	}
	s, _ := c.state(0)
	digests := 0
	for _, d := range s.Datasets {
		if strings.Contains(d.Name, "/zonewright/images/"+first.Spec.Containers[0].Image+"/") && !strings.Contains(d.Name, "@") {
			digests++
		}
	}
	if digests != 2 {
		t.Errorf("the node holds both digests while a zone of each runs: %d", digests)
	}
}
