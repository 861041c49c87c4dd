package hostops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/model"
)

const (
	// baseSnapshot is the golden snapshot clones are made from.
	baseSnapshot = "base"
	// digestProp marks a complete image dataset with its artefact's digest;
	// it is set last, so a dataset without it is a partial pull.
	digestProp = "zonewright:sha256"
	// volBlockSize is the block size of image volumes (zfs's default).
	volBlockSize = 8192
)

// imageDataset is the dataset of a stream or disk image.
func (h *Host) imageDataset(name string) (string, error) {
	return names.DatasetName(h.ImagesDataset, name)
}

// imageSnapshot is the golden snapshot of a stream or disk image.
func (h *Host) imageSnapshot(name string) (string, error) {
	ds, err := h.imageDataset(name)
	if err != nil {
		return "", err
	}
	return ds + "@" + baseSnapshot, nil
}

// tarballPath is where an lx tarball image lives; its digest is kept in
// tarballPath + ".sha256", written once the tarball is complete.
func (h *Host) tarballPath(name string) string { return filepath.Join(h.ImageDir, name+".tar") }

func checkImage(in hostapi.NodeImage) error {
	if errs := model.ValidateName("name", in.Name); len(errs) > 0 {
		return fmt.Errorf("image name %q: %v", in.Name, errs)
	}
	switch in.Kind {
	case model.ImageZoneTemplate:
		return nil
	case model.ImageOCI:
		if b, err := hex.DecodeString(in.SHA256); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("image %s: manifest digest %q is not 64 hex digits", in.Name, in.SHA256)
		}
		return checkLayers(in)
	case model.ImageZFSStream, model.ImageLXTarball, model.ImageBhyveDisk:
	default:
		return fmt.Errorf("image %s: unknown kind %q", in.Name, in.Kind)
	}
	if b, err := hex.DecodeString(in.SHA256); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("image %s: sha256 %q is not 64 hex digits", in.Name, in.SHA256)
	}
	if in.Size <= 0 {
		return fmt.Errorf("image %s: size %d must be positive", in.Name, in.Size)
	}
	if !strings.HasPrefix(in.URL, "http://") && !strings.HasPrefix(in.URL, "https://") {
		return fmt.Errorf("image %s: URL %q is not http(s)", in.Name, in.URL)
	}
	return nil
}

// PullImage downloads the image from the control plane and installs it
// where its kind needs it: a ZFS stream is received into
// <ImagesDataset>/<name> with a golden @base snapshot; an lx tarball
// becomes <ImageDir>/<name>.tar; a bhyve disk is written into the volume
// <ImagesDataset>/<name>, then snapshotted @base. A zone template has
// nothing to fetch. The download is streamed, never held whole, its
// sha256 computed on the way and its progress reported (ImagePullProgress).
//
// Idempotent: an image already complete with the same digest returns at
// once; a partial one (a crash, a dropped download) is removed and pulled
// again. A digest or size mismatch is a *DigestMismatchError and leaves
// nothing behind; a failed download is a *DownloadError that leaves
// nothing half-installed.
func (h *Host) PullImage(ctx context.Context, in hostapi.NodeImage) (hostapi.NodeImageResult, error) {
	if err := checkImage(in); err != nil {
		return hostapi.NodeImageResult{}, h.imageInvalid(ctx, in, err)
	}
	if in.Kind == model.ImageZoneTemplate {
		return hostapi.NodeImageResult{}, nil
	}
	unlock, err := h.lockZone(ctx, "image/"+in.Name)
	if err != nil {
		return hostapi.NodeImageResult{}, h.imageFail(ctx, "pull", in, err)
	}
	defer unlock()
	start := time.Now()
	var res hostapi.NodeImageResult
	switch in.Kind {
	case model.ImageLXTarball:
		res, err = h.pullTarball(ctx, in)
	case model.ImageOCI:
		// One oci pull at a time on a node, none while layers are pruned:
		// a layer between its pull and the clone above it has no clone to
		// keep it.
		var unlockLayers func()
		if unlockLayers, err = h.lockZone(ctx, layersLock); err == nil {
			res, err = h.pullLayers(ctx, in)
			unlockLayers()
		}
	default:
		res, err = h.pullDataset(ctx, in)
	}
	if ctx.Err() == nil { // not a pull cut short by a cancel
		h.Metrics.ImagePulled(err == nil, time.Since(start))
	}
	if err != nil {
		return hostapi.NodeImageResult{}, h.imageFail(ctx, "pull", in, err)
	}
	h.log().Info("image pulled", "image", in.Name, "kind", in.Kind, "artefact", res.Artefact, "bytes", res.Bytes,
		"took", time.Since(start).Round(time.Millisecond))
	return res, nil
}

// pullDataset pulls a zfs-stream or bhyve-disk image into its dataset.
func (h *Host) pullDataset(ctx context.Context, in hostapi.NodeImage) (hostapi.NodeImageResult, error) {
	zfs := h.Host.ZFS()
	ds, err := h.imageDataset(in.Name)
	if err != nil {
		return hostapi.NodeImageResult{}, err
	}
	snap := ds + "@" + baseSnapshot
	done := hostapi.NodeImageResult{Artefact: snap, Bytes: in.Size}
	if ok, err := h.complete(ctx, ds, digestProp, in.SHA256, snap); err != nil || ok {
		return done, err
	}

	body, err := h.download(ctx, in)
	if err != nil {
		return hostapi.NodeImageResult{}, err
	}
	defer body.Close()
	stop := h.progressBeats(ctx, body)
	defer stop()
	if in.Kind == model.ImageZFSStream {
		err = zfs.Receive(ctx, ds, body, illumos.ReceiveOptions{NoMount: true})
	} else {
		err = h.writeVolume(ctx, ds, in, body)
	}
	if err == nil {
		err = body.finish(in)
	}
	if err == nil {
		err = h.ensureBase(ctx, ds)
	}
	if err == nil {
		err = zfs.Set(ctx, ds, map[string]string{digestProp: in.SHA256})
	}
	if err != nil {
		if derr := body.failure(); derr != nil {
			err = derr // the download, not the command it starved, is the cause
		}
		h.cleanup(ctx, in, func(ctx context.Context) error {
			if err := zfs.Destroy(ctx, ds); err != nil && !errors.Is(err, illumos.ErrNotFound) {
				return err
			}
			return nil
		})
		return hostapi.NodeImageResult{}, err
	}
	return done, nil
}

// writeVolume creates the image's volume, sized to the artefact rounded up
// to the block size, and writes the artefact through its device.
func (h *Host) writeVolume(ctx context.Context, vol string, in hostapi.NodeImage, r io.Reader) error {
	size := (uint64(in.Size) + volBlockSize - 1) / volBlockSize * volBlockSize
	if err := h.Host.ZFS().CreateVolume(ctx, vol, size, nil); err != nil {
		return err
	}
	dev := illumos.ZvolDevice(h.ZvolDir, vol)
	var f *os.File
	var err error
	// The device node appears shortly after zfs create returns.
	for range 50 {
		if f, err = os.OpenFile(dev, os.O_WRONLY, 0); !errors.Is(err, os.ErrNotExist) {
			break
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if err != nil {
		return fmt.Errorf("open the volume device: %w", err)
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write the image to %s: %w", dev, err)
	}
	return nil
}

// ensureBase makes sure the golden @base snapshot exists (a received
// stream brings the snapshot it was sent from, which may have another
// name).
func (h *Host) ensureBase(ctx context.Context, ds string) error {
	zfs := h.Host.ZFS()
	ok, err := zfs.Exists(ctx, ds+"@"+baseSnapshot)
	if err != nil || ok {
		return err
	}
	return zfs.Snapshot(ctx, ds, baseSnapshot)
}

// pullTarball pulls an lx tarball into ImageDir: a temp file renamed into
// place once verified, then the digest sidecar.
func (h *Host) pullTarball(ctx context.Context, in hostapi.NodeImage) (hostapi.NodeImageResult, error) {
	final := h.tarballPath(in.Name)
	done := hostapi.NodeImageResult{Artefact: final, Bytes: in.Size}
	if b, err := os.ReadFile(final + ".sha256"); err == nil && strings.TrimSpace(string(b)) == in.SHA256 {
		if fi, err := os.Stat(final); err == nil && fi.Size() == in.Size {
			return done, nil
		}
	}
	if err := h.removeTarball(in.Name); err != nil {
		return hostapi.NodeImageResult{}, err
	}
	if err := os.MkdirAll(h.ImageDir, 0o755); err != nil {
		return hostapi.NodeImageResult{}, err
	}
	body, err := h.download(ctx, in)
	if err != nil {
		return hostapi.NodeImageResult{}, err
	}
	defer body.Close()
	stop := h.progressBeats(ctx, body)
	defer stop()
	tmp, err := os.CreateTemp(h.ImageDir, "."+in.Name+".tar.partial-*")
	if err != nil {
		return hostapi.NodeImageResult{}, err
	}
	_, err = io.Copy(tmp, body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = body.finish(in)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), final)
	}
	if err == nil {
		err = writeFileAtomic(final+".sha256", []byte(in.SHA256+"\n"))
	}
	if err != nil {
		os.Remove(tmp.Name())
		os.Remove(final)
		if derr := body.failure(); derr != nil {
			err = derr
		}
		return hostapi.NodeImageResult{}, err
	}
	return done, nil
}

// removeTarball removes a tarball image, its sidecar and partial files.
func (h *Host) removeTarball(name string) error {
	final := h.tarballPath(name)
	partials, _ := filepath.Glob(filepath.Join(h.ImageDir, "."+name+".tar.partial-*"))
	for _, p := range append([]string{final + ".sha256", final}, partials...) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// RemoveImage removes the image from the node, whatever of it is there
// (its dataset with snapshots, its volume, its tarball and partial files);
// removing an absent image succeeds. While zones (or pod volumes) are
// clones of the image it is refused with an *ImageInUseError.
func (h *Host) RemoveImage(ctx context.Context, in hostapi.NodeImage) error {
	if errs := model.ValidateName("name", in.Name); len(errs) > 0 {
		return h.imageInvalid(ctx, in, fmt.Errorf("image name %q: %v", in.Name, errs))
	}
	unlock, err := h.lockZone(ctx, "image/"+in.Name)
	if err != nil {
		return h.imageFail(ctx, "remove", in, err)
	}
	defer unlock()
	ds, err := h.imageDataset(in.Name)
	if err != nil {
		return h.imageInvalid(ctx, in, err)
	}
	err = h.Host.ZFS().Destroy(ctx, ds)
	switch {
	case err == nil, errors.Is(err, illumos.ErrNotFound):
	case errors.Is(err, illumos.ErrWrongState), errors.Is(err, illumos.ErrBusy):
		return &Error{What: fmt.Sprintf("remove image %s from node %s", in.Name, h.Node), Err: &ImageInUseError{Err: err}}
	default:
		return h.imageFail(ctx, "remove", in, err)
	}
	if err := h.removeTarball(in.Name); err != nil {
		return h.imageFail(ctx, "remove", in, err)
	}
	if err := h.pruneLayers(ctx); err != nil {
		return h.imageFail(ctx, "remove", in, err)
	}
	h.log().Info("image removed", "image", in.Name)
	return nil
}

// progressBeats reports the download's progress every heartbeat
// interval until stop is called; the first beat comes after one interval,
// so that it already tells how far the download got. A download that
// makes no progress for the stall timeout is ended: a slow transfer goes
// on, a stalled one fails (a *DownloadError) instead of reporting forever.
func (h *Host) progressBeats(ctx context.Context, b *imageBody) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		interval := min(h.heartbeatInterval(), h.stallTimeout()/4)
		t := time.NewTicker(interval)
		defer t.Stop()
		// A beat carries news: the bytes moved since the last one (so the
		// first beat a heartbeating caller sends, unthrottled, shows
		// progress), or after four quiet intervals that the pull is still
		// alive.
		last, lastMove, lastBeat, beaten := int64(-1), time.Now(), time.Now(), int64(0)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				p := b.progress()
				if p.Bytes != last {
					last, lastMove = p.Bytes, now
				} else if now.Sub(lastMove) >= h.stallTimeout() {
					b.cancel(fmt.Errorf("download stalled: no data for %s after %d of %d bytes", h.stallTimeout(), p.Bytes, p.Total))
					return
				}
				if since := now.Sub(lastBeat); since >= h.heartbeatInterval() && (p.Bytes != beaten || since >= 4*h.heartbeatInterval()) {
					beat(ctx, p)
					lastBeat, beaten = now, p.Bytes
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (h *Host) stallTimeout() time.Duration {
	if h.DownloadStallTimeout > 0 {
		return h.DownloadStallTimeout
	}
	return time.Minute
}

// imageBody is the download's body: it counts and hashes what is read and
// remembers a read error (a dropped connection).
type imageBody struct {
	body   io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc // ends the request (a stall)
	name   string
	hash   hash.Hash
	n      atomic.Int64
	total  int64
	err    atomic.Pointer[DownloadError] // read by the command's stdin copier
	// downloaded is told the bytes read, once, on Close.
	downloaded func(int64)
	closed     atomic.Bool
}

func (b *imageBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.hash.Write(p[:n])
	b.n.Add(int64(n))
	if err != nil && !errors.Is(err, io.EOF) {
		if cause := context.Cause(b.ctx); cause != nil {
			err = cause
		}
		b.err.CompareAndSwap(nil, &DownloadError{fmt.Errorf("download of image %s failed after %d of %d bytes: %w", b.name, b.n.Load(), b.total, err)})
	}
	return n, err
}

func (b *imageBody) Close() error {
	err := b.body.Close()
	b.cancel(nil)
	if b.closed.CompareAndSwap(false, true) && b.downloaded != nil {
		b.downloaded(b.n.Load())
	}
	return err
}

// failure is the download's error, or nil while it has none.
func (b *imageBody) failure() error {
	if e := b.err.Load(); e != nil {
		return e
	}
	return nil
}

func (b *imageBody) progress() hostapi.ImagePullProgress {
	return hostapi.ImagePullProgress{Image: b.name, Bytes: b.n.Load(), Total: b.total}
}

// finish reads what the consumer left (zfs receive stops at the stream's
// end record) and checks size and digest.
func (b *imageBody) finish(in hostapi.NodeImage) error {
	if _, err := io.Copy(io.Discard, b); err != nil {
		return b.failure()
	}
	got := hex.EncodeToString(b.hash.Sum(nil))
	if b.n.Load() != in.Size || got != in.SHA256 {
		return &DigestMismatchError{fmt.Sprintf("image %s: got %d bytes with sha256 %s, want %d bytes with sha256 %s",
			in.Name, b.n.Load(), got, in.Size, in.SHA256)}
	}
	return nil
}

// download starts the GET of the artefact, authorised by the node's
// certificate on its API client. Closing the body ends the request.
func (h *Host) download(ctx context.Context, in hostapi.NodeImage) (*imageBody, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL, nil)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp, err := h.api().Do(req)
	if err != nil {
		cancel(nil)
		return nil, &DownloadError{fmt.Errorf("download of image %s: %w", in.Name, err)}
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		cancel(nil)
		return nil, &DownloadError{fmt.Errorf("download of image %s: %s: %s", in.Name, resp.Status, strings.TrimSpace(string(msg)))}
	}
	return &imageBody{body: resp.Body, ctx: ctx, cancel: cancel, name: in.Name, hash: sha256.New(), total: in.Size,
		downloaded: h.Metrics.ImageBytes}, nil
}

// cleanup removes a failed pull's remains, even when ctx has ended.
func (h *Host) cleanup(ctx context.Context, in hostapi.NodeImage, fn func(context.Context) error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := fn(cctx); err != nil {
		h.log().Error("could not remove a failed image pull", "image", in.Name, "err", err)
	}
}

// imageFail says which image operation failed on which node.
func (h *Host) imageFail(ctx context.Context, verb string, in hostapi.NodeImage, err error) error {
	h.log().Warn("image operation failed", "verb", verb, "image", in.Name, "err", err)
	return &Error{What: fmt.Sprintf("%s image %s (%s) on node %s", verb, in.Name, in.Kind, h.Node), Err: err}
}

func (h *Host) imageInvalid(ctx context.Context, in hostapi.NodeImage, err error) error {
	return &InvalidError{Err: fmt.Errorf("image %s on node %s: %w", in.Name, h.Node, err)}
}

// imageMissing is an install that needs an image the node lacks.
func (h *Host) imageMissing(s hostapi.PodSandbox, artefact string) error {
	return &ImageMissingError{Image: s.Image, Kind: s.ImageKind, Namespace: s.Namespace, Pod: s.Name, Node: h.Node, Artefact: artefact}
}

// writeFileAtomic writes a small file through a temp file and a rename.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
