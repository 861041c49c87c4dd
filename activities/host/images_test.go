package host_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	hostacts "github.com/zonewright/zonewright/activities/host"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/model"
)

// imageServer serves artefacts the way the control plane's download
// endpoint does: GET /images/<name> with a bearer token. A path in drop
// gets half its bytes, then the connection closes; slow paths are sent in
// pieces with pauses.
type imageServer struct {
	*httptest.Server
	mu       sync.Mutex
	files    map[string][]byte
	drop     map[string]bool
	slow     map[string]bool
	stall    map[string]bool
	deny     map[string]bool // answered 403, as the API answers a node it does not authorise
	requests atomic.Int64
}

func newImageServer(t *testing.T) *imageServer {
	s := &imageServer{files: map[string][]byte{}, drop: map[string]bool{}, slow: map[string]bool{}, stall: map[string]bool{}, deny: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		name := strings.TrimPrefix(r.URL.Path, "/images/")
		s.mu.Lock()
		if s.deny[name] {
			s.mu.Unlock()
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		body, ok := s.files[name]
		drop, slow, stall := s.drop[name], s.slow[name], s.stall[name]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", itoa(len(body)))
		switch {
		case drop:
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		case stall:
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		case slow:
			for i := range 4 {
				w.Write(body[i*len(body)/4 : (i+1)*len(body)/4])
				w.(http.Flusher).Flush()
				time.Sleep(150 * time.Millisecond)
			}
		default:
			w.Write(body)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }

// add serves body under name and returns the NodeImage of it.
func (s *imageServer) add(name, kind string, body []byte) hostapi.NodeImage {
	s.mu.Lock()
	s.files[name] = body
	s.mu.Unlock()
	sum := sha256.Sum256(body)
	return hostapi.NodeImage{Name: name, Kind: kind, URL: s.URL + "/images/" + name,
		SHA256: hex.EncodeToString(sum[:]), Size: int64(len(body))}
}

func (s *imageServer) set(m map[string]bool, name string, on bool) {
	s.mu.Lock()
	m[name] = on
	s.mu.Unlock()
}

// streamFixture is a zfs send stream made with the simulator itself: a
// dataset with /etc/motd, snapshotted @v1 and sent.
func streamFixture(t *testing.T, n *node) []byte {
	t.Helper()
	ctx := t.Context()
	zfs := n.ops.Host.ZFS()
	if err := zfs.Create(ctx, "tank/fixture", nil); err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(n.sim.Root, "fs/tank/fixture/etc")
	os.MkdirAll(etc, 0o755)
	if err := os.WriteFile(filepath.Join(etc, "motd"), []byte("from the stream\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := zfs.Snapshot(ctx, "tank/fixture", "v1"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := zfs.Send(ctx, "tank/fixture@v1", &buf); err != nil {
		t.Fatal(err)
	}
	if err := zfs.Destroy(ctx, "tank/fixture"); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func tarFixture(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := "from the tarball\n"
	tw.WriteHeader(&tar.Header{Name: "etc/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.WriteHeader(&tar.Header{Name: "etc/motd", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write([]byte(body))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func diskFixture(t *testing.T) []byte {
	b := make([]byte, 3<<20+100) // not a whole number of blocks
	rand.Read(b)
	return b
}

func (n *node) pull(t *testing.T, img hostapi.NodeImage) hostapi.NodeImageResult {
	t.Helper()
	var res hostapi.NodeImageResult
	if err := n.must(t, "PullImage "+img.Name, n.host.PullImage, img).Get(&res); err != nil {
		t.Fatal(err)
	}
	return res
}

func (n *node) datasetNames(t *testing.T, prefix string) []string {
	t.Helper()
	var out []string
	for _, d := range n.sim.State(t).Datasets {
		if d.Name == prefix || strings.HasPrefix(d.Name, prefix+"/") || strings.HasPrefix(d.Name, prefix+"@") {
			out = append(out, d.Name)
		}
	}
	return out
}

// wantNoImage fails if anything of image name is on the node.
func (n *node) wantNoImage(t *testing.T, name string) {
	t.Helper()
	if ds := n.datasetNames(t, imagesDataset+"/"+name); len(ds) > 0 {
		t.Errorf("image datasets left: %v", ds)
	}
	if _, err := os.Stat(filepath.Join(n.ops.ZvolDir, imagesDataset, name)); !os.IsNotExist(err) {
		t.Errorf("image volume device left: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(n.ops.ImageDir, "*"+name+"*"))
	if len(files) > 0 {
		t.Errorf("image files left: %v", files)
	}
}

func TestPullImageOfEachKind(t *testing.T) {
	n := newNode(t)
	srv := newImageServer(t)
	ctx := t.Context()
	zfs := n.ops.Host.ZFS()

	var mu sync.Mutex
	var beats []hostapi.ImagePullProgress
	n.ops.HeartbeatInterval = 20 * time.Millisecond
	n.env.SetOnActivityHeartbeatListener(func(info *activity.Info, details converter.EncodedValues) {
		var p hostapi.ImagePullProgress
		if details.Get(&p) == nil {
			mu.Lock()
			beats = append(beats, p)
			mu.Unlock()
		}
	})

	// A zfs stream is received, with a golden @base beside the sent @v1.
	stream := srv.add("ubuntu", model.ImageZFSStream, streamFixture(t, n))
	res := n.pull(t, stream)
	if res.Artefact != imagesDataset+"/ubuntu@base" || res.Bytes != stream.Size {
		t.Errorf("stream result %+v", res)
	}
	if got := n.datasetNames(t, imagesDataset+"/ubuntu"); !slices.Equal(got, []string{imagesDataset + "/ubuntu", imagesDataset + "/ubuntu@base", imagesDataset + "/ubuntu@v1"}) {
		t.Errorf("stream datasets %v", got)
	}
	if v, err := zfs.Get(ctx, imagesDataset+"/ubuntu", "zonewright:sha256"); err != nil || v != stream.SHA256 {
		t.Errorf("digest property %q, %v", v, err)
	}

	// A tarball lands in the image directory with its digest beside it.
	tarball := srv.add("alpine", model.ImageLXTarball, tarFixture(t))
	res = n.pull(t, tarball)
	if want := filepath.Join(n.ops.ImageDir, "alpine.tar"); res.Artefact != want {
		t.Errorf("tarball artefact %q, want %q", res.Artefact, want)
	}
	if b, _ := os.ReadFile(res.Artefact); !bytes.Equal(b, tarFixture(t)) {
		t.Errorf("tarball content differs")
	}

	// A disk becomes a volume of the artefact's size rounded up to the
	// block size, written through its device, then @base. It is served
	// slowly so that progress shows in the heartbeats.
	diskBody := diskFixture(t)
	disk := srv.add("freebsd", model.ImageBhyveDisk, diskBody)
	srv.set(srv.slow, "freebsd", true)
	res = n.pull(t, disk)
	if res.Artefact != imagesDataset+"/freebsd@base" {
		t.Errorf("disk artefact %q", res.Artefact)
	}
	props, err := zfs.GetProps(ctx, imagesDataset+"/freebsd", "type", "volsize")
	if err != nil || props["type"] != "volume" || props["volsize"] != itoa((len(diskBody)+8191)/8192*8192) {
		t.Errorf("disk volume %v, %v", props, err)
	}
	dev, err := os.ReadFile(illumos.ZvolDevice(n.ops.ZvolDir, imagesDataset+"/freebsd"))
	if err != nil || !bytes.Equal(dev[:len(diskBody)], diskBody) {
		t.Errorf("the volume does not hold the disk image (err %v)", err)
	}
	mu.Lock()
	progressed := false
	for _, b := range beats {
		if b.Image == "freebsd" && b.Total == disk.Size && b.Bytes > 0 && b.Bytes < b.Total {
			progressed = true
		}
	}
	mu.Unlock()
	if !progressed {
		t.Errorf("no heartbeat showed the disk's download in progress: %+v", beats)
	}

	// A zone template has nothing to fetch.
	before := srv.requests.Load()
	res = n.pull(t, hostapi.NodeImage{Name: "omnios", Kind: model.ImageZoneTemplate})
	if res.Artefact != "" {
		t.Errorf("zone template artefact %q", res.Artefact)
	}
	// Pulling complete images again downloads nothing.
	for _, img := range []hostapi.NodeImage{stream, tarball, disk} {
		n.pull(t, img)
	}
	if got := srv.requests.Load(); got != before {
		t.Errorf("re-pulling complete images made %d requests", got-before)
	}
}

func TestPullImageDigestMismatchLeavesNothing(t *testing.T) {
	n := newNode(t)
	srv := newImageServer(t)
	for _, img := range []hostapi.NodeImage{
		srv.add("ubuntu", model.ImageZFSStream, streamFixture(t, n)),
		srv.add("alpine", model.ImageLXTarball, tarFixture(t)),
		srv.add("freebsd", model.ImageBhyveDisk, diskFixture(t)),
	} {
		want := img.SHA256
		img.SHA256 = strings.Repeat("0", 64)
		_, err := n.run(t, n.host.PullImage, img)
		ae := appError(t, err)
		if ae.Type() != hostacts.ErrTypeDigestMismatch || !ae.NonRetryable() ||
			!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), img.SHA256) {
			t.Errorf("%s with a wrong digest: %v (type %s, non-retryable %v)", img.Kind, err, ae.Type(), ae.NonRetryable())
		}
		n.wantNoImage(t, img.Name)

		// A wrong size is a mismatch too.
		img.SHA256, img.Size = want, img.Size+1
		_, err = n.run(t, n.host.PullImage, img)
		if ae := appError(t, err); ae.Type() != hostacts.ErrTypeDigestMismatch || !ae.NonRetryable() {
			t.Errorf("%s with a wrong size: %v", img.Kind, err)
		}
		n.wantNoImage(t, img.Name)
	}
}

func TestPullImageDroppedDownloadIsRetriedCleanly(t *testing.T) {
	n := newNode(t)
	srv := newImageServer(t)
	for _, img := range []hostapi.NodeImage{
		srv.add("ubuntu", model.ImageZFSStream, streamFixture(t, n)),
		srv.add("alpine", model.ImageLXTarball, tarFixture(t)),
		srv.add("freebsd", model.ImageBhyveDisk, diskFixture(t)),
	} {
		srv.set(srv.drop, img.Name, true)
		_, err := n.run(t, n.host.PullImage, img)
		if ae := appError(t, err); ae.NonRetryable() || ae.Type() != hostacts.ErrTypeDownload {
			t.Errorf("%s with a dropped connection: %v (type %s, non-retryable %v)", img.Kind, err, ae.Type(), ae.NonRetryable())
		}
		n.wantNoImage(t, img.Name)
		srv.set(srv.drop, img.Name, false)
		n.pull(t, img)
	}
	// A download the API refuses: retryable, nothing left.
	img := srv.add("other", model.ImageLXTarball, tarFixture(t))
	srv.set(srv.deny, "other", true)
	_, err := n.run(t, n.host.PullImage, img)
	if ae := appError(t, err); ae.NonRetryable() || !strings.Contains(err.Error(), "403") {
		t.Errorf("a refused download: %v", err)
	}
	n.wantNoImage(t, "other")
}

func TestPullImageStalledDownloadIsEnded(t *testing.T) {
	n := newNode(t)
	srv := newImageServer(t)
	n.ops.DownloadStallTimeout = 300 * time.Millisecond
	for _, img := range []hostapi.NodeImage{
		srv.add("ubuntu", model.ImageZFSStream, streamFixture(t, n)),
		srv.add("alpine", model.ImageLXTarball, tarFixture(t)),
	} {
		srv.set(srv.stall, img.Name, true)
		start := time.Now()
		_, err := n.run(t, n.host.PullImage, img)
		if ae := appError(t, err); ae.NonRetryable() || ae.Type() != hostacts.ErrTypeDownload || !strings.Contains(err.Error(), "stalled") {
			t.Errorf("%s with a stalled server: %v", img.Kind, err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the stall was noticed after %s", took)
		}
		n.wantNoImage(t, img.Name)
	}
}

func TestPullImageReplacesAPartialOne(t *testing.T) {
	n := newNode(t)
	srv := newImageServer(t)
	ctx := t.Context()
	zfs := n.ops.Host.ZFS()
	// A crash after zfs receive, before the digest was recorded.
	stream := srv.add("ubuntu", model.ImageZFSStream, streamFixture(t, n))
	if err := zfs.Create(ctx, imagesDataset+"/ubuntu", nil); err != nil {
		t.Fatal(err)
	}
	n.pull(t, stream)
	if v, _ := zfs.Get(ctx, imagesDataset+"/ubuntu", "zonewright:sha256"); v != stream.SHA256 {
		t.Errorf("the partial image was not replaced: digest %q", v)
	}
	// A crash while writing a tarball, and one with a stale sidecar.
	tarball := srv.add("alpine", model.ImageLXTarball, tarFixture(t))
	os.MkdirAll(n.ops.ImageDir, 0o755)
	os.WriteFile(filepath.Join(n.ops.ImageDir, ".alpine.tar.partial-123"), []byte("half"), 0o644)
	os.WriteFile(filepath.Join(n.ops.ImageDir, "alpine.tar"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(n.ops.ImageDir, "alpine.tar.sha256"), []byte(strings.Repeat("1", 64)), 0o644)
	res := n.pull(t, tarball)
	if b, _ := os.ReadFile(res.Artefact); !bytes.Equal(b, tarFixture(t)) {
		t.Errorf("the stale tarball was kept")
	}
	if m, _ := filepath.Glob(filepath.Join(n.ops.ImageDir, ".alpine.tar.partial-*")); len(m) > 0 {
		t.Errorf("partial files left: %v", m)
	}
}

func TestInstallsFromImages(t *testing.T) {
	n := newNode(t)
	srv := newImageServer(t)
	stream := srv.add("ubuntu", model.ImageZFSStream, streamFixture(t, n))
	tarball := srv.add("alpine", model.ImageLXTarball, tarFixture(t))
	diskBody := diskFixture(t)
	disk := srv.add("freebsd", model.ImageBhyveDisk, diskBody)

	lxStream := sandbox("lxs", "127.10.9.2")
	lxStream.Brand, lxStream.Image, lxStream.ImageKind = "lx", "ubuntu", model.ImageZFSStream
	lxTar := sandbox("lxt", "127.10.9.3")
	lxTar.Brand, lxTar.Image, lxTar.ImageKind = "lx", "alpine", model.ImageLXTarball
	vm := sandbox("vm", "127.10.9.4")
	vm.Brand, vm.Image, vm.ImageKind = "bhyve", "freebsd", model.ImageBhyveDisk

	// Without the image on the node the install stops for good.
	for _, s := range []hostapi.PodSandbox{lxStream, lxTar} {
		n.must(t, "CreateDatasets", n.host.CreateDatasets, s)
		n.must(t, "CreateVNIC", n.host.CreateVNIC, s)
		n.must(t, "ConfigureZone", n.host.ConfigureZone, s)
		_, err := n.run(t, n.host.InstallZone, s)
		if ae := appError(t, err); ae.Type() != hostacts.ErrTypeImageMissing || !ae.NonRetryable() ||
			!strings.Contains(err.Error(), s.Image) || !strings.Contains(err.Error(), "node1") {
			t.Errorf("install of %s without its image: %v", s.Name, err)
		}
	}
	_, err := n.run(t, n.host.CreateDatasets, vm)
	if ae := appError(t, err); ae.Type() != hostacts.ErrTypeImageMissing || !ae.NonRetryable() {
		t.Errorf("bhyve boot disk without its image: %v", err)
	}

	for _, img := range []hostapi.NodeImage{stream, tarball, disk} {
		n.pull(t, img)
	}
	ctx := t.Context()
	for _, s := range []hostapi.PodSandbox{lxStream, lxTar, vm} {
		n.provision(t, s)
		if z, err := n.ops.Host.Zoneadm().Get(ctx, s.ZoneName()); err != nil || z.State != illumos.ZoneRunning {
			t.Errorf("%s: zone %+v, %v", s.Name, z, err)
		}
	}
	motd := func(s hostapi.PodSandbox) string {
		b, _ := os.ReadFile(filepath.Join(n.sim.Root, "fs", zonesPath, s.ZoneName(), "root/etc/motd"))
		return string(b)
	}
	if got := motd(lxStream); got != "from the stream\n" {
		t.Errorf("lx zone from the stream: motd %q", got)
	}
	if got := motd(lxTar); got != "from the tarball\n" {
		t.Errorf("lx zone from the tarball: motd %q", got)
	}
	if v, err := n.ops.Host.ZFS().Get(ctx, zonesDataset+"/"+lxStream.ZoneName()+"/root", "origin"); err != nil || v != imagesDataset+"/ubuntu@base" {
		t.Errorf("the lx zone is not a clone of the image: origin %q, %v", v, err)
	}

	// The VM boots from its own clone of the disk, delegated to the zone.
	vol := volumesDataset + "/" + vm.ZoneName()
	if v, err := n.ops.Host.ZFS().Get(ctx, vol, "origin"); err != nil || v != imagesDataset+"/freebsd@base" {
		t.Errorf("boot disk origin %q, %v", v, err)
	}
	dev, err := os.ReadFile(illumos.ZvolDevice(n.ops.ZvolDir, vol))
	if err != nil || !bytes.Equal(dev[:len(diskBody)], diskBody) {
		t.Errorf("the boot disk does not hold the image (err %v)", err)
	}
	info, err := n.ops.Host.Zonecfg().Info(ctx, vm.ZoneName())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.Config.Devices, []string{"/dev/zvol/rdsk/" + vol}) || info.Config.Bhyve == nil || info.Config.Bhyve.BootDisk != vol {
		t.Errorf("bhyve config devices %q bhyve %+v", info.Config.Devices, info.Config.Bhyve)
	}

	// Images in use are not removed.
	for _, img := range []hostapi.NodeImage{stream, disk} {
		_, err := n.run(t, n.host.RemoveImage, img)
		if ae := appError(t, err); ae.Type() != hostacts.ErrTypeBusy || ae.NonRetryable() {
			t.Errorf("RemoveImage %s while in use: %v", img.Name, err)
		}
	}

	for _, s := range []hostapi.PodSandbox{lxStream, lxTar, vm} {
		n.deprovision(t, s)
	}
	wantNothingLeft(t, n)
	if _, err := os.Stat(illumos.ZvolDevice(n.ops.ZvolDir, vol)); !os.IsNotExist(err) {
		t.Errorf("the boot disk's device outlived the pod: %v", err)
	}
	for _, img := range []hostapi.NodeImage{stream, tarball, disk} {
		n.twice(t, "RemoveImage "+img.Name, n.host.RemoveImage, img)
		n.wantNoImage(t, img.Name)
	}
}

// ociLayer is a gzip layer of files (name, content pairs), served by srv:
// the node's view of it and its uncompressed tar's size.
func ociLayer(t *testing.T, srv *imageServer, files ...string) hostapi.NodeLayer {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for i := 0; i+1 < len(files); i += 2 {
		tw.WriteHeader(&tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(files[i+1]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tb.Bytes())
	zw.Close()
	diff := sha256.Sum256(tb.Bytes())
	blob := srv.add("blob-"+strconv.Itoa(len(srv.files)), "", gz.Bytes())
	return hostapi.NodeLayer{Digest: "sha256:" + blob.SHA256, DiffID: "sha256:" + hex.EncodeToString(diff[:]), Size: blob.Size,
		MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", URL: blob.URL}
}

func ociNodeImage(name string, layers ...hostapi.NodeLayer) hostapi.NodeImage {
	sum := sha256.Sum256([]byte(name))
	return hostapi.NodeImage{Name: name, Kind: model.ImageOCI, SHA256: hex.EncodeToString(sum[:]), Layers: layers}
}

// An oci image is kept as one dataset per layer chain: a second image on
// the same base downloads and applies only its own layer, a pulled image
// pulls again at no cost, and a layer whose tar is not what the image's
// configuration says fails for good and leaves no layer behind.
func TestPullOCIImageSharesLayers(t *testing.T) {
	n := newNode(t)
	srv := newImageServer(t)
	base := ociLayer(t, srv, "etc/motd", "from the base\n", "etc/gone", "x\n")
	app := ociLayer(t, srv, "etc/.wh.gone", "", "app", "one\n")
	other := ociLayer(t, srv, "other", "two\n")

	first := ociNodeImage("app", base, app)
	res := n.pull(t, first)
	if res.Bytes != base.Size+app.Size || res.Artefact != imagesDataset+"/app/"+first.SHA256+"@base" {
		t.Fatalf("first image: %+v, want %d bytes and its @base", res, base.Size+app.Size)
	}
	before := srv.requests.Load()
	res = n.pull(t, ociNodeImage("other", base, other))
	if res.Bytes != other.Size || srv.requests.Load()-before != 1 {
		t.Fatalf("the second image on the same base fetched %d bytes in %d requests, want only its own layer's %d in one", res.Bytes, srv.requests.Load()-before, other.Size)
	}
	if res := n.pull(t, ociNodeImage("app", base, app)); res.Bytes != 0 {
		t.Errorf("a pulled image pulled again fetched %d bytes", res.Bytes)
	}
	var chains []string
	for _, d := range n.datasetNames(t, imagesDataset+"/layers") {
		if strings.HasSuffix(d, "@layer") {
			chains = append(chains, d)
		}
	}
	if len(chains) != 3 {
		t.Errorf("layer snapshots %v, want 3 (base, base+app, base+other)", chains)
	}
	for _, c := range chains {
		dir := filepath.Join(n.ops.ZonesDir, ".layers", strings.TrimSuffix(strings.TrimPrefix(c, imagesDataset+"/layers/"), "@layer"))
		if b, err := os.ReadFile(filepath.Join(dir, "app")); err == nil {
			if string(b) != "one\n" {
				t.Errorf("app layer: %q", b)
			}
			if _, err := os.Stat(filepath.Join(dir, "etc/gone")); !os.IsNotExist(err) {
				t.Errorf("the whiteout left etc/gone in the app layer: %v", err)
			}
		}
	}

	// (A layer whose diffID the node already holds is that layer: its
	// blob is not fetched, as in Docker; so the mismatch is one no layer has.)
	bad := ociLayer(t, srv, "bad", "three\n")
	bad.DiffID = "sha256:" + strings.Repeat("0", 64)
	_, err := n.run(t, n.host.PullImage, ociNodeImage("bad", base, bad))
	if ae := appError(t, err); ae.Type() != hostacts.ErrTypeDigestMismatch || !ae.NonRetryable() {
		t.Fatalf("a layer whose tar is not its diffID: %v, want %s", err, hostacts.ErrTypeDigestMismatch)
	}
	if got := len(n.datasetNames(t, imagesDataset+"/layers")); got != 1+3*2 {
		t.Errorf("a failed layer left datasets: %v", n.datasetNames(t, imagesDataset+"/layers"))
	}
	n.wantNoImage(t, "bad")

	// A tag that moved: the image's new digest is pulled beside the old,
	// which goes since no zone clones it.
	moved := ociNodeImage("app", base, other)
	moved.SHA256 = strings.Repeat("1", 64)
	if res := n.pull(t, moved); res.Artefact != imagesDataset+"/app/"+moved.SHA256+"@base" {
		t.Fatalf("the moved tag's digest: %+v", res)
	}
	if got := n.datasetNames(t, imagesDataset+"/app"); !slices.Contains(got, imagesDataset+"/app/"+moved.SHA256) || slices.Contains(got, imagesDataset+"/app/"+first.SHA256) {
		t.Errorf("after the tag moved: %v, want only the new digest", got)
	}

	// Removing an image prunes the layers nothing else is made from.
	layerSnaps := func() (out []string) {
		for _, d := range n.datasetNames(t, imagesDataset+"/layers") {
			if strings.HasSuffix(d, "@layer") {
				out = append(out, d)
			}
		}
		return out
	}
	for _, step := range []struct {
		image string
		left  int
	}{{"other", 2}, {"app", 0}} { // (the moved app is base+other: other's layers stay until app goes)
		if _, err := n.run(t, n.host.RemoveImage, hostapi.NodeImage{Name: step.image}); err != nil {
			t.Fatal(err)
		}
		if got := layerSnaps(); len(got) != step.left {
			t.Errorf("after removing %s: layers %v, want %d", step.image, got, step.left)
		}
	}
}
