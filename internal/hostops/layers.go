package hostops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/illumos"
	"github.com/zonewright/zonewright/internal/illumos/names"
	"github.com/zonewright/zonewright/internal/ocilayer"
)

// An oci image is kept on a node as Triton's imgadm keeps Docker images:
// one dataset per layer, <ImagesDataset>/layers/<chain ID>, each a clone
// of the layer below's @layer snapshot with its own layer applied on top,
// then snapshotted @layer. A layer's chain ID names the whole stack below
// it, so two images that share a base share its datasets, and a pull
// fetches and applies only the layers the node lacks. The image itself is
// <ImagesDataset>/<name>/<manifest digest>, a clone of its top layer with
// the golden @base snapshot zones clone, as for a zfs stream: a tag that
// moves brings a second digest beside the first, whose zones keep it
// until they go (pruneDigests). Layer datasets are mounted
// beside the zones, under <ZonesPath>/.layers, where the agent unpacks
// into them.

const (
	// layerSnapshot is the snapshot upper layers and images clone.
	layerSnapshot = "layer"
	// chainProp marks a complete layer dataset with its chain ID; set
	// last, so a layer without it is a partial one.
	chainProp = "zonewright:chain"
	// layersDirName is where layer datasets are mounted, in ZonesPath.
	layersDirName = ".layers"
	// layersLock serialises oci pulls and layer pruning on a node.
	layersLock = "layers"
)

var ociDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func checkLayers(in hostapi.NodeImage) error {
	for i, l := range in.Layers {
		switch {
		case !ociDigest.MatchString(l.Digest):
			return fmt.Errorf("image %s: layer %d: digest %q is not sha256:<64 hex>", in.Name, i, l.Digest)
		case !ociDigest.MatchString(l.DiffID):
			return fmt.Errorf("image %s: layer %d: diffID %q is not sha256:<64 hex>", in.Name, i, l.DiffID)
		case l.Size <= 0:
			return fmt.Errorf("image %s: layer %d: size %d must be positive", in.Name, i, l.Size)
		case !strings.HasPrefix(l.URL, "http://") && !strings.HasPrefix(l.URL, "https://"):
			return fmt.Errorf("image %s: layer %d: URL %q is not http(s)", in.Name, i, l.URL)
		}
	}
	return nil
}

// layersDataset holds the layer datasets.
func (h *Host) layersDataset() string { return h.ImagesDataset + "/layers" }

// pullLayers pulls an oci image: the layers the node lacks, then the
// image's own clone of the top one. res.Bytes is what was downloaded.
func (h *Host) pullLayers(ctx context.Context, in hostapi.NodeImage) (hostapi.NodeImageResult, error) {
	zfs := h.Host.ZFS()
	ds, err := h.ociDataset(in.Name, in.SHA256)
	if err != nil {
		return hostapi.NodeImageResult{}, err
	}
	snap := ds + "@" + baseSnapshot
	if ok, err := h.complete(ctx, ds, digestProp, in.SHA256, snap); err != nil || ok {
		return hostapi.NodeImageResult{Artefact: snap}, err
	}
	if err := h.ensureLayersDataset(ctx); err != nil {
		return hostapi.NodeImageResult{}, err
	}
	diffIDs := make([]string, len(in.Layers))
	for i, l := range in.Layers {
		diffIDs[i] = l.DiffID
	}
	below, fetched, applied := "", int64(0), 0
	for i, chain := range ocilayer.ChainIDs(diffIDs) {
		n, err := h.pullLayer(ctx, in, in.Layers[i], chain, below)
		if err != nil {
			return hostapi.NodeImageResult{}, err
		}
		if n > 0 {
			fetched, applied = fetched+n, applied+1
		}
		below = h.layersDataset() + "/" + strings.TrimPrefix(chain, "sha256:") + "@" + layerSnapshot
	}
	err = h.cloneImage(ctx, ds, below)
	if err == nil {
		err = zfs.Set(ctx, ds, map[string]string{digestProp: in.SHA256})
	}
	if err != nil {
		h.cleanup(ctx, in, func(ctx context.Context) error { return destroyIfThere(ctx, zfs, ds) })
		return hostapi.NodeImageResult{}, err
	}
	h.log().Info("oci image layers", "image", in.Name, "layers", len(in.Layers), "applied", applied,
		"shared", len(in.Layers)-applied, "bytes", fetched)
	if err := h.pruneDigests(ctx, in.Name, ds); err != nil {
		h.log().Warn("could not remove the image's earlier digests", "image", in.Name, "err", err)
	}
	return hostapi.NodeImageResult{Artefact: snap, Bytes: fetched}, nil
}

// ociDataset is the dataset of one digest of an oci image.
func (h *Host) ociDataset(name, digest string) (string, error) {
	ds, err := h.imageDataset(name)
	if err != nil {
		return "", err
	}
	return names.DatasetName(ds, digest)
}

// pruneDigests destroys the image's other digests that no zone clones
// (zfs refuses those, and they stay until their zones go).
func (h *Host) pruneDigests(ctx context.Context, name, keep string) error {
	zfs := h.Host.ZFS()
	parent, err := h.imageDataset(name)
	if err != nil {
		return err
	}
	sets, err := zfs.List(ctx, illumos.ListOptions{Names: []string{parent}, Depth: 1, Types: []string{"filesystem"}})
	if err != nil {
		return err
	}
	for _, d := range sets {
		if d.Name == parent || d.Name == keep {
			continue
		}
		err := zfs.Destroy(ctx, d.Name)
		if err != nil && !errors.Is(err, illumos.ErrNotFound) && !errors.Is(err, illumos.ErrWrongState) && !errors.Is(err, illumos.ErrBusy) {
			return err
		}
	}
	return nil
}

// complete reports whether ds is marked complete (prop = want) and has
// its snapshot; a partial or outdated one (a crash, a dropped download,
// another digest, marked without its snapshot) is destroyed.
func (h *Host) complete(ctx context.Context, ds, prop, want, snap string) (bool, error) {
	zfs := h.Host.ZFS()
	got, err := zfs.Get(ctx, ds, prop)
	switch {
	case errors.Is(err, illumos.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case got == want:
		if ok, err := zfs.Exists(ctx, snap); err != nil || ok {
			return ok, err
		}
	}
	h.log().Warn("removing a partial or outdated dataset before pulling it again", "dataset", ds, "mark", got)
	return false, destroyIfThere(ctx, zfs, ds)
}

func destroyIfThere(ctx context.Context, zfs illumos.ZFS, ds string) error {
	if err := zfs.Destroy(ctx, ds); err != nil && !errors.Is(err, illumos.ErrNotFound) {
		return err
	}
	return nil
}

// ensureLayersDataset creates the layers' parent, mounted in ZonesPath.
func (h *Host) ensureLayersDataset(ctx context.Context) error {
	zfs := h.Host.ZFS()
	ok, err := zfs.Exists(ctx, h.layersDataset())
	if err != nil || ok {
		return err
	}
	err = zfs.Create(ctx, h.layersDataset(), map[string]string{"mountpoint": filepath.Join(h.ZonesPath, layersDirName)})
	if errors.Is(err, illumos.ErrAlreadyExists) {
		return nil // another pull made it
	}
	return err
}

// pullLayer makes the dataset of one layer (chain) unless it is complete
// already: a clone of the layer below (or a new dataset at the bottom)
// with the blob applied, checked against its digest and diffID. It
// returns the bytes downloaded, 0 for a layer the node had.
func (h *Host) pullLayer(ctx context.Context, in hostapi.NodeImage, l hostapi.NodeLayer, chain, below string) (int64, error) {
	zfs := h.Host.ZFS()
	id := strings.TrimPrefix(chain, "sha256:")
	ds := h.layersDataset() + "/" + id
	unlock, err := h.lockZone(ctx, "layer/"+id)
	if err != nil {
		return 0, err
	}
	defer unlock()
	if ok, err := h.complete(ctx, ds, chainProp, chain, ds+"@"+layerSnapshot); err != nil || ok {
		return 0, err
	}
	if below == "" {
		err = zfs.Create(ctx, ds, nil)
	} else {
		err = zfs.Clone(ctx, below, ds, nil)
	}
	if err != nil {
		return 0, err
	}
	blob := hostapi.NodeImage{Name: in.Name, URL: l.URL, SHA256: strings.TrimPrefix(l.Digest, "sha256:"), Size: l.Size}
	n, err := h.applyBlob(ctx, blob, l, filepath.Join(h.zonesDir(), layersDirName, id))
	if err == nil {
		err = zfs.Snapshot(ctx, ds, layerSnapshot)
	}
	if err == nil {
		err = zfs.Set(ctx, ds, map[string]string{chainProp: chain})
	}
	if err != nil {
		h.cleanup(ctx, in, func(ctx context.Context) error { return destroyIfThere(ctx, zfs, ds) })
		return 0, err
	}
	return n, nil
}

// applyBlob downloads one layer blob and unpacks it into dir as it
// streams, then checks the blob's digest and size and the tar's diffID.
func (h *Host) applyBlob(ctx context.Context, blob hostapi.NodeImage, l hostapi.NodeLayer, dir string) (int64, error) {
	body, err := h.download(ctx, blob)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	stop := h.progressBeats(ctx, body)
	defer stop()
	diffID, err := ocilayer.ApplyLayer(dir, body, l.MediaType)
	if derr := body.failure(); derr != nil {
		return 0, derr // the download, not the unpacking it starved, is the cause
	}
	if err != nil {
		return 0, fmt.Errorf("apply layer %s of image %s: %w", l.Digest, blob.Name, err)
	}
	if err := body.finish(blob); err != nil {
		return 0, err
	}
	if diffID != l.DiffID {
		return 0, &DigestMismatchError{fmt.Sprintf("image %s: layer %s unpacks to %s, the image's configuration says %s",
			blob.Name, l.Digest, diffID, l.DiffID)}
	}
	return body.n.Load(), nil
}

// cloneImage makes the image's dataset, a clone of its top layer (an
// image of no layers: an empty dataset), with its @base snapshot.
func (h *Host) cloneImage(ctx context.Context, ds, top string) error {
	zfs := h.Host.ZFS()
	var err error
	if top == "" {
		err = zfs.Create(ctx, ds, nil)
	} else {
		err = zfs.Clone(ctx, top, ds, nil)
	}
	if err != nil {
		return err
	}
	return h.ensureBase(ctx, ds)
}

// pruneLayers destroys the layers no image or other layer is made from:
// a layer whose @layer snapshot has clones (an image, a layer above, a
// zone of an image being removed) is refused by zfs and kept, so passes
// from the top of each stack down remove exactly what nothing uses.
func (h *Host) pruneLayers(ctx context.Context) error {
	unlock, err := h.lockZone(ctx, layersLock)
	if err != nil {
		return err
	}
	defer unlock()
	zfs := h.Host.ZFS()
	sets, err := zfs.List(ctx, illumos.ListOptions{Names: []string{h.layersDataset()}, Depth: 1, Types: []string{"filesystem"}})
	if errors.Is(err, illumos.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	left := map[string]bool{}
	for _, d := range sets {
		if d.Name != h.layersDataset() {
			left[d.Name] = true
		}
	}
	for pruned := true; pruned && len(left) > 0; {
		pruned = false
		for ds := range left {
			err := zfs.Destroy(ctx, ds)
			switch {
			case err == nil || errors.Is(err, illumos.ErrNotFound):
				delete(left, ds)
				pruned = true
				h.log().Info("layer pruned", "dataset", ds)
			case errors.Is(err, illumos.ErrWrongState), errors.Is(err, illumos.ErrBusy):
				// still cloned
			default:
				return err
			}
		}
	}
	return nil
}
