package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

func TestImageDeletionWaitsForItsPods(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	img := &model.Image{Metadata: model.ObjectMeta{Name: "base"}, Spec: model.ImageSpec{Kind: model.ImageZoneTemplate}}
	if err := s.Images().Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureNamespace(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	p := pod("web", nil) // names image "base"
	p.Metadata.Namespace = "team"
	if err := s.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	other := pod("other", nil)
	other.Spec.Containers[0].Image = "base-2"
	if err := s.CreatePod(ctx, other); err != nil {
		t.Fatal(err)
	}
	users, err := s.PodsUsingImage(ctx, "base")
	if err != nil || len(users) != 1 || users[0] != "team/web" {
		t.Fatalf("pods using base: %v %v", users, err)
	}
	if _, err := s.MarkImageDeleting(ctx, "base", ""); !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "team/web") {
		t.Fatalf("want a conflict naming team/web, got %v", err)
	}
	if _, err := s.Pods().Delete(ctx, "team", "web", ""); err != nil {
		t.Fatal(err)
	}
	got, err := s.MarkImageDeleting(ctx, "base", "")
	if err != nil || got.Metadata.DeletionTimestamp == nil {
		t.Fatalf("an unused image is marked deleting: %+v %v", got, err)
	}
	if _, err := s.MarkImageDeleting(ctx, "nope", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("want not found, got %v", err)
	}
}
