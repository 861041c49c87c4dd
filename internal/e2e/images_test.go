package e2e_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/zonewright/zonewright/internal/controlplane"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// imageFiles is the local HTTP server the tests import images from. A file
// can drop its first connection halfway, stall, or drip slowly; the server
// counts the bytes it sends, so a resume is seen as one download in total.
type imageFiles struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string]*served
}

type served struct {
	body []byte
	// stallFirstAt: the first request sends this many bytes, then nothing
	// until the client gives up.
	stallFirstAt int
	// drip sends the body in chunks of this size with a pause between.
	drip      int
	dripPause time.Duration
	requests  atomic.Int32
	sent      atomic.Int64
	// hungUp is when (UnixNano) a client first went away before the
	// end of the body.
	hungUp atomic.Int64
}

func newImageFiles(t *testing.T) *imageFiles {
	f := &imageFiles{files: map[string]*served{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() { f.srv.CloseClientConnections(); f.srv.Close() })
	return f
}

func (f *imageFiles) add(name string, s *served) (url, digest string) {
	f.mu.Lock()
	f.files[name] = s
	f.mu.Unlock()
	sum := sha256.Sum256(s.body)
	return f.srv.URL + "/" + name, hex.EncodeToString(sum[:])
}

func (f *imageFiles) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	s := f.files[strings.TrimPrefix(r.URL.Path, "/")]
	f.mu.Unlock()
	if s == nil {
		http.NotFound(w, r)
		return
	}
	n := s.requests.Add(1)
	start := 0
	if rg := r.Header.Get("Range"); strings.HasPrefix(rg, "bytes=") {
		start, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
	}
	body := s.body[start:]
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("ETag", `"v1"`)
	w.Header().Set("Accept-Ranges", "bytes")
	if start > 0 {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(s.body)-1, len(s.body)))
		w.WriteHeader(http.StatusPartialContent)
	}
	write := func(b []byte) bool {
		k, err := w.Write(b)
		s.sent.Add(int64(k))
		w.(http.Flusher).Flush()
		return err == nil
	}
	if n == 1 && s.stallFirstAt > 0 {
		write(body[:s.stallFirstAt])
		<-r.Context().Done() // the client notices the stall and gives up
		return
	}
	chunk := len(body)
	if s.drip > 0 {
		chunk = s.drip
	}
	hangUp := func() { s.hungUp.CompareAndSwap(0, time.Now().UnixNano()) }
	for off := 0; off < len(body); off += chunk {
		if !write(body[off:min(off+chunk, len(body))]) {
			hangUp()
			return
		}
		if s.drip > 0 {
			select {
			case <-time.After(s.dripPause):
			case <-r.Context().Done():
				hangUp()
				return
			}
		}
	}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		if i%3 == 0 {
			b[i] = byte(r.IntN(256))
		} else {
			b[i] = 'z'
		}
	}
	return b
}

func tarball(t *testing.T, motd string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "etc/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.WriteHeader(&tar.Header{Name: "etc/motd", Mode: 0o644, Size: int64(len(motd)), Typeflag: tar.TypeReg})
	tw.Write([]byte(motd))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func compress(t *testing.T, how string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var err error
	switch how {
	case model.CompressionGzip:
		w := gzip.NewWriter(&buf)
		_, err = w.Write(b)
		err = errorsJoin(err, w.Close())
	case model.CompressionZstd:
		w, _ := zstd.NewWriter(&buf)
		_, err = w.Write(b)
		err = errorsJoin(err, w.Close())
	case model.CompressionXZ:
		w, _ := xz.NewWriter(&buf)
		_, err = w.Write(b)
		err = errorsJoin(err, w.Close())
	default:
		return b
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// zfsStream makes a zfs send stream with node 0's simulator.
func (c *cluster) zfsStream(motd string) []byte {
	c.t.Helper()
	return c.zfsStreamWith(motd, nil)
}

// zfsStreamWith is zfsStream with more files under etc.
func (c *cluster) zfsStreamWith(motd string, files map[string][]byte) []byte {
	c.t.Helper()
	n := c.nodes.Nodes[0]
	run := func(args ...string) {
		if out, err := exec.Command(filepath.Join(n.BinDir, "zfs"), args...).CombinedOutput(); err != nil {
			c.t.Fatalf("zfs %v: %v %s", args, err, out)
		}
	}
	run("create", "tank/fixture")
	etc := filepath.Join(n.Root, "fs/tank/fixture/etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(etc, "motd"), []byte(motd), 0o644); err != nil {
		c.t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(etc, name), b, 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	run("snapshot", "tank/fixture@v1")
	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(n.BinDir, "zfs"), "send", "tank/fixture@v1")
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("zfs send: %v", err)
	}
	run("destroy", "-r", "tank/fixture")
	return out.Bytes()
}

func (c *cluster) createImage(name, kind, url, digest, compression string) {
	c.t.Helper()
	body := fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"kind":%q,"source":%q,"sha256":%q,"compression":%q}}`, name, kind, url, digest, compression)
	if code, b := c.do("POST", "/api/v1/images", body); code != http.StatusCreated {
		c.t.Fatalf("create image %s: %d %s", name, code, b)
	}
}

func (c *cluster) image(name string) (model.Image, int) {
	c.t.Helper()
	var img model.Image
	code := c.get("/api/v1/images/"+name, &img)
	return img, code
}

// waitImage waits for the image's phase and, per node, the phase wanted.
func (c *cluster) waitImage(name, phase string, nodes map[string]string, timeout time.Duration) model.Image {
	c.t.Helper()
	var img model.Image
	c.eventually(timeout, fmt.Sprintf("image %s %s on %v", name, phase, nodes), func() bool {
		img, _ = c.image(name)
		if img.Status.Phase != phase {
			return false
		}
		for n, want := range nodes {
			if ns, ok := img.Status.Node(n); !ok || ns.Phase != want {
				return false
			}
		}
		return true
	})
	return img
}

func (c *cluster) allNodes(phase string) map[string]string {
	m := map[string]string{}
	for _, n := range c.nodes.Nodes {
		m[n.Name] = phase
	}
	return m
}

// imageOnNode reports what of the image is on a node: its dataset or
// volume, or its tarball (complete or partial).
func (c *cluster) imageOnNode(node int, name string) []string {
	c.t.Helper()
	var found []string
	s, _ := c.state(node)
	for _, d := range s.Datasets {
		if strings.HasSuffix(d.Name, "/zonewright/images/"+name) || strings.Contains(d.Name, "/zonewright/images/"+name+"@") {
			found = append(found, d.Name)
		}
	}
	dir := filepath.Join(c.nodes.Nodes[node].Root, "fs/var/zonewright/images")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), name+".") {
			found = append(found, filepath.Join(dir, e.Name()))
		}
	}
	return found
}

func storeFiles(t *testing.T, dir, name string) []string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), name+".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// Every kind and every compression imports end to end into Ready on every
// node; a node whose zfs receive fails is Failed with the reason while the
// others are Ready; a wrong digest fails the image and leaves nothing;
// pods run from the images; and delete waits until no pod uses them.
func TestImagesImportDistributeAndRun(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	c := newClusterWith(t, 3, func(cfg *controlplane.Config) { cfg.ImageStore = storeDir })
	files := newImageFiles(t)
	stream := c.zfsStream("from the stream\n")
	root := tarball(t, "from the tarball\n")
	disk := randomBytes(3<<20+100, 7)

	// node-3 cannot receive streams.
	c.sim(2, "fault", "fail-next", "zfs receive", "1000", "--stderr", "cannot receive: pool tank is faulted")

	type imp struct{ name, kind, compression string }
	cases := []imp{
		{"lx-stream", model.ImageZFSStream, model.CompressionZstd},
		{"lx-stream-gz", model.ImageZFSStream, model.CompressionGzip},
		{"lx-tar-gz", model.ImageLXTarball, model.CompressionGzip},
		{"lx-tar-zst", model.ImageLXTarball, model.CompressionZstd},
		{"lx-tar-xz", model.ImageLXTarball, model.CompressionXZ},
		{"lx-tar", model.ImageLXTarball, ""}, // plain, detected
		{"vm-disk-xz", model.ImageBhyveDisk, model.CompressionXZ},
		{"vm-disk", model.ImageBhyveDisk, model.CompressionNone},
	}
	for i, ic := range cases {
		raw := map[string][]byte{model.ImageZFSStream: stream, model.ImageLXTarball: root, model.ImageBhyveDisk: disk}[ic.kind]
		// Declared compression is left out for half of them: the magic bytes say.
		declared := ic.compression
		if i%2 == 1 && declared != model.CompressionNone {
			declared = ""
		}
		url, digest := files.add(ic.name, &served{body: compress(t, ic.compression, raw)})
		c.createImage(ic.name, ic.kind, url, digest, declared)
	}
	badBody := compress(t, model.CompressionGzip, root)
	badURL, realDigest := files.add("bad", &served{body: badBody})
	wrong := strings.Repeat("ab", 32)
	c.createImage("bad", model.ImageLXTarball, badURL, wrong, "")

	for _, ic := range cases {
		want := c.allNodes(model.ImageReady)
		if ic.kind == model.ImageZFSStream {
			want["node-3"] = model.ImageFailed
		}
		img := c.waitImage(ic.name, model.ImageReady, want, 3*time.Minute)
		if img.Status.ArtefactSHA256 == "" || img.Status.ArtefactSize == 0 {
			t.Errorf("%s: the artefact's digest and size belong in the status: %+v", ic.name, img.Status)
		}
		for i := range c.nodes.Nodes {
			got := c.imageOnNode(i, ic.name)
			if failed := ic.kind == model.ImageZFSStream && i == 2; failed != (len(got) == 0) {
				t.Errorf("%s on %s: %v", ic.name, c.nodes.Nodes[i].Name, got)
			}
		}
		if ic.kind == model.ImageZFSStream {
			ns, _ := img.Status.Node("node-3")
			if ns.Reason != model.ImageReasonPullFailed || !strings.Contains(ns.Message, "faulted") {
				t.Errorf("%s: node-3 must be Failed with the reason: %+v", ic.name, ns)
			}
		}
	}
	c.recordHistory(workflows.ImageWorkflowID("lx-stream"), "image-import-failing-node.json")
	bad := c.waitImage("bad", model.ImageFailed, nil, time.Minute)
	if bad.Status.Reason != model.ImageReasonDigestMismatch || !strings.Contains(bad.Status.Message, "does not match") ||
		strings.Contains(bad.Status.Message, realDigest) || strings.Contains(bad.Status.Message, fmt.Sprint(len(badBody))) || bad.Status.BytesTotal != 0 {
		t.Errorf("a digest mismatch fails the image saying neither the digest nor the size of what was read: %+v", bad.Status)
	}
	if got := storeFiles(t, storeDir, "bad"); len(got) != 0 {
		t.Errorf("a digest mismatch leaves no files in the store: %v", got)
	}
	if len(bad.Status.Nodes) != 0 {
		t.Errorf("a failed import goes to no node: %+v", bad.Status.Nodes)
	}

	// Pods run from the images.
	for _, p := range []struct{ name, brand, image string }{
		{"from-stream", "lx", "lx-stream"}, {"from-tar", "lx", "lx-tar-xz"}, {"from-disk", "bhyve", "vm-disk"},
	} {
		c.createPod(fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"runtimeClassName":%q,"nodeName":"node-1",
		  "containers":[{"name":"app","image":%q,"command":["sleep","3600"],"resources":{"requests":{"cpu":"100m","memory":"64Mi"}}}]}}`, p.name, p.brand, p.image))
		c.waitPhase(p.name, model.PodRunning, true, 2*time.Minute)
	}

	// Delete is refused while a pod uses the image, then removes it everywhere.
	if code, b := c.do("DELETE", "/api/v1/images/lx-tar-xz", nil); code != http.StatusConflict {
		t.Fatalf("delete of an image in use: %d %s", code, b)
	}
	if code, b := c.do("DELETE", "/api/v1/namespaces/default/pods/from-tar?gracePeriodSeconds=0", nil); code != 200 {
		t.Fatalf("delete pod: %d %s", code, b)
	}
	c.waitGone("from-tar", time.Minute)
	if code, b := c.do("DELETE", "/api/v1/images/lx-tar-xz", nil); code != http.StatusAccepted {
		t.Fatalf("delete of an unused image: %d %s", code, b)
	}
	c.eventually(time.Minute, "image lx-tar-xz gone", func() bool { _, code := c.image("lx-tar-xz"); return code == 404 })
	for i := range c.nodes.Nodes {
		if got := c.imageOnNode(i, "lx-tar-xz"); len(got) != 0 {
			t.Errorf("a deleted image stays on %s: %v", c.nodes.Nodes[i].Name, got)
		}
	}
	if got := storeFiles(t, storeDir, "lx-tar-xz"); len(got) != 0 {
		t.Errorf("a deleted image stays in the store: %v", got)
	}
}

// A source that stalls halfway is abandoned after the stall timeout and
// resumed with Range: one download in total. A slow source that keeps
// sending is not a stall, and its progress shows in the status.
func TestImportResumesAStalledDownloadAndWaitsForASlowOne(t *testing.T) {
	c := newClusterWith(t, 1, func(cfg *controlplane.Config) { cfg.ImageStallTimeout = 2 * time.Second })
	files := newImageFiles(t)
	body := compress(t, model.CompressionGzip, randomBytes(4<<20, 3))
	stalled := &served{body: body, stallFirstAt: len(body) / 2}
	url, digest := files.add("stalls", stalled)
	c.createImage("stalls", model.ImageBhyveDisk, url, digest, "")
	slow := &served{body: body, drip: len(body) / 20, dripPause: 500 * time.Millisecond}
	url2, digest2 := files.add("slow", slow)
	c.createImage("slow", model.ImageBhyveDisk, url2, digest2, "")

	sawProgress := false
	c.eventually(time.Minute, "progress of the slow import in its status", func() bool {
		img, _ := c.image("slow")
		sawProgress = img.Status.Phase == model.ImageImporting && img.Status.BytesDone > 0 && img.Status.BytesDone < int64(len(body))
		return sawProgress
	})
	c.waitImage("stalls", model.ImageReady, c.allNodes(model.ImageReady), 2*time.Minute)
	c.waitImage("slow", model.ImageReady, c.allNodes(model.ImageReady), 2*time.Minute)
	if got := stalled.requests.Load(); got != 2 {
		t.Errorf("the stalled download must be resumed once: %d requests", got)
	}
	if got := stalled.sent.Load(); got != int64(len(body)) {
		t.Errorf("a resumed download is one download in total: sent %d of %d bytes", got, len(body))
	}
	if got := slow.requests.Load(); got != 1 {
		t.Errorf("a slow source within the stall timeout is not restarted: %d requests", got)
	}
}

// temporal workflow cancel on an import stops it and leaves no partial
// file in the store or on any node.
func TestCancelledImportLeavesNoPartialFiles(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	c := newClusterWith(t, 2, func(cfg *controlplane.Config) { cfg.ImageStore = storeDir })
	files := newImageFiles(t)
	body := randomBytes(8<<20, 5)
	url, digest := files.add("big", &served{body: body, drip: 128 << 10, dripPause: 200 * time.Millisecond})
	c.createImage("big", model.ImageBhyveDisk, url, digest, "")
	c.eventually(time.Minute, "the download to begin", func() bool { return len(storeFiles(t, storeDir, "big")) > 0 })
	if err := c.temporal.CancelWorkflow(context.Background(), workflows.ImageWorkflowID("big"), ""); err != nil {
		t.Fatal(err)
	}
	img := c.waitImage("big", model.ImageFailed, nil, time.Minute)
	c.recordHistory(workflows.ImageWorkflowID("big"), "image-import-cancelled.json")
	if img.Status.Reason != model.ImageReasonCancelled {
		t.Errorf("a cancelled import is Failed/Cancelled: %+v", img.Status)
	}
	if got := storeFiles(t, storeDir, "big"); len(got) != 0 {
		t.Errorf("partial files left in the store: %v", got)
	}
	for i := range c.nodes.Nodes {
		if got := c.imageOnNode(i, "big"); len(got) != 0 {
			t.Errorf("partial files left on %s: %v", c.nodes.Nodes[i].Name, got)
		}
	}
}

// Stopping an import that is downloading closes the download within
// seconds, whichever way it is stopped: a Temporal cancel of its workflow
// reaches the running fetch on the fetch's next heartbeat, which the
// control worker sends every couple of seconds (not at 0.8 of the fetch's
// heartbeat timeout, 48 s); a DELETE of the image also removes its
// partial download, which ends the fetch at once.
func TestStoppingAnImportClosesItsDownloadWithinSeconds(t *testing.T) {
	// Alone: it times the download's end (within 5 s).
	c := newCluster(t, 1)
	files := newImageFiles(t)
	sources := map[string]*served{}
	for _, name := range []string{"cancelled", "deleted"} {
		src := &served{body: randomBytes(8<<20, 7), drip: 64 << 10, dripPause: 500 * time.Millisecond}
		url, digest := files.add(name, src)
		c.createImage(name, model.ImageBhyveDisk, url, digest, "")
		sources[name] = src
	}
	c.eventually(time.Minute, "both downloads to report progress", func() bool {
		a, _ := c.image("cancelled")
		b, _ := c.image("deleted")
		return a.Status.BytesDone > 0 && b.Status.BytesDone > 0
	})
	// The fetches have heartbeated by now, so a cancel that waited for
	// the next throttle window would wait for it here.
	time.Sleep(3 * time.Second)
	for name, src := range sources {
		if img, _ := c.image(name); img.Status.Phase != model.ImageImporting || src.hungUp.Load() != 0 {
			t.Fatalf("the download of %s must still run: %+v", name, img.Status)
		}
	}
	stopped := time.Now()
	if err := c.temporal.CancelWorkflow(context.Background(), workflows.ImageWorkflowID("cancelled"), ""); err != nil {
		t.Fatal(err)
	}
	if code, b := c.do("DELETE", "/api/v1/images/deleted", nil); code != http.StatusAccepted {
		t.Fatalf("delete: %d %s", code, b)
	}
	for name, src := range sources {
		c.eventually(time.Minute, "the source of "+name+" to see its connection closed", func() bool { return src.hungUp.Load() != 0 })
		took := time.Unix(0, src.hungUp.Load()).Sub(stopped)
		t.Logf("the download of %s closed %.1f s after it was stopped", name, took.Seconds())
		if took > 5*time.Second {
			t.Errorf("the download of %s went on for %s after it was stopped; want it closed within 5 s", name, took.Round(100*time.Millisecond))
		}
		if got := src.requests.Load(); got != 1 {
			t.Errorf("a stopped import of %s is not retried: %d requests", name, got)
		}
	}
	img := c.waitImage("cancelled", model.ImageFailed, nil, time.Minute)
	if img.Status.Reason != model.ImageReasonCancelled {
		t.Errorf("a cancelled import is Failed/Cancelled: %+v", img.Status)
	}
	c.eventually(time.Minute, "the deleted image to be gone", func() bool { _, code := c.image("deleted"); return code == http.StatusNotFound })
}

// A node that joins later gets the images it lacks; a pod bound to it
// before the image is there waits Pending with reason ImagePulling, then
// runs. A pull that fails keeps the pod Pending (ImagePullBackOff) until a
// retry succeeds.
func TestLateNodeGetsImagesAndPodsWaitForThem(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	files := newImageFiles(t)
	stream := c.zfsStream("late\n")
	url, digest := files.add("s", &served{body: compress(t, model.CompressionZstd, stream)})
	c.createImage("lx-late", model.ImageZFSStream, url, digest, "")
	c.waitImage("lx-late", model.ImageReady, c.allNodes(model.ImageReady), 2*time.Minute)

	n, err := c.nodes.Add(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	idx := len(c.nodes.Nodes) - 1
	// Its first pull fails (every attempt), and later ones are slow.
	c.sim(idx, "fault", "fail-next", "zfs receive", "5", "--stderr", "cannot receive: out of space")
	c.sim(idx, "fault", "latency", "zfs receive", "3s")
	c.createPod(fmt.Sprintf(`{"metadata":{"name":"waits"},"spec":{"runtimeClassName":"lx","nodeName":%q,
	  "containers":[{"name":"app","image":"lx-late","command":["sleep","3600"]}]}}`, n.Name))
	c.waitPhase("waits", model.PodRunning, true, 4*time.Minute)
	// The failed pull is seen as ErrImagePull; ImagePullBackOff follows
	// only when the pod's next look finds it failed still, and the pull
	// it asked again for may by then be under way (or done).
	ev := c.events("waits")
	if !strings.Contains(ev, podcontract.ReasonImagePulling) || !strings.Contains(ev, podcontract.ReasonErrImagePull+": ") {
		t.Errorf("the pod must have waited with reasons ImagePulling and ErrImagePull: %s", ev)
	}
	c.recordHistory(podcontract.WorkflowID("default", "waits"), "pod-image-pull-backoff.json")
	c.waitImage("lx-late", model.ImageReady, c.allNodes(model.ImageReady), time.Minute)
	if got := c.imageOnNode(idx, "lx-late"); len(got) == 0 {
		t.Errorf("the late node lacks the image")
	}
}
