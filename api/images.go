package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/model"
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
	if err := s.checkSource(img.Spec.Source); len(errs) == 0 && err != nil {
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
	if s.sources == nil || source == "" {
		return nil
	}
	return s.sources.CheckURL(source)
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
	ref := controlops.ImageRef{Name: img.Metadata.Name, UID: img.Metadata.UID}
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
	if err := s.images.StartDelete(ctx, controlops.ImageRef{Name: name, UID: img.Metadata.UID}); err != nil {
		s.fail(c, imageWorkflowError(err))
		return
	}
	respond(c, http.StatusAccepted, img)
}

// imageArtefact is the nodes' download endpoint (token-checked by the store).
func (s *Server) imageArtefact(c *gin.Context) {
	if s.artefacts == nil {
		s.fail(c, notFoundf("this server keeps no image store"))
		return
	}
	s.artefacts.ServeArtefact(c.Writer, c.Request, c.Param("name"))
}

// resolvePodImages checks and rewrites the images of a new pod: a
// container naming none gets the map's default, an alias becomes its
// image (what was asked is kept in an annotation), every image must be in
// the catalog and install as the pod's brand, and a pod that sets no
// resources gets the size preset it names (zonewright.io/size) or else its
// image's default resources.
func (s *Server) resolvePodImages(ctx context.Context, p *model.Pod) (model.FieldErrors, error) {
	var errs model.FieldErrors
	var first *model.Image
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		f := fmt.Sprintf("spec.containers[%d].image", i)
		asked := c.Image
		name := s.imageMap.Resolve(asked)
		img, err := s.store.Images().Get(ctx, "", name)
		if errors.Is(err, store.ErrNotFound) {
			detail := fmt.Sprintf("Not found: %q: no such image in the catalog (GET /api/v1/images)", asked)
			if name != asked {
				detail = fmt.Sprintf("Not found: %q: it names image %q, which is not in the catalog", asked, name)
			}
			errs = append(errs, model.FieldError{Field: f, Type: model.FieldNotFound, Detail: detail})
			continue
		}
		if err != nil {
			return nil, err
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
		return errs, nil
	}
	for _, c := range p.Spec.Containers {
		if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
			return nil, nil // the pod says what it needs
		}
	}
	preset := first.Spec.Resources
	if size, ok := p.Metadata.Annotations[model.AnnotationSize]; ok {
		if preset, ok = s.imageMap.Size(size); !ok {
			return model.FieldErrors{{Field: "metadata.annotations[" + model.AnnotationSize + "]", Type: model.FieldNotSupported,
				Detail: fmt.Sprintf("Unsupported value: %q: supported values: %q", size, s.imageMap.SizeNames())}}, nil
		}
	}
	if len(preset) > 0 {
		c := &p.Spec.Containers[0]
		c.Resources.Requests, c.Resources.Limits = copyList(preset), copyList(preset)
	}
	return nil, nil
}

func copyList(l model.ResourceList) model.ResourceList {
	out := model.ResourceList{}
	for k, v := range l {
		out[k] = v
	}
	return out
}
