package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/zonewright/zonewright/internal/model"
)

// Server-side apply, as Kubernetes does it: every write records which
// manager set which fields (metadata.managedFields, structured-merge-diff
// field sets over the kind's OpenAPI schema), and an apply merges a
// manager's configuration into the object, owning what it names,
// removing what it named before and names no more, and refusing with 409
// a field another manager set to another value unless forced. The
// schema is openapi.json's, the document the API serves: lists whose
// items have a key (containers by name, ports by number) merge by it.
//
// Status is the controllers': an apply or update of the object itself
// neither owns nor changes it (resetFields).

// fieldManagers builds a kind's field manager once, from openapi.json.
type fieldManagers struct {
	once      sync.Once
	converter managedfields.TypeConverter
	err       error
	mu        sync.Mutex
	byKind    map[schema.GroupVersionKind]*managedfields.FieldManager
}

func (f *fieldManagers) forKind(gvk schema.GroupVersionKind) (*managedfields.FieldManager, error) {
	f.once.Do(func() { f.converter, f.err = openAPITypeConverter() })
	if f.err != nil {
		return nil, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.byKind[gvk]; ok {
		return fm, nil
	}
	status := fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	reset := map[fieldpath.APIVersion]fieldpath.Filter{fieldpath.APIVersion(gvk.GroupVersion().String()): fieldpath.NewExcludeSetFilter(status)}
	fm, err := managedfields.NewDefaultFieldManager(f.converter, sameVersion{}, noDefaults{}, unstructuredCreater{}, gvk, gvk.GroupVersion(), "", reset)
	if err != nil {
		return nil, err
	}
	if f.byKind == nil {
		f.byKind = map[schema.GroupVersionKind]*managedfields.FieldManager{}
	}
	f.byKind[gvk] = fm
	return fm, nil
}

// openAPITypeConverter reads the kinds' schemas from openapi.json, in
// OpenAPI 3.0's shape (one type, nullable) as structured-merge-diff reads
// them.
func openAPITypeConverter() (managedfields.TypeConverter, error) {
	var doc struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		return nil, err
	}
	models := map[string]*spec.Schema{}
	for name, raw := range doc.Components.Schemas {
		toOpenAPI30(raw)
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, err
		}
		var s spec.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		models[name] = &s
	}
	return managedfields.NewTypeConverter(models, false)
}

// sameVersion converts nothing: each kind is served in one version.
type sameVersion struct{}

func (sameVersion) Convert(in, out, _ any) error {
	return fmt.Errorf("no conversion from %T to %T", in, out)
}
func (sameVersion) ConvertToVersion(in runtime.Object, _ runtime.GroupVersioner) (runtime.Object, error) {
	return in, nil
}
func (sameVersion) UnsafeConvertToVersion(in runtime.Object, _ runtime.GroupVersioner) (runtime.Object, error) {
	return in, nil
}
func (sameVersion) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// noDefaults: the handlers default what the user left out, after the merge.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// fieldManagerName is who makes a write: the fieldManager parameter, or
// else the client's program as its User-Agent names it (kubectl,
// zwctl), as Kubernetes takes it.
func fieldManagerName(c *gin.Context) (string, error) {
	name := c.Query("fieldManager")
	if name == "" {
		name, _, _ = strings.Cut(c.GetHeader("User-Agent"), "/")
	}
	if len(name) > 128 {
		return "", &apiError{code: http.StatusUnprocessableEntity, reason: "Invalid",
			msg:     "fieldManager: Too long: may not be more than 128 bytes",
			details: &model.StatusDetails{Causes: []model.StatusCause{{Type: model.FieldInvalid, Field: "fieldManager", Message: "may not be more than 128 bytes"}}}}
	}
	for _, r := range name {
		if r < ' ' || r > '~' {
			return "", &apiError{code: http.StatusUnprocessableEntity, reason: "Invalid",
				msg:     "fieldManager: Invalid value: must consist of printable characters",
				details: &model.StatusDetails{Causes: []model.StatusCause{{Type: model.FieldInvalid, Field: "fieldManager", Message: "must consist of printable characters"}}}}
		}
	}
	return name, nil
}

// toUnstructured reads an object's JSON for the field manager.
func toUnstructured(b []byte) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return u, nil
}

// appliedKey marks a request whose object server-side apply made: its
// managedFields are the apply's, not an update's.
const appliedKey = "zonewright/applied"

// writeManagers is obj's managedFields after an ordinary write of it
// (create when live is nil, PUT, a patch): the fields it changed from
// live become its manager's, as Kubernetes records every write.
func (s *Server) writeManagers(c *gin.Context, live, obj typedObject) ([]model.ManagedFieldsEntry, error) {
	if c.GetBool(appliedKey) {
		return obj.GetMeta().ManagedFields, nil
	}
	manager, err := fieldManagerName(c)
	if err != nil {
		return nil, err
	}
	tm := obj.GetTypeMeta()
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	fm, err := s.fieldManagers.forKind(gvk)
	if err != nil {
		return nil, err
	}
	objU, err := objectToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	objU.SetGroupVersionKind(gvk)
	var liveObj runtime.Object
	if live == nil {
		liveObj, _ = unstructuredCreater{}.New(gvk)
	} else if liveObj, err = objectToUnstructured(live); err != nil {
		return nil, err
	}
	out, ok := fm.UpdateNoErrors(liveObj, objU, manager).(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("the field manager answered no object")
	}
	return modelManagedFields(out.GetManagedFields())
}

// takeUserMeta copies what a user's write of obj sets in metadata onto
// cur (labels, annotations, and the managers that write makes).
func (s *Server) takeUserMeta(c *gin.Context, cur, obj typedObject) error {
	managed, err := s.writeManagers(c, cur, obj)
	if err != nil {
		return err
	}
	m, o := cur.GetMeta(), obj.GetMeta()
	m.Labels, m.Annotations, m.ManagedFields = o.Labels, o.Annotations, managed
	return nil
}

// recordCreate sets a new object's managedFields.
func (s *Server) recordCreate(c *gin.Context, obj typedObject) error {
	managed, err := s.writeManagers(c, nil, obj)
	obj.GetMeta().ManagedFields = managed
	return err
}

func objectToUnstructured(obj any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return toUnstructured(b)
}

func modelManagedFields(entries []metav1.ManagedFieldsEntry) ([]model.ManagedFieldsEntry, error) {
	b, err := json.Marshal(entries)
	if err != nil {
		return nil, err
	}
	var out []model.ManagedFieldsEntry
	return out, json.Unmarshal(b, &out)
}

// appliedObject merges a server-side apply configuration into live (nil
// when the object does not exist yet) for manager, and is the object to
// write.
func (s *Server) appliedObject(c *gin.Context, gvk schema.GroupVersionKind, live []byte, config *unstructured.Unstructured) ([]byte, error) {
	manager := c.Query("fieldManager")
	force := c.Query("force") == "true"
	fm, err := s.fieldManagers.forKind(gvk)
	if err != nil {
		return nil, unsupportedMedia(fmt.Sprintf("server-side apply is not supported for %s: %v", gvk.Kind, err))
	}
	var liveObj runtime.Object
	if live == nil {
		if liveObj, err = (unstructuredCreater{}).New(gvk); err != nil {
			return nil, err
		}
	} else if liveObj, err = toUnstructured(live); err != nil {
		return nil, err
	}
	out, err := fm.Apply(liveObj, config.DeepCopy(), manager, force)
	if err != nil {
		return nil, applyError(err)
	}
	return json.Marshal(out)
}

// readApplyConfig reads a server-side apply body (YAML or JSON) and
// checks it names the kind and the object of the URL.
func readApplyConfig(c *gin.Context, body []byte, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	if c.Query("fieldManager") == "" {
		return nil, &apiError{code: http.StatusUnprocessableEntity, reason: "Invalid",
			msg:     "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
			details: &model.StatusDetails{Causes: []model.StatusCause{{Type: model.FieldRequired, Field: "fieldManager", Message: "Required value: is required for apply patch"}}}}
	}
	if _, err := fieldManagerName(c); err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, badRequestf("malformed apply configuration: %v", err)
	}
	config, err := toUnstructured(js)
	if err != nil {
		return nil, badRequestf("an apply configuration must be an object with apiVersion and kind: %v", err)
	}
	if config.GroupVersionKind() != gvk {
		return nil, badRequestf("the apply configuration is a %s %s; the URL is a %s %s", config.GetAPIVersion(), config.GetKind(), gvk.GroupVersion(), gvk.Kind)
	}
	if n := config.GetName(); n != c.Param("name") {
		return nil, badRequestf("the name of the object (%q) does not match the name in the URL (%q)", n, c.Param("name"))
	}
	if ns := config.GetNamespace(); ns != "" && ns != c.Param("ns") {
		return nil, badRequestf("the namespace of the object (%q) does not match the namespace in the URL (%q)", ns, c.Param("ns"))
	}
	return config, nil
}

// applyError answers a field manager's refusal as Kubernetes does: a
// conflict names each field and its manager; a configuration outside
// the kind's schema names the field.
func applyError(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		ae := &apiError{code: int(s.Code), reason: string(s.Reason), msg: s.Message}
		if s.Details != nil {
			ae.details = &model.StatusDetails{Name: s.Details.Name, Kind: s.Details.Kind}
			for _, cause := range s.Details.Causes {
				ae.details.Causes = append(ae.details.Causes, model.StatusCause{Type: string(cause.Type), Message: cause.Message, Field: cause.Field})
			}
		}
		if ae.code == 0 {
			ae.code = http.StatusInternalServerError
		}
		return ae
	}
	return &apiError{code: http.StatusUnprocessableEntity, reason: "Invalid", msg: "the apply configuration does not fit the kind: " + err.Error()}
}

// typedObject is an object of a kind: its type and its metadata.
type typedObject interface {
	GetTypeMeta() *model.TypeMeta
	GetMeta() *model.ObjectMeta
}
