package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
)

// addedForPod stores a pod naming a new image made for pods, as the API
// does for a pod of a new registry reference.
func addedForPod(t *testing.T, s *store.Store, podName, image string) {
	t.Helper()
	p := pod(podName, nil)
	p.Spec.Containers[0].Image = image
	img := &model.Image{Metadata: model.ObjectMeta{Name: image}, Spec: model.ImageSpec{Kind: model.ImageOCI, Source: "registry.example/" + image + ":1"}}
	made, err := s.CreatePodWithCatalogImages(context.Background(), p, store.PodImages{Add: []store.PodImage{{Image: img, Field: "spec.containers[0].image"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(made) > 1 || (len(made) == 1 && made[0].Metadata.Labels[model.LabelMadeForPods] != "true") {
		t.Fatalf("images added: %+v", made)
	}
}

// unusedFor backdates when the sweep found image unused.
func unusedFor(t *testing.T, s *store.Store, image, age string) {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), "UPDATE images SET unused_since = now() - $2::interval WHERE name = $1", image, age); err != nil {
		t.Fatal(err)
	}
}

func sweep(t *testing.T, s *store.Store) []string {
	t.Helper()
	names, err := s.SweepPodImages(context.Background(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// The sweep removes an image made for pods once it found it unused an
// hour (the TTL here) ago, and nothing else: not an operator's image,
// not one a pod uses, not one only a deployment's template names (drop
// the deployments line of imageUsersSQL to see it removed), not one a
// pod used again since (a pod created
// after the sweep saw the image unused restarts its time, even if it is
// gone again by the next sweep: drop the imageUsedAgain call in
// CreatePodWithCatalogImages to see that image removed).
func TestTheSweepRemovesOnlyImagesUnusedForTheTTL(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	if err := s.Images().Create(ctx, &model.Image{Metadata: model.ObjectMeta{Name: "ops"}, Spec: model.ImageSpec{Kind: model.ImageOCI, Source: "registry.example/ops:1"}}); err != nil {
		t.Fatal(err)
	}
	addedForPod(t, s, "p-old", "old")
	addedForPod(t, s, "p-used", "used")
	addedForPod(t, s, "p-again", "again")
	addedForPod(t, s, "p-tmpl", "tmpl")
	d := &model.Deployment{Metadata: model.ObjectMeta{Name: "idle", Namespace: model.DefaultNamespace}}
	d.Spec.Template.Spec.Containers = []model.Container{{Name: "app", Image: "tmpl"}}
	if _, err := s.CreateDeployment(ctx, d, store.PodImages{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"p-old", "p-again", "p-tmpl"} {
		if _, err := s.Pods().Delete(ctx, model.DefaultNamespace, p, ""); err != nil {
			t.Fatal(err)
		}
	}
	if got := sweep(t, s); len(got) != 0 {
		t.Fatalf("the first sweep after the pods went removed %v", got)
	}
	for _, img := range []string{"ops", "old", "used", "again", "tmpl"} {
		unusedFor(t, s, img, "2 hours")
	}
	// A pod of "again" comes and goes between two sweeps.
	addedForPod(t, s, "p-again-2", "again")
	if _, err := s.Pods().Delete(ctx, model.DefaultNamespace, "p-again-2", ""); err != nil {
		t.Fatal(err)
	}
	if got := sweep(t, s); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("removed %v, want [old]", got)
	}
	if img, err := s.Images().Get(ctx, "", "old"); err != nil || img.Metadata.DeletionTimestamp == nil {
		t.Errorf("the removed image is not being deleted: %+v %v", img, err)
	}
	for _, name := range []string{"ops", "used", "again", "tmpl"} {
		if img, err := s.Images().Get(ctx, "", name); err != nil || img.Metadata.DeletionTimestamp != nil {
			t.Errorf("image %s: %v, deleting %v", name, err, img.Metadata.DeletionTimestamp)
		}
	}
	// An image being deleted is named again, for its removal to be
	// joined or started again.
	if got := sweep(t, s); !slices.Equal(got, []string{"old"}) {
		t.Errorf("the next sweep: %v", got)
	}
}

// Pods created at once naming an image the sweep had found unused all
// get in: forgetting that it was unused does not make them deadlock.
// (Move the imageUsedAgain call after the FOR SHARE lock of the image in
// CreatePodWithCatalogImages to see deadlocks.)
func TestPodsOfAnUnusedImageAtOnce(t *testing.T) {
	s := newStore(t)
	addedForPod(t, s, "first", "idle")
	if _, err := s.Pods().Delete(context.Background(), model.DefaultNamespace, "first", ""); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		unusedFor(t, s, "idle", "2 hours")
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				p := pod(fmt.Sprintf("r%d-p%d", round, i), nil)
				p.Spec.Containers[0].Image = "idle"
				_, errs[i] = s.CreatePodWithCatalogImages(context.Background(), p, store.PodImages{})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d pod %d: %v", round, i, err)
			}
		}
	}
}
