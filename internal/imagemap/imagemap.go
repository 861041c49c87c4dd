// Package imagemap reads the image map file (--image-map): the default
// image, aliases, size presets and the images the catalog should hold.
// Every API replica loads the same file at start, so all agree on aliases
// and sizes without a table of their own.
package imagemap

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sort"

	"sigs.k8s.io/yaml"

	"github.com/zonewright/zonewright/internal/model"
)

// Map is the parsed file.
type Map struct {
	// Default is the image of a container that names none.
	Default string `json:"default,omitempty"`
	// Aliases map a name pods may use to a catalog image.
	Aliases map[string]string `json:"aliases,omitempty"`
	// Sizes are presets (small, medium, large) a pod picks with the
	// zonewright.io/size annotation when it sets no resources.
	Sizes map[string]model.ResourceList `json:"sizes,omitempty"`
	// Images are created in the catalog (and imported) if missing.
	Images map[string]model.ImageSpec `json:"images,omitempty"`
}

// Load reads and checks a map file. An empty path is an empty map.
func Load(path string) (*Map, error) {
	if path == "" {
		return &Map{}, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read image map: %w", err)
	}
	m, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("image map %s: %w", path, err)
	}
	return m, nil
}

// Parse reads a map from YAML (or JSON) and checks it.
func Parse(raw []byte) (*Map, error) {
	var m Map
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		return nil, err
	}
	if errs := m.validate(); len(errs) > 0 {
		return nil, errs
	}
	return &m, nil
}

func (m *Map) validate() model.FieldErrors {
	var errs model.FieldErrors
	for _, name := range sortedKeys(m.Images) {
		img := m.Image(name)
		for _, e := range model.ValidateImage(img) {
			e.Field = "images." + name + "." + e.Field
			errs = append(errs, e)
		}
	}
	for _, alias := range sortedKeys(m.Aliases) {
		errs = append(errs, model.ValidateName("aliases."+alias, m.Aliases[alias])...)
		if _, ok := m.Aliases[m.Aliases[alias]]; ok {
			errs = append(errs, model.FieldError{Field: "aliases." + alias, Type: model.FieldInvalid,
				Detail: fmt.Sprintf("Invalid value: %q: an alias must name an image, not another alias", m.Aliases[alias])})
		}
	}
	for _, size := range sortedKeys(m.Sizes) {
		for k, v := range m.Sizes[size] {
			if k != model.ResourceCPU && k != model.ResourceMemory {
				errs = append(errs, model.FieldError{Field: "sizes." + size + "." + k, Type: model.FieldNotSupported,
					Detail: fmt.Sprintf("Unsupported value: %q: supported values: \"cpu\", \"memory\"", k)})
			} else if _, err := model.ParseQuantity(v); err != nil {
				errs = append(errs, model.FieldError{Field: "sizes." + size + "." + k, Type: model.FieldInvalid,
					Detail: fmt.Sprintf("Invalid value: %q: %v", v, err)})
			}
		}
	}
	return errs
}

// Image returns the catalog object of one of the map's images.
func (m *Map) Image(name string) *model.Image {
	img := &model.Image{Metadata: model.ObjectMeta{Name: name}, Spec: m.Images[name]}
	model.DefaultImage(img)
	return img
}

// Resolve turns what a container asked for into a catalog name: the
// default for an empty name, the target of an alias, else the name itself.
func (m *Map) Resolve(name string) string {
	if m == nil {
		return name
	}
	if name == "" {
		return m.Default
	}
	if target, ok := m.Aliases[name]; ok {
		return target
	}
	return name
}

// Size returns a size preset.
func (m *Map) Size(name string) (model.ResourceList, bool) {
	if m == nil {
		return nil, false
	}
	r, ok := m.Sizes[name]
	return r, ok
}

// SizeNames lists the size presets.
func (m *Map) SizeNames() []string {
	if m == nil {
		return nil
	}
	return sortedKeys(m.Sizes)
}

// Catalog is what Seed needs of the image catalog.
type Catalog interface {
	// Get returns nil, nil when the catalog has no such image.
	Get(ctx context.Context, name string) (*model.Image, error)
	// Create stores the image and starts its import.
	Create(ctx context.Context, img *model.Image) error
}

// Seed creates the map's images that the catalog lacks. An image that
// exists with another spec is left alone (the catalog wins; it may have
// been changed through the API on purpose) and the difference is logged.
// Zone templates go first: they need no import, so a Temporal that is not
// up yet does not hold them back.
func (m *Map) Seed(ctx context.Context, cat Catalog, log *slog.Logger) error {
	names := sortedKeys(m.Images)
	sort.SliceStable(names, func(i, j int) bool {
		return !m.Images[names[i]].NeedsPull() && m.Images[names[j]].NeedsPull()
	})
	for _, name := range names {
		want := m.Image(name)
		cur, err := cat.Get(ctx, name)
		if err != nil {
			return fmt.Errorf("read image %s: %w", name, err)
		}
		if cur != nil {
			if !reflect.DeepEqual(normal(cur.Spec), normal(want.Spec)) {
				log.Warn("the image map and the catalog disagree about an image; keeping the catalog's (delete it to take the map's)",
					"image", name, "catalog", cur.Spec, "map", want.Spec)
			}
			continue
		}
		if err := cat.Create(ctx, want); err != nil {
			return fmt.Errorf("create image %s from the image map: %w", name, err)
		}
		log.Info("image created from the image map", "image", name, "kind", want.Spec.Kind)
	}
	return nil
}

// normal makes empty and nil collections compare equal.
func normal(s model.ImageSpec) model.ImageSpec {
	if len(s.Resources) == 0 {
		s.Resources = nil
	}
	if len(s.Brands) == 0 {
		s.Brands = nil
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
