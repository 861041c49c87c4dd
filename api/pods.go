package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// listPods and getPod show a pod waiting for its image's pull with the
// pull's progress (withPullProgress); a watch shows the pod as stored.
func (s *Server) listPods(c *gin.Context) {
	list, ok := listPage(s, c, s.store.Pods(), c.Param("ns"))
	if !ok {
		return
	}
	pods := make([]*model.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	s.withPullProgress(c.Request.Context(), pods...)
	respond(c, http.StatusOK, list)
}

func (s *Server) getPod(c *gin.Context) {
	p, err := s.store.Pods().Get(c.Request.Context(), c.Param("ns"), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.withPullProgress(c.Request.Context(), p)
	respond(c, http.StatusOK, p)
}

// decodePod reads a pod body addressed to namespace ns.
func decodePod(c *gin.Context, ns string) (*model.Pod, error) {
	var p model.Pod
	if err := decode(c, &p); err != nil {
		return nil, err
	}
	if err := checkTypeMeta(&p.TypeMeta, model.KindPod); err != nil {
		return nil, err
	}
	if p.Metadata.Namespace != "" && p.Metadata.Namespace != ns {
		return nil, badRequestf("the namespace of the object (%q) does not match the namespace of the request (%q)", p.Metadata.Namespace, ns)
	}
	p.Metadata.Namespace = ns
	model.DefaultPod(&p)
	return &p, nil
}

func (s *Server) createPod(c *gin.Context) {
	p, err := decodePod(c, c.Param("ns"))
	if err != nil {
		s.fail(c, err)
		return
	}
	systemMeta(&p.Metadata)
	ctx := c.Request.Context()
	add, err := s.admitPod(ctx, p)
	if err != nil {
		s.fail(c, err)
		return
	}
	// Observed state is the system's to write; a new pod waits for a node.
	p.Status = model.PodStatus{Phase: model.PodPending}
	if err := s.recordCreate(c, p); err != nil {
		s.fail(c, err)
		return
	}
	made, err := s.control.Pods().Create(ctx, p, controlops.PodCreate{Images: store.PodImages{Add: add, Max: s.maxPodImages}})
	s.startImports(ctx, made)
	var fieldErrs model.FieldErrors
	if errors.As(err, &fieldErrs) {
		// An image deleted since it was resolved above.
		err = invalid(model.KindPod, p.Metadata.Name, fieldErrs)
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusCreated, p)
}

// admitPod fills a new pod's default image and checks it: its spec, its
// images (those it adds to the catalog come back), its claims' modes.
func (s *Server) admitPod(ctx context.Context, p *model.Pod) ([]store.PodImage, error) {
	for i := range p.Spec.Containers {
		if ct := &p.Spec.Containers[i]; ct.Image == "" && s.imageMap.Resolve("") != "" {
			ct.Image = s.imageMap.Resolve("")
			p.Metadata.Annotations = withAnnotation(p.Metadata.Annotations, model.AnnotationRequestedImagePrefix+ct.Name, "")
		}
	}
	errs := model.ValidatePod(p)
	var add []store.PodImage
	if len(errs) == 0 {
		var err error
		if errs, add, err = s.resolvePodImages(ctx, p); err != nil {
			return nil, err
		}
	}
	if len(errs) == 0 {
		var err error
		if errs, err = s.checkClaimModes(ctx, p); err != nil {
			return nil, err
		}
	}
	if len(errs) > 0 {
		return nil, invalid(model.KindPod, p.Metadata.Name, errs)
	}
	return add, nil
}

// lifecycleError maps a Temporal failure to the API's statuses.
func lifecycleError(err error) error {
	switch {
	case errors.Is(err, workflows.ErrStillRunning):
		return &apiError{code: http.StatusConflict, reason: "AlreadyExists", msg: err.Error()}
	case errors.Is(err, podcontract.ErrNoLifecycle):
		return &apiError{code: http.StatusConflict, reason: "Conflict", msg: err.Error()}
	case errors.Is(err, workflows.ErrRefused):
		return &apiError{code: http.StatusConflict, reason: "Conflict", msg: strings.TrimPrefix(err.Error(), workflows.ErrRefused.Error()+": ")}
	}
	return &apiError{code: http.StatusServiceUnavailable, reason: "ServiceUnavailable",
		msg: "Temporal is unavailable; nothing was changed, retry shortly", cause: err}
}

// updatePod replaces labels, annotations and tolerations of a pod at the
// resourceVersion the client read. The rest of the spec is fixed at
// creation, as the zone was built from it.
func (s *Server) updatePod(c *gin.Context) {
	ns, name := c.Param("ns"), c.Param("name")
	p, err := decodePod(c, ns)
	if err != nil {
		s.fail(c, err)
		return
	}
	if p.Metadata.Name != "" && p.Metadata.Name != name {
		s.fail(c, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", p.Metadata.Name, name))
		return
	}
	p.Metadata.Name = name
	var errs model.FieldErrors
	if p.Metadata.ResourceVersion == "" {
		errs = append(errs, model.FieldError{Field: "metadata.resourceVersion", Type: model.FieldRequired,
			Detail: "Required value: an update must say which version it replaces; GET the pod first"})
	}
	errs = append(errs, model.ValidatePod(p)...)
	if len(errs) > 0 {
		s.fail(c, invalid(model.KindPod, name, errs))
		return
	}
	cur, err := s.store.Pods().Get(c.Request.Context(), ns, name)
	if err != nil {
		s.fail(c, err)
		return
	}
	wantSpec, curSpec := p.Spec, cur.Spec
	wantSpec.Tolerations, curSpec.Tolerations = nil, nil
	if !reflect.DeepEqual(wantSpec, curSpec) {
		s.fail(c, invalid(model.KindPod, name, model.FieldErrors{{Field: "spec", Type: model.FieldForbidden,
			Detail: "Forbidden: pod updates may not change fields other than metadata.labels, metadata.annotations and spec.tolerations"}}))
		return
	}
	if err := s.takeUserMeta(c, cur, p); err != nil {
		s.fail(c, err)
		return
	}
	cur.Spec.Tolerations = p.Spec.Tolerations
	cur.Metadata.ResourceVersion = p.Metadata.ResourceVersion
	if err := s.store.Pods().Update(c.Request.Context(), cur); err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, cur)
}

// deletePod asks for a pod's removal (controlops.Pods.Delete): its
// lifecycle stops it within the grace period (terminationGracePeriodSeconds,
// or ?gracePeriodSeconds=; 0 forces), then the row goes and watchers see
// DELETED.
func (s *Server) deletePod(c *gin.Context) {
	how, err := podDeleteOptions(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.control.Pods().Delete(c.Request.Context(), c.Param("ns"), c.Param("name"), how)
	if err != nil {
		s.fail(c, err)
		return
	}
	respond(c, http.StatusOK, p)
}

// podDeleteOptions reads a pod's DELETE: the body's options and
// preconditions, ?gracePeriodSeconds= and ?resourceVersion= (which go
// before the body's).
func podDeleteOptions(c *gin.Context) (controlops.PodDelete, error) {
	name := c.Param("name")
	opts, err := deleteOptions(c)
	if err != nil {
		return controlops.PodDelete{}, err
	}
	how := controlops.PodDelete{GracePeriodSeconds: opts.GracePeriodSeconds, ResourceVersion: c.Query("resourceVersion")}
	if g := how.GracePeriodSeconds; g != nil {
		if errs := model.ValidateGracePeriod("gracePeriodSeconds", *g); len(errs) > 0 {
			return how, invalid(model.KindPod, name, errs)
		}
	}
	if g := c.Query("gracePeriodSeconds"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return how, badRequestf("gracePeriodSeconds %q must be an integer between 0 and %d", g, model.MaxGracePeriodSeconds)
		}
		if errs := model.ValidateGracePeriod("gracePeriodSeconds", n); len(errs) > 0 {
			return how, invalid(model.KindPod, name, errs)
		}
		how.GracePeriodSeconds = &n
	}
	if pre := opts.Preconditions; pre != nil {
		how.UID = pre.UID
		if pre.ResourceVersion != nil && how.ResourceVersion == "" {
			how.ResourceVersion = *pre.ResourceVersion
		}
	}
	return how, nil
}

// finalizePod ends a terminating pod's grace period now.
func (s *Server) finalizePod(c *gin.Context) {
	s.updatePodLifecycle(c, podcontract.UpdateFinalize, nil)
}

// cancelPod aborts an in-flight provision and rolls it back; the pod ends
// Failed with reason Cancelled. The body may carry {"reason": "…"}.
func (s *Server) cancelPod(c *gin.Context) {
	var sig podcontract.CancelSignal
	if c.Request.ContentLength != 0 {
		if err := decode(c, &sig); err != nil {
			s.fail(c, err)
			return
		}
	}
	if errs := model.ValidateReason("reason", sig.Reason); len(errs) > 0 {
		s.fail(c, invalid(model.KindPod, c.Param("name"), errs))
		return
	}
	s.updatePodLifecycle(c, podcontract.UpdateCancel, sig)
}

// updatePodLifecycle runs one of the lifecycle's updates, so the caller
// learns whether it was taken (409 with the lifecycle's reason if not).
func (s *Server) updatePodLifecycle(c *gin.Context, update string, arg any) {
	ctx := c.Request.Context()
	p, err := s.store.Pods().Get(ctx, c.Param("ns"), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if s.pods == nil {
		s.fail(c, &apiError{code: http.StatusConflict, reason: "Conflict", msg: "this server runs no pod lifecycles"})
		return
	}
	var args []any
	if arg != nil {
		args = append(args, arg)
	}
	err = s.pods.Update(ctx, p.Metadata.Namespace, p.Metadata.Name, update, args...)
	// A pod whose deletion the API accepted is terminating, though its
	// lifecycle may not have taken the terminate signal yet when a
	// finalize right behind it arrives: give the signal a moment.
	for wait := 50 * time.Millisecond; update == podcontract.UpdateFinalize && p.Metadata.DeletionTimestamp != nil &&
		errors.Is(err, workflows.ErrRefused) && wait <= 1600*time.Millisecond; wait *= 2 {
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		err = s.pods.Update(ctx, p.Metadata.Namespace, p.Metadata.Name, update, args...)
	}
	if err != nil {
		s.fail(c, lifecycleError(err))
		return
	}
	st := success(http.StatusAccepted)
	st.Message = fmt.Sprintf("%s accepted by %s", update, podcontract.WorkflowID(p.Metadata.Namespace, p.Metadata.Name))
	respond(c, http.StatusAccepted, st)
}

func withAnnotation(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// checkClaimModes refuses a pod naming a bound claim of the other volume
// mode: a bhyve pod's claims are disks (zvols), any other pod's file
// systems, fixed when a claim binds. Claims not bound yet, or missing,
// are the scheduler's to judge.
func (s *Server) checkClaimModes(ctx context.Context, p *model.Pod) (model.FieldErrors, error) {
	var errs model.FieldErrors
	mode := model.VolumeModeOf(&p.Spec)
	for i, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		c, err := s.store.Claims().Get(ctx, p.Metadata.Namespace, v.PersistentVolumeClaim.ClaimName)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if c.Status.NodeName != "" && c.Mode() != mode {
			errs = append(errs, model.FieldError{Field: fmt.Sprintf("spec.volumes[%d].persistentVolumeClaim.claimName", i), Type: model.FieldInvalid,
				Detail: "Invalid value: " + model.VolumeModeConflict(v.PersistentVolumeClaim.ClaimName, c.Mode())})
		}
	}
	return errs, nil
}
