package controlops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/hostapi"
	"github.com/zonewright/zonewright/internal/imagestore"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/oci"
	"github.com/zonewright/zonewright/internal/store"
)

// An oci image is imported as the other kinds are, by the same workflow:
// FetchImage resolves its reference in the registry (the linux/amd64
// manifest, its layers and its configuration, kept in the image's status)
// and fetches each layer blob into the image store, where blobs are
// content-addressed and so shared between images (a second image on the
// same base fetches only its own layers); DecompressImage has nothing to
// decompress. Every connection goes through the store's transport, so the
// source limits of imports hold for registries too.

// RegistryError is a registry's refusal: an image it does not have, a
// credential it does not take, no platform an lx zone runs.
type RegistryError struct {
	Reference string
	// Reason is what a client may be told.
	Reason string
	Err    error
}

func (e *RegistryError) Error() string {
	return fmt.Sprintf("registry image %s: %v", e.Reference, e.Err)
}
func (e *RegistryError) Unwrap() error { return e.Err }

// registryError sorts a failure of the registry into what can never
// succeed (a *RegistryError) and what a retry may get past (the rest).
func registryError(ref string, err error) error {
	var reason string
	switch {
	case errors.Is(err, oci.ErrNotFound):
		reason = "the registry has no such image (manifest unknown)"
	case errors.Is(err, oci.ErrUnauthorized):
		reason = "the registry refused access (check the reference and the pull secret)"
	case errors.Is(err, oci.ErrNoPlatform):
		reason = "the image has no linux/amd64 variant, which lx zones run"
	case errors.Is(err, oci.ErrUnsupported):
		reason = "the image is of a kind that cannot be pulled (a schema 1 manifest, a foreign or unknown layer type, or a malformed manifest)"
	default:
		return err
	}
	return &RegistryError{Reference: ref, Reason: reason, Err: err}
}

// registry is the client oci imports use: the store's guarded transport;
// plain http only to a loopback registry or one listed as insecure.
func (a *Images) registry() *oci.Client {
	return &oci.Client{Transport: a.Artefacts.Transport(), Insecure: func(host string) bool {
		if slices.Contains(a.InsecureRegistries, host) {
			return true
		}
		h, _, err := net.SplitHostPort(host)
		if err != nil {
			h = host
		}
		ip := net.ParseIP(h)
		return h == "localhost" || ip != nil && ip.IsLoopback()
	}}
}

// fetchOCI is FetchImage of an oci image.
func (a *Images) fetchOCI(ctx context.Context, ref controlapi.ImageRef, img *model.Image) (controlapi.ImageFetched, error) {
	src := img.Spec.Source
	fail := func(err error) (controlapi.ImageFetched, error) {
		return controlapi.ImageFetched{}, &ImportError{Image: ref.Name, Source: src, Err: registryError(src, err)}
	}
	start := time.Now()
	r, err := oci.ParseReference(src)
	if err != nil {
		return controlapi.ImageFetched{}, &ImportError{Image: ref.Name, Source: src, Err: &RegistryError{Reference: src, Reason: "the reference does not parse: " + err.Error(), Err: err}}
	}
	client := a.registry()
	keys, err := a.pullKeyring(ctx, img.Spec.PullSecrets)
	if err != nil {
		return controlapi.ImageFetched{}, err
	}
	resolved, err := client.Resolve(ctx, r, keys)
	if err != nil {
		return fail(err)
	}
	if resolved.Size > a.Artefacts.SizeLimit() {
		return controlapi.ImageFetched{}, &ImportError{Image: ref.Name, Source: src, Err: imagestore.ErrTooLarge}
	}
	status := ociStatus(resolved)
	if _, err := a.mutate(ctx, ref, func(img *model.Image) {
		img.Status.OCI = status
		img.Status.BytesDone, img.Status.BytesTotal = 0, resolved.Size
		img.Status.Message = fmt.Sprintf("fetching %d layers of %s", len(status.Layers), status.Digest)
	}); err != nil {
		return controlapi.ImageFetched{}, err
	}
	auth, err := client.RepositoryTransport(ctx, r, keys)
	if err != nil {
		return fail(err)
	}
	onProgress, stop := a.startProgress(ctx, ref)
	defer stop()
	var done, downloaded int64
	resumed := false
	for _, l := range resolved.Layers {
		hex := strings.TrimPrefix(l.Digest, "sha256:")
		name := imagestore.BlobName(hex)
		before := done
		res, err := a.Artefacts.Fetch(ctx, imagestore.FetchRequest{Name: name, URL: oci.BlobURL(r, l.Digest), SHA256: hex,
			Size: l.Size, StallTimeout: a.StallTimeout, Transport: auth, Progress: func(d, _ int64) { onProgress(before+d, resolved.Size) }})
		if err != nil {
			return controlapi.ImageFetched{}, &ImportError{Image: ref.Name, Source: src, Err: err}
		}
		// Nodes download the blob as it is: its artefact is the download.
		if _, err := a.Artefacts.Publish(ctx, name); err != nil {
			return controlapi.ImageFetched{}, &ImportError{Image: ref.Name, Source: src, Err: err}
		}
		done += res.Bytes
		downloaded += res.Downloaded
		resumed = resumed || res.Resumed
	}
	a.Metrics.ImageImported(true, downloaded, time.Since(start))
	_, err = a.mutate(ctx, ref, func(img *model.Image) {
		img.Status.BytesDone, img.Status.BytesTotal = done, done
		img.Status.Message = "verified every layer"
	})
	return controlapi.ImageFetched{Bytes: done, Downloaded: downloaded, Resumed: resumed}, err
}

// ociStatus is what the image's status keeps of a resolved image.
func ociStatus(im oci.Image) *model.OCIImage {
	s := &model.OCIImage{Digest: im.Digest, Config: model.OCIConfig{Entrypoint: im.Config.Entrypoint, Cmd: im.Config.Cmd,
		Env: im.Config.Env, WorkingDir: im.Config.WorkingDir, User: im.Config.User, ExposedPorts: im.Config.ExposedPorts}}
	for _, l := range im.Layers {
		s.Layers = append(s.Layers, model.OCILayer{Digest: l.Digest, DiffID: l.DiffID, Size: l.Size, MediaType: l.MediaType})
	}
	return s
}

// ociArtefact is DecompressImage of an oci image: nothing to decompress;
// the image is its manifest's digest and its layers' total size.
func ociArtefact(img *model.Image) (controlapi.ImageArtefact, error) {
	o := img.Status.OCI
	if o == nil {
		return controlapi.ImageArtefact{}, &ImportError{Image: img.Metadata.Name, Source: img.Spec.Source, Err: fmt.Errorf("%w: not resolved yet", imagestore.ErrInvalid)}
	}
	var size int64
	for _, l := range o.Layers {
		size += l.Size
	}
	return controlapi.ImageArtefact{SHA256: strings.TrimPrefix(o.Digest, "sha256:"), Size: size, Compression: model.CompressionNone}, nil
}

// ociLayers are the layers of an oci image as its nodes fetch them: each
// blob from the control plane's store, in order.
func (a *Images) ociLayers(img *model.Image) []hostapi.NodeLayer {
	if img.Status.OCI == nil {
		return nil
	}
	var out []hostapi.NodeLayer
	for _, l := range img.Status.OCI.Layers {
		hex := strings.TrimPrefix(l.Digest, "sha256:")
		out = append(out, hostapi.NodeLayer{Digest: l.Digest, DiffID: l.DiffID, Size: l.Size, MediaType: l.MediaType,
			URL: LayerURL(a.AdvertiseURL, imagestore.BlobName(hex), img.Metadata.Name)})
	}
	return out
}

// pullKeyring reads the image's pull secrets (in the import, so their
// values never enter a workflow's history) into one keyring: for each
// registry, the first secret that has credentials for it. A secret that
// is missing or of another type is passed over, as the kubelet does; the
// registry then says whether it needed it.
func (a *Images) pullKeyring(ctx context.Context, refs []model.SecretReference) (oci.Keyring, error) {
	var rings []oci.Keyring
	for _, ref := range refs {
		sec, err := a.Store.Secrets(a.SecretKey).Get(ctx, ref.Namespace, ref.Name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read pull secret %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		if sec.Type != model.SecretTypeDockerConfigJSON {
			continue
		}
		ring, err := oci.ParseDockerConfigJSON(sec.Data[model.DockerConfigJSONKey])
		if err != nil {
			continue
		}
		rings = append(rings, ring)
	}
	if len(rings) == 0 {
		return nil, nil
	}
	return func(registry string) (oci.Credentials, bool) {
		for _, ring := range rings {
			if c, ok := ring(registry); ok {
				return c, true
			}
		}
		return oci.Credentials{}, false
	}, nil
}

// pruneBlobs removes the layer blobs of the store that no oci image but
// removed lists. An import lists its layers before it fetches them, so a
// blob being fetched is listed; one it would fetch later is fetched again.
func (a *Images) pruneBlobs(ctx context.Context, removed string) error {
	blobs, err := a.Artefacts.Names(model.ReservedImagePrefix)
	if err != nil || len(blobs) == 0 {
		return err
	}
	imgs, err := a.Store.Images().ListAll(ctx, store.ListOptions{})
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, img := range imgs {
		if img.Metadata.Name == removed || img.Status.OCI == nil {
			continue
		}
		for _, l := range img.Status.OCI.Layers {
			used[imagestore.BlobName(strings.TrimPrefix(l.Digest, "sha256:"))] = true
		}
	}
	for _, b := range blobs {
		if !used[b] {
			if err := a.Artefacts.Remove(b); err != nil && !errors.Is(err, imagestore.ErrNotFound) {
				return fmt.Errorf("remove layer blob %s from the store: %w", b, err)
			}
		}
	}
	return nil
}

// refreshTag resolves an oci image's reference again; when its digest
// moved, it starts the image's import again and returns the new digest.
// A registry's answer that is not the image (refused, gone) is the error.
func (a *Images) refreshTag(ctx context.Context, img *model.Image) (string, error) {
	r, err := oci.ParseReference(img.Spec.Source)
	if err != nil {
		return "", err
	}
	keys, err := a.pullKeyring(ctx, img.Spec.PullSecrets)
	if err != nil {
		return "", err
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resolved, err := a.registry().Resolve(rctx, r, keys)
	if err != nil {
		var re *RegistryError
		if errors.As(registryError(img.Spec.Source, err), &re) {
			return "", errors.New(re.Reason)
		}
		return "", errors.New("the registry could not be reached")
	}
	if img.Status.OCI != nil && resolved.Digest == img.Status.OCI.Digest {
		return "", nil
	}
	if a.Pulls == nil {
		return "", ErrNoPulls
	}
	if err := a.Pulls.EnsureImport(ctx, controlapi.ImageRef{Name: img.Metadata.Name, UID: img.Metadata.UID}); err != nil {
		return "", err
	}
	return resolved.Digest, nil
}
