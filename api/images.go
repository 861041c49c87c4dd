package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/oci"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows"
)

// ArtefactServer serves an image's decompressed artefact to nodes (the
// image store); the API has authorised the node by its certificate.
type ArtefactServer interface {
	ServeArtefact(w http.ResponseWriter, r *http.Request, name string)
}

// SourcePolicy decides from its URL whether an image source may be read
// (the image store's Sources).
type SourcePolicy interface {
	CheckURL(raw string) error
}

// anySource is the policy of a server given none: a source's URL is
// checked for its shape only.
type anySource struct{}

func (anySource) CheckURL(string) error { return nil }

func (s *Server) listImages(c *gin.Context) { listOrWatch(s, c, s.store.Images(), "") }
func (s *Server) getImage(c *gin.Context)   { getOne(s, c, s.store.Images(), "", c.Param("name")) }

func (s *Server) createImage(c *gin.Context) {
	var img model.Image
	if err := decode(c, &img); err != nil {
		s.fail(c, err)
		return
	}
	if err := checkTypeMeta(&img.TypeMeta, model.KindImage); err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&img.Metadata)
	model.DefaultImage(&img)
	errs := model.ValidateImage(&img)
	if _, ok := img.Metadata.Labels[model.LabelMadeForPods]; ok {
		// The mark would put an operator's image under the cap and the
		// sweep of unused images.
		errs = append(errs, model.FieldError{Field: "metadata.labels[" + model.LabelMadeForPods + "]", Type: model.FieldForbidden,
			Detail: "Forbidden: only the control plane marks the registry images it adds for pods"})
	}
	if len(errs) == 0 && img.Spec.Kind == model.ImageOCI {
		errs = s.checkReference(img.Spec.Source)
	} else if err := s.checkSource(img.Spec.Source); len(errs) == 0 && err != nil {
		errs = append(errs, model.FieldError{Field: "spec.source", Type: model.FieldForbidden, Detail: "Forbidden: " + err.Error()})
	}
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindImage, img.Metadata.Name, errs))
		return
	}
	if err := s.ImageCatalog().Create(c.Request.Context(), &img); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, &img)
}

// checkSource asks the policy about a source; what it says describes the
// URL only, never what is at it.
func (s *Server) checkSource(source string) error {
	if source == "" {
		return nil
	}
	return s.sources.CheckURL(source)
}

// checkReference parses an oci image's registry reference and asks the
// policy about its registry as about an https source there.
func (s *Server) checkReference(source string) model.FieldErrors {
	ref, err := oci.ParseReference(source)
	if err != nil {
		return model.FieldErrors{{Field: "spec.source", Type: model.FieldInvalid, Detail: fmt.Sprintf("Invalid value: %q: %v", source, err)}}
	}
	if err := s.checkSource("https://" + ref.Registry + "/"); err != nil {
		return model.FieldErrors{{Field: "spec.source", Type: model.FieldForbidden, Detail: "Forbidden: " + err.Error()}}
	}
	return nil
}

// DefaultMaxPodRegistryImages bounds the registry images pods may add to
// the catalog: each is imported and kept until no pod has used it for a
// while, so one user could otherwise fill the control plane's image
// store and every node's pool.
const DefaultMaxPodRegistryImages = 500

// registryImage finds the catalog image of a registry reference a
// container names, or builds the one to add for it (inCatalog false): one
// oci image per normalised reference, named after its repository and tag
// (ociImageName), imported once however many pods ask for it. A pod with
// imagePullSecrets gets an image of its own namespace and secrets, pulled
// with them: a private image one namespace pulled is not another's for
// the asking. A new image is added in the transaction of the object that
// names it (store.PodImages), so a create that fails adds none; its
// import starts after the commit (startImports). Field errors are for a
// reference that does not parse or whose registry the source policy
// refuses.
func (s *Server) registryImage(ctx context.Context, field, asked string, p *model.Pod) (img *model.Image, inCatalog bool, errs model.FieldErrors, err error) {
	ref, perr := oci.ParseReference(asked)
	if perr != nil {
		return nil, false, model.FieldErrors{{Field: field, Type: model.FieldInvalid, Detail: fmt.Sprintf("Invalid value: %q: %v", asked, perr)}}, nil
	}
	var secrets []model.SecretReference
	for _, ps := range p.Spec.ImagePullSecrets {
		secrets = append(secrets, model.SecretReference{Namespace: p.Metadata.Namespace, Name: ps.Name})
	}
	name := ociImageName(ref, secrets)
	if img, err := s.ImageCatalog().Get(ctx, name); err != nil || img != nil {
		return img, true, nil, err
	}
	if errs := s.checkReference(asked); len(errs) > 0 {
		errs[0].Field = field
		return nil, false, errs, nil
	}
	img = &model.Image{Metadata: model.ObjectMeta{Name: name}, Spec: model.ImageSpec{Kind: model.ImageOCI, Source: ref.String(), PullSecrets: secrets}}
	systemMeta(&img.Metadata)
	model.DefaultImage(img)
	if errs := model.ValidateImage(img); len(errs) > 0 {
		return nil, false, nil, fmt.Errorf("the catalog image of %q does not validate: %v", asked, errs)
	}
	img.Status = model.ImageStatus{Phase: model.ImagePending}
	return img, false, nil, nil
}

// startImports starts the imports of the images a write added for pods,
// once it committed (a dry run added none). One that does not start now
// is started by the first look of a pod of it (ResolvePodImage), so the
// write stands.
func (s *Server) startImports(ctx context.Context, made []*model.Image) {
	if s.images == nil {
		return
	}
	for _, img := range made {
		ref := controlapi.ImageRef{Name: img.Metadata.Name, UID: img.Metadata.UID}
		if err := s.images.StartImport(ctx, ref); err != nil && !errors.Is(err, workflows.ErrImageBusy) {
			s.log.Warn("the import of an image added for pods did not start; its pods' first look starts it", "image", ref.Name, "err", err)
		}
	}
}

// ociImageName is the catalog name of a registry reference pulled with
// secrets: readable (its repository's last element and its tag, as a DNS
// label) and unique (a hash of the whole normalised reference and the
// secrets).
func ociImageName(ref oci.Reference, secrets []model.SecretReference) string {
	h := sha256.New()
	h.Write([]byte(ref.String()))
	for _, s := range secrets {
		fmt.Fprintf(h, "\n%s/%s", s.Namespace, s.Name)
	}
	sum := h.Sum(nil)
	base := ref.Repository[strings.LastIndex(ref.Repository, "/")+1:]
	if ref.Digest != "" {
		base += "-" + strings.TrimPrefix(ref.Digest, "sha256:")[:12]
	} else {
		base += "-" + ref.Tag
	}
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	label := strings.Trim(b.String(), "-")
	if len(label) > 46 {
		label = strings.TrimRight(label[:46], "-")
	}
	return "oci-" + label + "-" + hex.EncodeToString(sum[:6])
}

// ImageCatalog creates images as POST does: what the image map seeds
// the catalog through.
func (s *Server) ImageCatalog() imagemap.Catalog { return imageCatalog{s} }

type imageCatalog struct{ s *Server }

func (ic imageCatalog) Get(ctx context.Context, name string) (*model.Image, error) {
	img, err := ic.s.store.Images().Get(ctx, "", name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return img, err
}

// Create stores a validated image and starts its import. A zone template
// has nothing to import and is Ready at once.
func (ic imageCatalog) Create(ctx context.Context, img *model.Image) error {
	s := ic.s
	img.Status = model.ImageStatus{Phase: model.ImagePending, BytesTotal: img.Spec.Size}
	if !img.Spec.NeedsPull() {
		img.Status = model.ImageStatus{Phase: model.ImageReady, Message: "zone templates install from the host's packages"}
	}
	if err := s.store.Images().Create(ctx, img); err != nil {
		if errors.Is(err, store.ErrAlreadyExists) {
			if cur, gerr := s.store.Images().Get(ctx, "", img.Metadata.Name); gerr == nil && cur.Metadata.DeletionTimestamp != nil {
				err = fmt.Errorf("%w: image %q is still being deleted; create it again once it is gone", store.ErrAlreadyExists, img.Metadata.Name)
			}
		}
		return err
	}
	if s.images == nil || !img.Spec.NeedsPull() {
		return nil
	}
	ref := controlapi.ImageRef{Name: img.Metadata.Name, UID: img.Metadata.UID}
	if err := s.images.StartImport(ctx, ref); err != nil {
		// Without its import the image would stay Pending for ever.
		_, _ = s.store.Images().Delete(context.WithoutCancel(ctx), "", ref.Name, img.Metadata.ResourceVersion)
		return imageWorkflowError(err)
	}
	return nil
}

func imageWorkflowError(err error) error {
	if errors.Is(err, workflows.ErrImageBusy) {
		return &apiError{code: http.StatusConflict, reason: "AlreadyExists", msg: err.Error()}
	}
	return &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable",
		msg: "Temporal is unavailable; nothing was changed, retry shortly", cause: err}
}

// deleteImage refuses (409) while any pod uses the image. Otherwise the
// image is marked deleting and a workflow removes it from every node and
// from the store, then deletes the row: 202 with the image as marked. A
// server without Temporal has nothing on nodes and deletes the row: 200.
func (s *Server) deleteImage(c *gin.Context) {
	ctx := c.Request.Context()
	name := c.Param("name")
	img, err := s.store.MarkImageDeleting(ctx, name, c.Query("resourceVersion"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if s.images == nil {
		gone, err := s.store.Images().Delete(ctx, "", name, "")
		if err != nil {
			s.fail(c, err)
			return
		}
		respond(c, http.StatusOK, gone)
		return
	}
	if err := s.images.StartDelete(ctx, controlapi.ImageRef{Name: name, UID: img.Metadata.UID}); err != nil {
		s.fail(c, imageWorkflowError(err))
		return
	}
	respond(c, http.StatusAccepted, img)
}

// imageArtefact is the nodes' download endpoint: an image's artefact, or
// a layer blob of the oci image its ?image= names. A node's GET is
// measured into the image's status on that node (startPullProgress).
func (s *Server) imageArtefact(c *gin.Context) {
	if s.artefacts == nil {
		s.fail(c, notFoundf("this server keeps no image store"))
		return
	}
	var w http.ResponseWriter = c.Writer
	if node, ok := s.requestingNode(c); ok && c.Request.Method == http.MethodGet {
		if d := s.startPullProgress(c.Request.Context(), node, c.Param("name"), c.Query("image")); d != nil {
			defer d.end()
			w = &progressWriter{ResponseWriter: c.Writer, d: d}
		}
	}
	s.artefacts.ServeArtefact(w, c.Request, c.Param("name"))
}

// resolvePodImages checks and rewrites the images of a new pod: a
// container naming none gets the map's default, an alias becomes its
// image (what was asked is kept in an annotation), every image must be in
// the catalog and install as the pod's brand, and a pod that sets no
// resources gets the size preset it names (zonewright.io/size) or else its
// image's default resources. A registry reference the catalog has no
// image of yet gets one, returned in add for the write that stores the
// pod to add (store.PodImages).
func (s *Server) resolvePodImages(ctx context.Context, p *model.Pod) (errs model.FieldErrors, add []store.PodImage, err error) {
	var first *model.Image
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		f := fmt.Sprintf("spec.containers[%d].image", i)
		asked := c.Image
		name := s.imageMap.Resolve(asked)
		img, err := s.store.Images().Get(ctx, "", name)
		inCatalog := true
		if errors.Is(err, store.ErrNotFound) && model.IsRegistryReference(name) {
			var ferrs model.FieldErrors
			if img, inCatalog, ferrs, err = s.registryImage(ctx, f, name, p); len(ferrs) > 0 {
				errs = append(errs, ferrs...)
				continue
			}
			if err == nil {
				name = img.Metadata.Name
			}
		}
		if errors.Is(err, store.ErrNotFound) {
			detail := fmt.Sprintf("Not found: %q: no such image in the catalog (GET /api/v1/images)", asked)
			if name != asked {
				detail = fmt.Sprintf("Not found: %q: it names image %q, which is not in the catalog", asked, name)
			}
			errs = append(errs, model.FieldError{Field: f, Type: model.FieldNotFound, Detail: detail})
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if !inCatalog {
			add = append(add, store.PodImage{Image: img, Field: f})
		}
		if img.Metadata.DeletionTimestamp != nil {
			errs = append(errs, model.FieldError{Field: f, Type: model.FieldInvalid, Detail: fmt.Sprintf("Invalid value: %q: the image is being deleted", asked)})
			continue
		}
		if !img.Spec.Fits(p.Spec.RuntimeClassName) {
			errs = append(errs, model.FieldError{Field: "spec.runtimeClassName", Type: model.FieldNotSupported,
				Detail: fmt.Sprintf("Unsupported value: %q: image %q (%s) installs as %s", p.Spec.RuntimeClassName, name, img.Spec.Kind, strings.Join(img.Spec.EffectiveBrands(), ", "))})
		}
		if name != asked {
			if p.Metadata.Annotations == nil {
				p.Metadata.Annotations = map[string]string{}
			}
			p.Metadata.Annotations[model.AnnotationRequestedImagePrefix+c.Name] = asked
			c.Image = name
		}
		if i == 0 {
			first = img
		}
	}
	if len(errs) > 0 || first == nil || len(p.Spec.Containers) == 0 {
		return errs, add, nil
	}
	for _, c := range p.Spec.Containers {
		if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
			return nil, add, nil // the pod says what it needs
		}
	}
	preset := first.Spec.Resources
	if size, ok := p.Metadata.Annotations[model.AnnotationSize]; ok {
		if preset, ok = s.imageMap.Size(size); !ok {
			return model.FieldErrors{{Field: "metadata.annotations[" + model.AnnotationSize + "]", Type: model.FieldNotSupported,
				Detail: fmt.Sprintf("Unsupported value: %q: supported values: %q", size, s.imageMap.SizeNames())}}, nil, nil
		}
	}
	if len(preset) > 0 {
		c := &p.Spec.Containers[0]
		c.Resources.Requests, c.Resources.Limits = copyList(preset), copyList(preset)
	}
	return nil, add, nil
}

// resolveTemplateImages is resolvePodImages for a controller's pod
// template (of the object name in ns): the template is rewritten in
// place, and the fields said are the template's.
func (s *Server) resolveTemplateImages(ctx context.Context, name, ns string, t *model.PodTemplate) (model.FieldErrors, store.PodImages, error) {
	p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: ns, Labels: t.Metadata.Labels, Annotations: t.Metadata.Annotations}, Spec: t.Spec}
	errs, add, err := s.resolvePodImages(ctx, p)
	if err != nil {
		return nil, store.PodImages{}, err
	}
	for i := range errs {
		errs[i].Field = "spec.template." + errs[i].Field
	}
	for i := range add {
		add[i].Field = "spec.template." + add[i].Field
	}
	t.Spec, t.Metadata.Annotations = p.Spec, p.Metadata.Annotations
	return errs, store.PodImages{Add: add, Max: s.maxPodImages}, nil
}

func copyList(l model.ResourceList) model.ResourceList {
	out := model.ResourceList{}
	for k, v := range l {
		out[k] = v
	}
	return out
}
