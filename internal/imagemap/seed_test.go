package imagemap_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/zonewright/zonewright/internal/imagemap"
	"github.com/zonewright/zonewright/internal/model"
)

type catalog map[string]*model.Image

func (c catalog) Get(_ context.Context, name string) (*model.Image, error) { return c[name], nil }
func (c catalog) Create(_ context.Context, img *model.Image) error {
	c[img.Metadata.Name] = img
	return nil
}

func TestSeedCreatesWhatIsMissingAndClobbersNothing(t *testing.T) {
	m, err := imagemap.Parse([]byte(`
images:
  base: {kind: zone-template, resources: {cpu: 500m}}
  omnios: {kind: zone-template}
`))
	if err != nil {
		t.Fatal(err)
	}
	changed := &model.Image{Metadata: model.ObjectMeta{Name: "base"}, Spec: model.ImageSpec{Kind: model.ImageZoneTemplate, Resources: model.ResourceList{"cpu": "2"}}}
	cat := catalog{"base": changed}
	if err := m.Seed(context.Background(), cat, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if cat["omnios"] == nil || cat["omnios"].Spec.Kind != model.ImageZoneTemplate {
		t.Fatalf("a missing image is created: %+v", cat["omnios"])
	}
	if cat["base"] != changed || cat["base"].Spec.Resources["cpu"] != "2" {
		t.Fatalf("an image changed in the catalog is kept: %+v", cat["base"])
	}
}
