package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

// A pod created while its image is being deleted is either refused or
// counted by the deletion: never a pod naming a deleted image.
func TestImageDeletionAndPodCreationDoNotRace(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	const rounds, creators = 30, 8
	for round := range rounds {
		name := fmt.Sprintf("img-%d", round)
		if err := s.Images().Create(ctx, &model.Image{Metadata: model.ObjectMeta{Name: name}, Spec: model.ImageSpec{Kind: model.ImageZoneTemplate}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		created := make([]error, creators)
		for i := range creators {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := pod(fmt.Sprintf("r%d-p%d", round, i), nil)
				p.Spec.Containers[0].Image = name
				created[i] = s.CreatePodWithCatalogImages(ctx, p)
			}()
		}
		var markErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, markErr = s.MarkImageDeleting(ctx, name, "")
		}()
		wg.Wait()
		for i, err := range created {
			var fieldErrs model.FieldErrors
			if err != nil && !errors.As(err, &fieldErrs) {
				t.Fatalf("round %d creator %d: %v", round, i, err)
			}
		}
		users, err := s.PodsUsingImage(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case markErr == nil && len(users) > 0:
			t.Fatalf("round %d: image %s marked deleting while pods %v use it", round, name, users)
		case markErr != nil && !errors.Is(markErr, store.ErrConflict):
			t.Fatalf("round %d: mark deleting: %v", round, markErr)
		case markErr != nil && len(users) == 0:
			t.Fatalf("round %d: deletion refused (%v) yet no pod uses the image", round, markErr)
		}
	}
	p := pod("late", nil)
	p.Spec.Containers[0].Image = "img-0"
	var fieldErrs model.FieldErrors
	if img, _ := s.Images().Get(ctx, "", "img-0"); img.Metadata.DeletionTimestamp != nil {
		if err := s.CreatePodWithCatalogImages(ctx, p); !errors.As(err, &fieldErrs) || fieldErrs[0].Field != "spec.containers[0].image" {
			t.Fatalf("a pod naming a deleting image: got %v, want a field error on spec.containers[0].image", err)
		}
	}
	p.Spec.Containers[0].Image = "absent"
	if err := s.CreatePodWithCatalogImages(ctx, p); !errors.As(err, &fieldErrs) || fieldErrs[0].Type != model.FieldNotFound {
		t.Fatalf("a pod naming an absent image: got %v, want a not-found field error", err)
	}
}

// Deleting an image asks which pods use it: with thousands of pods that is
// an index lookup, not a scan of every pod's spec.
func TestPodsUsingImageIsAnIndexLookup(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	p := pod("seed", nil)
	if err := s.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	const pods = 10000
	// Copies of the seed, each naming an image of its own.
	if _, err := s.Pool().Exec(ctx, `INSERT INTO pods (uid, namespace, name, resource_version, spec, status)
		SELECT gen_random_uuid(), namespace, 'p-' || i, resource_version,
			jsonb_set(spec, '{containers,0,image}', to_jsonb('img-' || i)), status
		FROM pods, generate_series(1, $1) AS i WHERE name = 'seed'`, pods); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, "ANALYZE pods"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const lookups = 50
	for range lookups {
		users, err := s.PodsUsingImage(ctx, "img-4242")
		if err != nil || len(users) != 1 || users[0] != "default/p-4242" {
			t.Fatalf("pods using img-4242: %v %v", users, err)
		}
	}
	t.Logf("PodsUsingImage over %d pods: %v per lookup", pods+1, time.Since(start)/lookups)
	match := `[{"image": "img-4242"}]`
	var plan []string
	rows, err := s.Pool().Query(ctx, "EXPLAIN "+store.PodsUsingImageSQL, match)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "pods_containers") || strings.Contains(text, "Seq Scan") {
		t.Fatalf("the lookup of an image's pods does not use the pods_containers index:\n%s", text)
	}
	t.Logf("plan:\n%s", text)
}
