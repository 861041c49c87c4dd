package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/imagestore"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// DefaultPullProgressEvery is how often a node's download of an image is
// recorded in the image's status (status.nodes[].bytesDone).
const DefaultPullProgressEvery = time.Second

// A node's pull of an image is measured where its bytes leave: the
// artefact (or layer blob) download this server answers, for the node
// of the request's certificate. What it has sent is written to the node's
// row of the image (store.SetImageNodeProgress), at most once per
// pullProgressEvery for each image and node whatever the downloads, and
// once more when a download ends; nothing goes through Temporal. Any
// replica serving a download writes its progress, and a restart loses at
// most the last interval. The writes are made off the download's path,
// by a goroutine for each image and node that keeps only the latest
// value: a slow database slows the progress shown, never the bytes.

// pullWrites holds the progress writes of each image on each node: an
// oci pull is a download per layer, and they share one writer.
type pullWrites struct {
	mu   sync.Mutex
	last map[store.ImageOnNode]*pullWrite
}

// pullWrite is the progress of one image on one node waiting to be
// written by writePullProgress, which runs while downloads of it do.
type pullWrite struct {
	downloads   int   // under way, for this image and node
	done, total int64 // the latest progress
	pending     bool  // done is not written yet
	urgent      bool  // done is a download's end or the image's last byte: written without waiting
	written     int64 // what was written last; -1: nothing yet for these downloads
	wake        chan struct{}
}

// pullDownload is one download's progress: what it adds to the bytes
// before it (the layers below a layer), of the image's total.
type pullDownload struct {
	s      *Server
	key    store.ImageOnNode
	before int64 // bytes of the image before this download (lower layers)
	total  int64 // the image's total; 0: this download's whole size

	mu      sync.Mutex
	counted bool  // a whole body or a single range: its bytes count
	start   int64 // the range's first byte
	sent    int64
}

// startPullProgress returns the download's progress recorder for a node's
// GET of an artefact (name) or of a layer blob of image (the layer URL's
// ?image=), or nil when nothing is to be recorded.
func (s *Server) startPullProgress(ctx context.Context, node, name, image string) *pullDownload {
	d := &pullDownload{s: s, key: store.ImageOnNode{Image: name, Node: node}}
	if strings.HasPrefix(name, model.ReservedImagePrefix) {
		layers, err := s.store.ImageLayers(ctx, image)
		if err != nil {
			return nil
		}
		d.key.Image = image
		found := false
		for _, l := range layers {
			if !found && imagestore.BlobName(strings.TrimPrefix(l.Digest, "sha256:")) == name {
				found, d.before = true, d.total
			}
			d.total += l.Size
		}
		if !found {
			return nil
		}
	}
	w := &s.pullWrites
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[store.ImageOnNode]*pullWrite{}
	}
	p := w.last[d.key]
	if p == nil {
		p = &pullWrite{wake: make(chan struct{}, 1)}
		w.last[d.key] = p
		go s.writePullProgress(context.WithoutCancel(ctx), d.key, p)
	}
	p.downloads++
	p.written = -1
	return d
}

// writePullProgress writes p's latest progress as it changes, at most
// once per interval but at once when urgent, until p's downloads have
// ended and their last value is written.
func (s *Server) writePullProgress(ctx context.Context, key store.ImageOnNode, p *pullWrite) {
	w := &s.pullWrites
	var at time.Time // of the last write
	for {
		w.mu.Lock()
		if !p.pending {
			if p.downloads <= 0 {
				delete(w.last, key)
				w.mu.Unlock()
				return
			}
			w.mu.Unlock()
			<-p.wake
			continue
		}
		if wait := time.Until(at.Add(s.pullProgressEvery)); !p.urgent && wait > 0 {
			w.mu.Unlock()
			select {
			case <-p.wake: // an urgent value cuts the wait short
			case <-time.After(wait):
			}
			continue
		}
		done, total := p.done, p.total
		p.pending, p.urgent, p.written = false, false, done
		w.mu.Unlock()

		at = time.Now()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := s.store.SetImageNodeProgress(wctx, key.Image, key.Node, min(done, total), total); err != nil {
			s.log.Warn("could not record an image pull's progress", "image", key.Image, "node", key.Node, "err", err)
		}
		cancel()
	}
}

// begin reads the response's header: a whole body counts from 0, a single
// range (a resumed download) from its first byte.
func (d *pullDownload) begin(code int, h http.Header) {
	var start, size int64
	var err error
	switch code {
	case http.StatusOK:
		size, err = strconv.ParseInt(h.Get("Content-Length"), 10, 64)
	case http.StatusPartialContent:
		// "bytes 100-199/1000"; a multipart answer has none.
		var end int64
		_, err = fmt.Sscanf(h.Get("Content-Range"), "bytes %d-%d/%d", &start, &end, &size)
	default:
		return
	}
	if err != nil || size <= 0 {
		return
	}
	d.mu.Lock()
	d.counted, d.start = true, start
	if d.total == 0 {
		d.total = size
	}
	d.mu.Unlock()
	d.record(false)
}

func (d *pullDownload) add(n int) {
	d.mu.Lock()
	d.sent += int64(n)
	d.mu.Unlock()
	d.record(false)
}

// end records what the download sent in all, even when its request has
// ended (the node went away), and lets the writer stop once it is written.
func (d *pullDownload) end() {
	d.record(true)
	w := &d.s.pullWrites
	w.mu.Lock()
	defer w.mu.Unlock()
	if p := w.last[d.key]; p != nil {
		p.downloads--
		wake(p)
	}
}

// record hands the progress to the writer, without waiting: it is
// written within an interval, and at once at a download's end and at the
// image's last byte.
func (d *pullDownload) record(final bool) {
	d.mu.Lock()
	counted, done, total := d.counted, d.before+d.start+d.sent, d.total
	d.mu.Unlock()
	if !counted {
		return
	}
	w := &d.s.pullWrites
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.last[d.key]
	if p == nil || (done == p.written && !p.pending) {
		return
	}
	p.done, p.total, p.pending = done, total, true
	p.urgent = p.urgent || final || done >= total
	wake(p)
}

// wake tells p's writer that p changed; a wake-up it has not taken yet
// covers this one.
func wake(p *pullWrite) {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// progressWriter passes a download's response through, counting it.
type progressWriter struct {
	http.ResponseWriter
	d           *pullDownload
	wroteHeader bool
}

func (w *progressWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		w.d.begin(code, w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *progressWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.d.add(n)
	return n, err
}

// withPullProgress adds to the message of each pod waiting for its image
// to be pulled (reason ImagePulling) how far the pull to its node has
// got, read from the image's status on that node: the pod's own status
// is not rewritten as the bytes go.
func (s *Server) withPullProgress(ctx context.Context, pods ...*model.Pod) {
	var pairs []store.ImageOnNode
	for _, p := range pods {
		if k, ok := pullWaitedFor(p); ok {
			pairs = append(pairs, k)
		}
	}
	if len(pairs) == 0 {
		return
	}
	states, err := s.store.ImageNodeStates(ctx, pairs)
	if err != nil {
		s.log.Warn("could not read image pulls' progress", "err", err)
		return
	}
	for _, p := range pods {
		k, ok := pullWaitedFor(p)
		if !ok {
			continue
		}
		if ns, ok := states[k]; ok && ns.Phase == model.ImagePulling && ns.BytesTotal > 0 {
			p.Status.Message += ": " + pullProgress(ns.BytesDone, ns.BytesTotal)
		}
	}
}

// pullWaitedFor is the image and node a pod waits for, if it waits for a
// pull.
func pullWaitedFor(p *model.Pod) (store.ImageOnNode, bool) {
	if p.Status.Phase != model.PodPending || p.Status.Reason != podcontract.ReasonImagePulling ||
		p.Spec.NodeName == "" || len(p.Spec.Containers) == 0 {
		return store.ImageOnNode{}, false
	}
	return store.ImageOnNode{Image: p.Spec.Containers[0].Image, Node: p.Spec.NodeName}, true
}

// pullProgress says how far a download has got: "45.0 MiB of 120.0 MiB (37%)".
func pullProgress(done, total int64) string {
	return fmt.Sprintf("%s of %s (%d%%)", mebibytes(done), mebibytes(total), done*100/max(total, 1))
}

func mebibytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
