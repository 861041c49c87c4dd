package controlops

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/encryption"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/imagegc"
	"github.com/zonewright/zonewright/internal/imagestore"
	"github.com/zonewright/zonewright/internal/metrics"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/progress"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// ImagePulls starts the pull of one image to one node; the workflows
// package provides it (ImageClient). Starting a pull already running is a
// no-op, so triggers from pods and from the node sync coalesce.
type ImagePulls interface {
	EnsurePull(ctx context.Context, image, node string) error
	// EnsureImport imports the image again unless an import runs.
	EnsureImport(ctx context.Context, ref controlapi.ImageRef) error
	// StartDelete starts the removal of an image marked deleting, or
	// joins the one that runs.
	StartDelete(ctx context.Context, ref controlapi.ImageRef) error
}

// Images is the control plane's work on the image catalog: imports into
// the image store, the image's status, and which node gets which image.
type Images struct {
	Store     *store.Store
	Artefacts *imagestore.Store
	// AdvertiseURL is the API's base URL as nodes reach it.
	AdvertiseURL string
	// StallTimeout fails a fetch that receives nothing for this long.
	StallTimeout time.Duration
	// StatusEvery throttles progress writes into the image's status.
	StatusEvery time.Duration
	Pulls       ImagePulls
	// InsecureRegistries (host[:port]) are spoken to over plain http, as
	// loopback ones always are.
	InsecureRegistries []string
	// SecretKey opens the pull secrets of oci images.
	SecretKey *encryption.Key
	// Metrics measures imports; nil measures nothing.
	Metrics *metrics.Serve
	// UnusedPodImageTTL is how long an image made for pods is kept once
	// no pod uses it; zero: DefaultUnusedPodImageTTL.
	UnusedPodImageTTL time.Duration
	// GC are the image garbage collection's thresholds; zero collects
	// nothing.
	GC imagegc.Thresholds
}

// DefaultUnusedPodImageTTL keeps a registry image added for pods a day
// after its last pod went (the kubelet's --image-maximum-gc-age is the
// closest analogue).
const DefaultUnusedPodImageTTL = 24 * time.Hour

// ImageGoneError: the image was deleted (or is another incarnation) while
// it was being imported.
type ImageGoneError struct{ Image string }

func (e *ImageGoneError) Error() string { return "image " + e.Image + " is gone" }

// ImportError is a failed fetch or decompress of an image's source. Err is
// the image store's error: an *imagestore.DigestMismatchError, a
// permanent failure (imagestore.Permanent), imagestore.ErrStalled, or
// another that a retry may get past.
type ImportError struct {
	Image  string
	Source string
	Err    error
}

func (e *ImportError) Error() string { return fmt.Sprintf("image %s: %v", e.Image, e.Err) }
func (e *ImportError) Unwrap() error { return e.Err }

// ErrNoPulls: this control plane was given no way to start image pulls.
var ErrNoPulls = errors.New("this control plane starts no image pulls")

func (a *Images) now() time.Time { return time.Now().UTC() }

// get reads the image; nil when it is gone or another incarnation.
func (a *Images) get(ctx context.Context, ref controlapi.ImageRef) (*model.Image, error) {
	img, err := a.Store.Images().Get(ctx, "", ref.Name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if ref.UID != "" && img.Metadata.UID != ref.UID {
		return nil, nil
	}
	return img, nil
}

// mutate applies fn to the image and writes it, retrying on a conflict
// (imports and pulls write the same row concurrently). It reports false
// when the image is gone.
func (a *Images) mutate(ctx context.Context, ref controlapi.ImageRef, fn func(*model.Image)) (bool, error) {
	gone := false
	_, err := a.Store.Images().Modify(ctx, "", ref.Name, func(img *model.Image) bool {
		if gone = ref.UID != "" && img.Metadata.UID != ref.UID; gone {
			return false
		}
		fn(img)
		return true
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil && !gone, err
}

func (a *Images) setPhase(s *model.ImageStatus, phase, reason, msg string) {
	if s.Phase != phase {
		now := a.now()
		s.LastTransition = &now
	}
	s.Phase, s.Reason, s.Message = phase, reason, msg
}

// BeginImageImport marks the image Importing (a zone template, which has
// nothing to fetch, Ready) and returns its spec.
func (a *Images) BeginImageImport(ctx context.Context, ref controlapi.ImageRef) (controlapi.ImagePlan, error) {
	var spec model.ImageSpec
	found, err := a.mutate(ctx, ref, func(img *model.Image) {
		spec = img.Spec
		if !img.Spec.NeedsPull() {
			a.setPhase(&img.Status, model.ImageReady, "", "zone templates install from the host's packages")
			return
		}
		a.setPhase(&img.Status, model.ImageImporting, "", "fetching "+img.Spec.Source)
		img.Status.BytesDone, img.Status.BytesTotal = 0, img.Spec.Size
	})
	return controlapi.ImagePlan{Found: found, Spec: spec}, err
}

// FetchImage downloads the image's source into the image store, verifying
// its digest while it streams. Progress goes to the context's progress
// callback (bytes done and total, [2]int64, so a retry resumes and the UI
// shows it) and, throttled, into the image's status. A failed fetch is an
// *ImportError; an image gone meanwhile an *ImageGoneError.
func (a *Images) FetchImage(ctx context.Context, ref controlapi.ImageRef) (controlapi.ImageFetched, error) {
	img, err := a.get(ctx, ref)
	if err != nil {
		return controlapi.ImageFetched{}, err
	}
	if img == nil {
		return controlapi.ImageFetched{}, &ImageGoneError{Image: ref.Name}
	}
	if img.Spec.Kind == model.ImageOCI {
		return a.fetchOCI(ctx, ref, img)
	}
	src := img.Spec.Source
	onProgress, stop := a.startProgress(ctx, ref)
	start := time.Now()
	res, err := a.Artefacts.Fetch(ctx, imagestore.FetchRequest{Name: ref.Name, URL: src, SHA256: img.Spec.SHA256,
		Size: img.Spec.Size, StallTimeout: a.StallTimeout, Progress: onProgress})
	stop()
	if err != nil {
		if ctx.Err() == nil { // not a fetch cut short by a cancel or a retry
			a.Metrics.ImageImported(false, 0, time.Since(start))
		}
		return controlapi.ImageFetched{}, &ImportError{Image: ref.Name, Source: src, Err: err}
	}
	a.Metrics.ImageImported(true, res.Downloaded, time.Since(start))
	_, err = a.mutate(ctx, ref, func(img *model.Image) {
		img.Status.BytesDone, img.Status.BytesTotal = res.Bytes, res.Bytes
		img.Status.Message = "verified; decompressing"
	})
	return controlapi.ImageFetched{Bytes: res.Bytes, Downloaded: res.Downloaded, Resumed: res.Resumed}, err
}

// startProgress reports a fetch's bytes done and total: to the context's
// progress callback ([2]int64, so a retry resumes and the UI shows it) on
// every call and, throttled, into the image's status while it is
// Importing. A live worker reports every second even while no byte
// arrives: telling a stalled source from a slow one is the store's job
// (StallTimeout), telling a dead worker from a live one is the report's
// (a heartbeat), and a cancel comes back in a heartbeat's reply. stop
// ends the beats and waits for the status writes.
func (a *Images) startProgress(ctx context.Context, ref controlapi.ImageRef) (onProgress func(done, total int64), stop func()) {
	var (
		mu       sync.Mutex
		lastSave time.Time
		writes   sync.WaitGroup
		last     [2]int64
	)
	every := a.StatusEvery
	if every == 0 {
		every = time.Second
	}
	report := progress.From(ctx)
	onProgress = func(done, total int64) {
		if report != nil {
			report([2]int64{done, total})
		}
		mu.Lock()
		last = [2]int64{done, total}
		save := time.Since(lastSave) >= every
		if save {
			lastSave = time.Now()
		}
		mu.Unlock()
		if !save {
			return
		}
		writes.Add(1)
		go func() {
			defer writes.Done()
			_, _ = a.mutate(ctx, ref, func(img *model.Image) {
				if img.Status.Phase == model.ImageImporting && done >= img.Status.BytesDone {
					img.Status.BytesDone, img.Status.BytesTotal = done, total
				}
			})
		}()
	}
	stopBeats := make(chan struct{})
	if report != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-stopBeats:
					return
				case <-t.C:
					mu.Lock()
					d := last
					mu.Unlock()
					report(d)
				}
			}
		}()
	}
	return onProgress, func() {
		close(stopBeats)
		writes.Wait()
	}
}

// DecompressImage turns the download into the artefact nodes pull,
// reporting its progress (bytes read and total, [2]int64). Errors are as
// FetchImage's.
func (a *Images) DecompressImage(ctx context.Context, ref controlapi.ImageRef) (controlapi.ImageArtefact, error) {
	img, err := a.get(ctx, ref)
	if err != nil {
		return controlapi.ImageArtefact{}, err
	}
	if img == nil {
		return controlapi.ImageArtefact{}, &ImageGoneError{Image: ref.Name}
	}
	if img.Spec.Kind == model.ImageOCI {
		return ociArtefact(img)
	}
	art, err := a.Artefacts.DecompressProgress(ctx, ref.Name, img.Spec.Compression, func(read, total int64) {
		progress.Report(ctx, [2]int64{read, total})
	})
	if err != nil {
		return controlapi.ImageArtefact{}, &ImportError{Image: ref.Name, Source: img.Spec.Source, Err: err}
	}
	return controlapi.ImageArtefact{SHA256: art.SHA256, Size: art.Size, Compression: art.Compression}, nil
}

// MarkImageReady registers the imported image: Ready, with its artefact,
// and every Ready node whose brands fit marked Pulling in the same
// transaction, so the node sync does not start pulls the import is about
// to run. It returns those nodes and how they fetch the image.
func (a *Images) MarkImageReady(ctx context.Context, in controlapi.ImageReadyInput) (controlapi.ImageTargets, error) {
	nodes, err := a.allNodes(ctx)
	if err != nil {
		return controlapi.ImageTargets{}, err
	}
	for {
		img, err := a.get(ctx, in.Image)
		if err != nil || img == nil {
			return controlapi.ImageTargets{}, err
		}
		a.setPhase(&img.Status, model.ImageReady, "", "imported; distributing to nodes")
		img.Status.ArtefactSHA256, img.Status.ArtefactSize = in.Artefact.SHA256, in.Artefact.Size
		now := a.now()
		t := controlapi.ImageTargets{Image: a.nodeImage(img)}
		var pulling []model.ImageNodeStatus
		for i := range nodes {
			if fits(img, &nodes[i]) {
				t.Nodes = append(t.Nodes, nodes[i].Metadata.Name)
				pulling = append(pulling, model.ImageNodeStatus{Node: nodes[i].Metadata.Name, Phase: model.ImagePulling, Updated: &now})
			}
		}
		err = a.Store.UpdateImageWithNodes(ctx, img, pulling)
		if errors.Is(err, store.ErrNotFound) {
			return controlapi.ImageTargets{}, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return t, err
		}
		if err := ctx.Err(); err != nil {
			return controlapi.ImageTargets{}, err
		}
	}
}

// MarkImageFailed fails the image with a reason. The progress goes back
// to what the spec says: how much a failed source sent is not for clients
// (it would tell the size of a file or page the import was refused).
func (a *Images) MarkImageFailed(ctx context.Context, in controlapi.ImageFailure) error {
	_, err := a.mutate(ctx, in.Image, func(img *model.Image) {
		a.setPhase(&img.Status, model.ImageFailed, in.Reason, in.Message)
		img.Status.BytesDone, img.Status.BytesTotal = 0, img.Spec.Size
	})
	return err
}

// RemoveImageArtefact removes the image's files (download, partial
// download, artefact) from the store; removing nothing succeeds.
func (a *Images) RemoveImageArtefact(ctx context.Context, name string) error {
	if err := a.Artefacts.Remove(name); err != nil && !errors.Is(err, imagestore.ErrNotFound) {
		return fmt.Errorf("remove image %s from the store: %w", name, err)
	}
	return a.pruneBlobs(ctx, name)
}

// nodeImage is how nodes fetch the image's artefact: with their own
// certificates, so no credential travels in the workflow's history.
func (a *Images) nodeImage(img *model.Image) hostapi.NodeImage {
	ni := hostapi.NodeImage{Name: img.Metadata.Name, Kind: img.Spec.Kind,
		URL: ArtefactURL(a.AdvertiseURL, img.Metadata.Name), SHA256: img.Status.ArtefactSHA256, Size: img.Status.ArtefactSize}
	if img.Spec.Kind == model.ImageOCI {
		ni.URL, ni.Layers = "", a.ociLayers(img)
	}
	return ni
}

// ArtefactURL is where nodes download an image's artefact from.
func ArtefactURL(base, name string) string {
	return base + "/api/v1/images/" + url.PathEscape(name) + "/artefact"
}

// LayerURL is where nodes download a layer blob of an oci image from;
// the image named tells the control plane whose pull it is.
func LayerURL(base, blob, image string) string {
	return ArtefactURL(base, blob) + "?image=" + url.QueryEscape(image)
}

// fits reports whether the node is Ready and can install one of the
// image's brands.
func fits(img *model.Image, n *model.Node) bool {
	if n.Metadata.DeletionTimestamp != nil || !n.Ready() {
		return false
	}
	return slices.ContainsFunc(img.Spec.EffectiveBrands(), func(b string) bool {
		return n.Metadata.Labels[model.LabelNodeBrandPrefix+b] == "true"
	})
}

func (a *Images) allNodes(ctx context.Context) ([]model.Node, error) {
	return a.Store.Nodes().ListAll(ctx, store.ListOptions{})
}

// ImagePullPlan says whether and how to pull an image to a node.
func (a *Images) ImagePullPlan(ctx context.Context, in controlapi.ImageNodeInput) (controlapi.NodePull, error) {
	img, err := a.get(ctx, controlapi.ImageRef{Name: in.Image})
	if err != nil {
		return controlapi.NodePull{}, err
	}
	switch {
	case img == nil || img.Metadata.DeletionTimestamp != nil:
		return controlapi.NodePull{Skip: true, Why: "the image is gone or being deleted"}, nil
	case !img.Spec.NeedsPull():
		return controlapi.NodePull{Skip: true, Why: "a zone template needs no pull"}, nil
	case img.Status.Phase != model.ImageReady:
		return controlapi.NodePull{Skip: true, Why: "the image is " + img.Status.Phase + ", not Ready"}, nil
	}
	return controlapi.NodePull{Image: a.nodeImage(img)}, nil
}

// SetImageNodeStatus records the image's state on one node: one row of
// its own, written without rewriting the Image. The Image itself (its
// message, and an event for its watchers) changes when a report leaves no
// node of it Pulling: a distribution shows its start (MarkImageReady) and
// its end, not every node's step; a read shows every node's state.
//
// The update that ends a node's pull (Pulling to Ready or Failed)
// measures it; a retried update finds it ended and measures nothing.
func (a *Images) SetImageNodeStatus(ctx context.Context, u controlapi.ImageNodeUpdate) error {
	now := a.now()
	prev, had, err := a.Store.SetImageNode(ctx, u.Image, model.ImageNodeStatus{Node: u.Node, Phase: u.Phase, Reason: u.Reason, Message: u.Message, Updated: &now})
	if errors.Is(err, store.ErrNotFound) {
		return nil // the image or the node is gone
	}
	if err != nil {
		return err
	}
	ended := u.Phase == model.ImageReady || u.Phase == model.ImageFailed
	if had && prev.Phase == model.ImagePulling && prev.Updated != nil && ended {
		if size, err := a.Store.ImageArtefactSize(ctx, u.Image); err == nil {
			a.Metrics.NodePullFinished(u.Phase == model.ImageReady, size, now.Sub(*prev.Updated))
		}
	}
	if !ended {
		return nil
	}
	pulling, err := a.Store.ImagePulling(ctx, u.Image)
	if err != nil || pulling {
		return err
	}
	_, err = a.Store.Images().Modify(ctx, "", u.Image, func(img *model.Image) bool {
		if img.Status.Phase != model.ImageReady {
			return false
		}
		msg := nodeSummary(img.Status.Nodes)
		if img.Status.Message == msg {
			return false
		}
		img.Status.Message = msg
		return true
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// nodeSummary says where a Ready image is, for its status message.
func nodeSummary(nodes []model.ImageNodeStatus) string {
	count := map[string]int{}
	for _, n := range nodes {
		count[n.Phase]++
	}
	msg := fmt.Sprintf("on %d of %d nodes", count[model.ImageReady], len(nodes))
	if n := count[model.ImagePulling]; n > 0 {
		msg += fmt.Sprintf(", %d pulling", n)
	}
	if n := count[model.ImageFailed]; n > 0 {
		msg += fmt.Sprintf(", %d failed", n)
	}
	return msg
}

// ImageNodeNames lists the nodes the image's status mentions, Pulling,
// Ready or Failed: where files of it may be.
func (a *Images) ImageNodeNames(ctx context.Context, ref controlapi.ImageRef) ([]string, error) {
	img, err := a.get(ctx, ref)
	if err != nil || img == nil {
		return nil, err
	}
	var names []string
	for _, n := range img.Status.Nodes {
		names = append(names, n.Node)
	}
	return names, nil
}

// DeleteImageRow removes the image from the catalog.
func (a *Images) DeleteImageRow(ctx context.Context, ref controlapi.ImageRef) error {
	img, err := a.get(ctx, ref)
	if err != nil || img == nil {
		return err
	}
	_, err = a.Store.Images().Delete(ctx, "", ref.Name, "")
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// ResolvePodImage tells the pod lifecycle what its image is on its node.
func (a *Images) ResolvePodImage(ctx context.Context, in controlapi.ImageNodeInput) (controlapi.ResolvedImage, error) {
	img, err := a.get(ctx, controlapi.ImageRef{Name: in.Image})
	if err != nil || img == nil {
		return controlapi.ResolvedImage{}, err
	}
	r := controlapi.ResolvedImage{Found: true, Kind: img.Spec.Kind}
	if img.Status.OCI != nil {
		r.Config, r.Digest = &img.Status.OCI.Config, strings.TrimPrefix(img.Status.OCI.Digest, "sha256:")
	}
	if in.Refresh && img.Spec.Kind == model.ImageOCI && img.Status.Phase == model.ImageReady {
		if moved, err := a.refreshTag(ctx, img); err != nil {
			return controlapi.ResolvedImage{Found: true, Kind: img.Spec.Kind, Failed: true,
				Message: fmt.Sprintf("image %s: checking its tag in the registry (imagePullPolicy Always): %s", img.Metadata.Name, err)}, nil
		} else if moved != "" {
			return controlapi.ResolvedImage{Found: true, Kind: img.Spec.Kind,
				Message: fmt.Sprintf("image %s: its tag moved to %s; importing it", img.Metadata.Name, moved)}, nil
		}
	}
	switch ns, onNode := img.Status.Node(in.Node); {
	case !img.Spec.NeedsPull():
		r.Present = true
	case img.Status.Phase != model.ImageReady:
		// An operator's import that failed needs the operator (a new
		// source or digest): the pod backs off until the image is
		// replaced. A registry image is its pods': each of their looks
		// after a back-off imports it again, as the kubelet retries a
		// pull (a push that came later, a registry that was down).
		r.Failed = img.Status.Phase == model.ImageFailed
		r.Message = fmt.Sprintf("image %s is %s, not Ready", img.Metadata.Name, img.Status.Phase)
		if img.Status.Message != "" {
			r.Message += ": " + img.Status.Message
		}
		// An image added for pods whose import did not start with its
		// first pod (Temporal did not answer) is started here too.
		pending := img.Status.Phase == model.ImagePending && img.Metadata.Labels[model.LabelMadeForPods] == "true"
		if (r.Failed || pending) && img.Spec.Kind == model.ImageOCI && img.Metadata.DeletionTimestamp == nil && a.Pulls != nil {
			if err := a.Pulls.EnsureImport(ctx, controlapi.ImageRef{Name: img.Metadata.Name, UID: img.Metadata.UID}); err != nil {
				return controlapi.ResolvedImage{}, err
			}
			if r.Failed {
				r.Message += "; importing it again"
			}
		}
	case !onNode:
		r.Pull, r.Message = true, fmt.Sprintf("pulling image %s to node %s", img.Metadata.Name, in.Node)
	case ns.Phase == model.ImageReady:
		r.Present = true
		// The pod starts with it: a use, for the image's garbage collection.
		_ = a.Store.TouchImageNodes(ctx, in.Node, []string{img.Metadata.Name})
	case ns.Phase == model.ImageFailed:
		r.Pull, r.Failed = true, true
		r.Message = fmt.Sprintf("pulling image %s to node %s failed (%s: %s); retrying", img.Metadata.Name, in.Node, ns.Reason, ns.Message)
	default:
		r.Message = fmt.Sprintf("pulling image %s to node %s", img.Metadata.Name, in.Node)
	}
	if in.NeverPull && !r.Present {
		r.Pull, r.Failed, r.Reason = false, true, podcontract.ReasonErrImageNeverPull
		r.Message = fmt.Sprintf("container image %q is not present on node %s with pull policy of Never", img.Metadata.Name, in.Node)
	}
	return r, nil
}

// RequestImagePull starts the pull of an image to a node (a no-op while
// one runs); ErrNoPulls without Pulls.
func (a *Images) RequestImagePull(ctx context.Context, in controlapi.ImageNodeInput) error {
	if a.Pulls == nil {
		return ErrNoPulls
	}
	return a.Pulls.EnsurePull(ctx, in.Image, in.Node)
}

// SyncNodeImages is the catalog's periodic upkeep (the image-sync
// schedule): it removes the images made for pods that no pod has used
// for UnusedPodImageTTL (ExpirePodImages), and starts a pull for every
// Ready image a fitting Ready node lacks: how a node that registers
// later gets the images. Nodes where a pull failed are left for pods (or
// an operator) to retry, and images garbage collection removed from a
// node for its pods. It returns how many pulls it started; one part
// failing does not keep the other from running.
func (a *Images) SyncNodeImages(ctx context.Context) (int, error) {
	if a.Pulls == nil {
		return 0, nil
	}
	_, expireErr := a.ExpirePodImages(ctx)
	started, err := a.pullMissing(ctx)
	return started, errors.Join(expireErr, err)
}

// pullMissing starts a pull for every Ready image a fitting Ready node
// lacks.
func (a *Images) pullMissing(ctx context.Context) (int, error) {
	nodes, err := a.allNodes(ctx)
	if err != nil {
		return 0, err
	}
	// What image GC removed from a node comes back with a pod, not here.
	collected, err := a.Store.CollectedImageNodes(ctx)
	if err != nil {
		return 0, err
	}
	started := 0
	opts := store.ListOptions{Limit: 500, FieldSelector: "status.phase=" + model.ImageReady}
	for {
		page, err := a.Store.Images().List(ctx, opts)
		if err != nil {
			return started, err
		}
		for i := range page.Items {
			img := &page.Items[i]
			if !img.Spec.NeedsPull() || img.Metadata.DeletionTimestamp != nil {
				continue
			}
			for j := range nodes {
				if _, seen := img.Status.Node(nodes[j].Metadata.Name); seen || collected[img.Metadata.Name][nodes[j].Metadata.Name] || !fits(img, &nodes[j]) {
					continue
				}
				if err := a.Pulls.EnsurePull(ctx, img.Metadata.Name, nodes[j].Metadata.Name); err != nil {
					return started, fmt.Errorf("start the pull of %s to %s: %w", img.Metadata.Name, nodes[j].Metadata.Name, err)
				}
				started++
			}
		}
		if page.Metadata.Continue == "" {
			return started, nil
		}
		opts.Continue = page.Metadata.Continue
	}
}

// ExpirePodImages removes, with the image deletion every DELETE starts
// (nodes, store, row), the images made for pods that no pod, deployment,
// job or revision has named for UnusedPodImageTTL, as the sweep records
// it (store.SweepPodImages: at most one sweep late, never early). An
// operator's images are never touched. It returns the images whose
// removal it started or joined.
func (a *Images) ExpirePodImages(ctx context.Context) ([]string, error) {
	ttl := a.UnusedPodImageTTL
	if ttl <= 0 {
		ttl = DefaultUnusedPodImageTTL
	}
	names, err := a.Store.SweepPodImages(ctx, ttl)
	if err != nil {
		return nil, fmt.Errorf("sweep the images made for pods: %w", err)
	}
	if a.Pulls == nil {
		return names, nil
	}
	for _, name := range names {
		img, err := a.get(ctx, controlapi.ImageRef{Name: name})
		if err != nil {
			return names, err
		}
		if img == nil {
			continue // its removal ended meanwhile
		}
		if err := a.Pulls.StartDelete(ctx, controlapi.ImageRef{Name: name, UID: img.Metadata.UID}); err != nil {
			return names, fmt.Errorf("start the removal of unused image %s: %w", name, err)
		}
	}
	return names, nil
}
