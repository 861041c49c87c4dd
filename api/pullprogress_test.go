package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/imagestore"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// progressWrite is one write of a node's progress, as a trigger saw it.
type progressWrite struct {
	node        string
	done, total int64
}

// pullProgressAPI serves the API with an image store holding image
// "big"'s artefact (size bytes) and the layer blobs of oci image "layered"
// (two layers of size/2), nodes n1, n2 and n3 pulling both, and a trigger
// that notes every write of a pull's progress. The header testNodeHeader
// stands in for the node's certificate.
func pullProgressAPI(t *testing.T, size int) (*client, *store.Store, func(node string) []progressWrite) {
	t.Helper()
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	images := &imagestore.Store{Dir: t.TempDir(), Sources: imagestore.Sources{FileDir: t.TempDir()}}
	c := serveConfig(t, url, api.Config{ImageMap: &imagemap.Map{}, Artefacts: images, PullProgressEvery: 200 * time.Millisecond,
		RequestingNode: func(c *gin.Context) (string, bool) { n := c.GetHeader(testNodeHeader); return n, n != "" }})
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)

	r := rand.New(rand.NewPCG(7, 8))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(r.IntN(256))
	}
	publish := func(name string, b []byte) string {
		sum := sha256.Sum256(b)
		file := filepath.Join(images.Sources.FileDir, name)
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := images.Fetch(ctx, imagestore.FetchRequest{Name: name, URL: "file://" + file, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		if _, err := images.Publish(ctx, name); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(sum[:])
	}
	publish("big", data)
	oci := &model.OCIImage{Digest: "sha256:" + strings.Repeat("a", 64)}
	for _, half := range [][]byte{data[:size/2], data[size/2:]} {
		sum := sha256.Sum256(half)
		publish(imagestore.BlobName(hex.EncodeToString(sum[:])), half)
		oci.Layers = append(oci.Layers, model.OCILayer{Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(half))})
	}
	for _, img := range []*model.Image{
		{Metadata: model.ObjectMeta{Name: "big"}, Spec: model.ImageSpec{Kind: model.ImageLXTarball},
			Status: model.ImageStatus{Phase: model.ImageReady, ArtefactSize: int64(size)}},
		{Metadata: model.ObjectMeta{Name: "layered"}, Spec: model.ImageSpec{Kind: model.ImageOCI, Source: "registry.example/layered:1"},
			Status: model.ImageStatus{Phase: model.ImageReady, ArtefactSize: int64(size), OCI: oci}},
	} {
		if err := st.Images().Create(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		if err := st.Nodes().Create(ctx, &model.Node{Metadata: model.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
		for _, img := range []string{"big", "layered"} {
			if _, _, err := st.SetImageNode(ctx, img, model.ImageNodeStatus{Node: n, Phase: model.ImagePulling}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := st.Pool().Exec(ctx, `CREATE TABLE progress_writes (seq bigserial, image text, node text, done bigint, total bigint);
		CREATE FUNCTION note_progress() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			IF NEW.bytes_done <> OLD.bytes_done OR NEW.bytes_total <> OLD.bytes_total THEN
				INSERT INTO progress_writes (image, node, done, total) VALUES (NEW.image, NEW.node, NEW.bytes_done, NEW.bytes_total);
			END IF;
			RETURN NEW; END $$;
		CREATE TRIGGER note_progress AFTER UPDATE ON image_node_status FOR EACH ROW EXECUTE FUNCTION note_progress()`); err != nil {
		t.Fatal(err)
	}
	seen := 0
	// writes returns those since its last call up to one of node that
	// is complete: a download's last write follows its last byte.
	writes := func(node string) []progressWrite {
		t.Helper()
		var out []progressWrite
		deadline := time.Now().Add(30 * time.Second)
		for {
			rows, err := st.Pool().Query(ctx, "SELECT node, done, total FROM progress_writes ORDER BY seq OFFSET $1", seen+len(out))
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var w progressWrite
				if err := rows.Scan(&w.node, &w.done, &w.total); err != nil {
					t.Fatal(err)
				}
				out = append(out, w)
			}
			rows.Close()
			if n := len(out); n > 0 && out[n-1].node == node && out[n-1].done == out[n-1].total {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no complete write of %s's download: %+v", node, out)
			}
			time.Sleep(20 * time.Millisecond)
		}
		seen += len(out)
		return out
	}
	return c, st, writes
}

// download GETs path as node (none: not a node), from byte from on,
// reading slowly when slow is set, and returns what it read.
func (c *client) download(node, path string, from int64, slow bool) int64 {
	c.t.Helper()
	req, err := http.NewRequest("GET", c.base+path, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if node != "" {
		req.Header.Set(testNodeHeader, node)
	}
	if from > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", from))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		c.t.Fatalf("GET %s: %s", path, resp.Status)
	}
	var n int64
	buf := make([]byte, 256<<10)
	for {
		k, err := io.ReadFull(resp.Body, buf)
		n += int64(k)
		if err != nil {
			break
		}
		if slow {
			time.Sleep(25 * time.Millisecond)
		}
	}
	return n
}

func (c *client) imageNode(image, node string) model.ImageNodeStatus {
	c.t.Helper()
	var img model.Image
	if r := c.json("GET", "/api/v1/images/"+image, nil); r.code != http.StatusOK || json.Unmarshal(r.body, &img) != nil {
		c.t.Fatalf("GET image %s: %d %s", image, r.code, r.body)
	}
	ns, _ := img.Status.Node(node)
	return ns
}

// A node's download through the real handler is recorded in its own row
// of the image's status: at once with the total, then at most once per
// interval, and complete at its end; a resumed one counts from its range.
// (Serve the artefact with c.Writer instead of the progressWriter in
// imageArtefact to see every check fail; make record ignore the interval
// to see the throttle's fail.)
func TestPullProgressIsRecordedPerNodeThrottled(t *testing.T) {
	const size = 24 << 20
	c, _, writes := pullProgressAPI(t, size)

	start := time.Now()
	if got := c.download("n1", "/api/v1/images/big/artefact", 0, true); got != size {
		t.Fatalf("downloaded %d bytes, want %d", got, size)
	}
	took := time.Since(start)
	ws := writes("n1")
	var between int
	for i, w := range ws {
		if w.node != "n1" || w.total != size {
			t.Fatalf("write %d is %+v: n1's, of %d bytes, expected", i, w, size)
		}
		if i > 0 && w.done < ws[i-1].done {
			t.Errorf("progress went back: %+v", ws)
		}
		if w.done > 0 && w.done < size {
			between++
		}
	}
	if between < 2 {
		t.Errorf("a download of %s shows %d values between none and all: %+v", took, between, ws)
	}
	// One write per interval, besides the first and the last.
	if limit := int(took/(200*time.Millisecond)) + 3; len(ws) > limit {
		t.Errorf("%d writes in %s, more than once per 200ms (%d): %+v", len(ws), took, limit, ws)
	}
	if ns := c.imageNode("big", "n1"); ns.BytesDone != size || ns.BytesTotal != size || ns.Phase != model.ImagePulling {
		t.Errorf("n1 after its download: %+v, want Pulling with %d of %d bytes", ns, size, size)
	}
	if ns := c.imageNode("big", "n2"); ns.BytesDone != 0 || ns.BytesTotal != 0 {
		t.Errorf("n1's download moved n2's progress: %+v", ns)
	}

	// n2 resumes a download halfway: it begins there.
	c.download("n2", "/api/v1/images/big/artefact", size/2, true)
	ws = writes("n2")
	if !writesFrom(ws, "n2", size/2, size) || len(ws) < 2 {
		t.Errorf("a resumed download from %d: writes %+v, want from %d to %d of n2", size/2, ws, size/2, size)
	}

	// A caller that is no node writes nothing: the writes up to the end
	// of the next download (n1's last byte again) are that one's alone.
	c.download("", "/api/v1/images/big/artefact", 0, false)
	c.download("n3", "/api/v1/images/big/artefact", size-1, false)
	if ws := writes("n3"); !writesFrom(ws, "n3", size-1, size) {
		t.Errorf("a download by no node wrote progress: %+v", ws)
	}
}

// writesFrom says whether ws are all node's, none below from, of total
// bytes, the last complete. The writer keeps only the latest value, so
// which values between come is not known.
func writesFrom(ws []progressWrite, node string, from, total int64) bool {
	for _, w := range ws {
		if w.node != node || w.done < from || w.total != total {
			return false
		}
	}
	return len(ws) > 0 && ws[len(ws)-1].done == total
}

// downloadWhileLocked downloads path as n1 while another transaction
// holds what the statement lock locks, and says whether the download
// finished within a minute of it; the lock is gone when it returns.
func downloadWhileLocked(t *testing.T, c *client, st *store.Store, lock, path string) (n int64, finished bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, lock); err != nil {
		t.Fatal(err)
	}
	got := make(chan int64, 1)
	go func() { got <- c.download("n1", path, 0, false) }()
	select {
	case n = <-got:
		finished = true
	case <-time.After(time.Minute):
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if !finished {
		n = <-got // it ends once the lock has gone
	}
	return n, finished
}

// A database that holds up the progress writes does not hold up the
// download: with n1's row locked by another transaction the whole image
// still arrives, and its last value is written once the lock goes. (Call
// SetImageNodeProgress in record instead of handing the value to
// writePullProgress to see it fail: every write of the download then
// waits out its 5 s bound.)
func TestPullDownloadFlowsWhileItsProgressWriteWaits(t *testing.T) {
	const size = 24 << 20
	c, st, writes := pullProgressAPI(t, size)
	if n, ok := downloadWhileLocked(t, c, st, "SELECT 1 FROM image_node_status WHERE image = 'big' AND node = 'n1' FOR UPDATE",
		"/api/v1/images/big/artefact"); !ok || n != size {
		t.Errorf("while its progress write waited for a lock: downloaded %d bytes (finished %v), want %d", n, ok, size)
	}
	if ws := writes("n1"); !writesFrom(ws, "n1", 0, size) {
		t.Errorf("after the lock: writes %+v, want n1's ending at %d", ws, size)
	}
}

// An oci image's layers are downloads of their own: each counts on top
// of the layers below it, of the whole image's size.
func TestLayerDownloadsAddUpToTheImagesProgress(t *testing.T) {
	const size = 8 << 20
	c, st, writes := pullProgressAPI(t, size)
	img, err := st.Images().Get(context.Background(), "", "layered")
	if err != nil {
		t.Fatal(err)
	}
	top := img.Status.OCI.Layers[1]
	blob := imagestore.BlobName(strings.TrimPrefix(top.Digest, "sha256:"))
	c.download("n1", "/api/v1/images/"+blob+"/artefact?image=layered", 0, false)
	if ws := writes("n1"); !writesFrom(ws, "n1", size/2, size) {
		t.Errorf("the top layer's download: writes %+v, want from %d to %d of %d", ws, size/2, size, size)
	}
	// A blob the image does not list, or no image named: nothing (the
	// writes up to the end of n1's next download are that one's alone).
	c.download("n2", "/api/v1/images/"+blob+"/artefact", 0, false)
	c.download("n2", "/api/v1/images/"+blob+"/artefact?image=big", 0, false)
	c.download("n1", "/api/v1/images/big/artefact", size-1, false)
	if ws := writes("n1"); !writesFrom(ws, "n1", size-1, size) {
		t.Errorf("a blob of no pull's image wrote progress: %+v", ws)
	}
}

// A layer's download reads the image's layers alone, not the whole
// image with its state on every node: while another transaction holds
// image_node_status locked, a layer still downloads, and its progress is
// written once the lock goes. (Read the image with Images().Get in
// startPullProgress to see it fail: the download then waits for the lock.)
func TestLayerDownloadReadsOnlyTheImagesLayers(t *testing.T) {
	const size = 8 << 20
	c, st, writes := pullProgressAPI(t, size)
	ctx := context.Background()
	layers, err := st.ImageLayers(ctx, "layered")
	if err != nil || len(layers) != 2 {
		t.Fatalf("layers: %+v, %v", layers, err)
	}
	blob := imagestore.BlobName(strings.TrimPrefix(layers[1].Digest, "sha256:"))
	if n, ok := downloadWhileLocked(t, c, st, "LOCK TABLE image_node_status IN ACCESS EXCLUSIVE MODE",
		"/api/v1/images/"+blob+"/artefact?image=layered"); !ok || n != size/2 {
		t.Errorf("while the images' node states were locked: downloaded %d bytes (finished %v), want %d", n, ok, size/2)
	}
	if ws := writes("n1"); !writesFrom(ws, "n1", size/2, size) {
		t.Errorf("after the lock: writes %+v, want n1's from %d to %d", ws, size/2, size)
	}
}

// A pod waiting for its image's pull shows the pull's progress to its
// node in its message, read when the pod is read; once Ready the image's
// node status is complete. (Drop withPullProgress in getPod and listPods
// to see it fail.)
func TestWaitingPodShowsItsPullsProgress(t *testing.T) {
	const size = 4 << 20
	c, st, _ := pullProgressAPI(t, size)
	ctx := context.Background()
	if r := c.json("POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"web"},"spec":{"runtimeClassName":"lx","nodeName":"n1",
		"containers":[{"name":"app","image":"big","command":["sleep","60"]}]}}`); r.code != http.StatusCreated {
		t.Fatalf("create pod: %d %s", r.code, r.body)
	}
	const waiting = "pulling image big to node n1"
	if _, err := st.Pods().Modify(ctx, "default", "web", func(p *model.Pod) bool {
		p.Status.Phase, p.Status.Reason, p.Status.Message = model.PodPending, podcontract.ReasonImagePulling, waiting
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetImageNodeProgress(ctx, "big", "n1", size*3/8, size); err != nil {
		t.Fatal(err)
	}
	want := waiting + ": 1.5 MiB of 4.0 MiB (37%)"
	var p model.Pod
	if r := c.json("GET", "/api/v1/namespaces/default/pods/web", nil); json.Unmarshal(r.body, &p) != nil || p.Status.Message != want {
		t.Errorf("GET of the waiting pod: message %q, want %q", p.Status.Message, want)
	}
	var list model.List[model.Pod]
	if r := c.json("GET", "/api/v1/namespaces/default/pods", nil); json.Unmarshal(r.body, &list) != nil || len(list.Items) != 1 || list.Items[0].Status.Message != want {
		t.Errorf("list of the waiting pod: %+v, want its message %q", list.Items, want)
	}
	stored, err := st.Pods().Get(ctx, "default", "web")
	if err != nil || stored.Status.Message != waiting {
		t.Errorf("the stored message changed: %q (%v)", stored.Status.Message, err)
	}

	// Ready: the node's progress is complete, and a late report of a
	// download changes it no more.
	if _, _, err := st.SetImageNode(ctx, "big", model.ImageNodeStatus{Node: "n1", Phase: model.ImageReady}); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.SetImageNodeProgress(ctx, "big", "n1", 1, size); ok || err != nil {
		t.Errorf("a report after Ready was taken: %v %v", ok, err)
	}
	if ns := c.imageNode("big", "n1"); ns.BytesDone != size || ns.BytesTotal != size {
		t.Errorf("n1 Ready: %+v, want %d of %d bytes", ns, size, size)
	}
	// A new pull starts afresh.
	if _, _, err := st.SetImageNode(ctx, "big", model.ImageNodeStatus{Node: "n1", Phase: model.ImagePulling}); err != nil {
		t.Fatal(err)
	}
	if ns := c.imageNode("big", "n1"); ns.BytesDone != 0 || ns.BytesTotal != 0 {
		t.Errorf("n1 pulling again: %+v, want no progress yet", ns)
	}
}
