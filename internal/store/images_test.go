package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
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
				_, created[i] = s.CreatePodWithCatalogImages(ctx, p, store.PodImages{})
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
		if _, err := s.CreatePodWithCatalogImages(ctx, p, store.PodImages{}); !errors.As(err, &fieldErrs) || fieldErrs[0].Field != "spec.containers[0].image" {
			t.Fatalf("a pod naming a deleting image: got %v, want a field error on spec.containers[0].image", err)
		}
	}
	p.Spec.Containers[0].Image = "absent"
	if _, err := s.CreatePodWithCatalogImages(ctx, p, store.PodImages{}); !errors.As(err, &fieldErrs) || fieldErrs[0].Type != model.FieldNotFound {
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

// An image's state on each node is a row of its own: a read, a list and
// a watch show it in status.nodes as before, the image's own row never
// holds it, and the rows go with their node or their image.
func TestImageNodeStatesAreRowsOfTheirOwn(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	img := &model.Image{Metadata: model.ObjectMeta{Name: "base"}, Spec: model.ImageSpec{Kind: model.ImageZFSStream, Source: "https://example.com/b"},
		Status: model.ImageStatus{Phase: model.ImageReady}}
	if err := s.Images().Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if err := s.Nodes().Create(ctx, &model.Node{Metadata: model.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.Images().Watch(ctx, store.WatchOptions{ResourceVersion: mustRV(t, img.Metadata.ResourceVersion)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	if _, had, err := s.SetImageNode(ctx, "base", model.ImageNodeStatus{Node: "n2", Phase: model.ImagePulling}); err != nil || had {
		t.Fatalf("first state of n2: had %v, %v", had, err)
	}
	prev, had, err := s.SetImageNode(ctx, "base", model.ImageNodeStatus{Node: "n2", Phase: model.ImageReady, Message: "received"})
	if err != nil || !had || prev.Phase != model.ImagePulling || prev.Updated == nil {
		t.Fatalf("n2 replaced %+v (had %v, %v); want its Pulling state", prev, had, err)
	}
	if _, _, err := s.SetImageNode(ctx, "base", model.ImageNodeStatus{Node: "n1", Phase: model.ImageFailed, Reason: model.ImageReasonPullFailed}); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []struct{ image, node string }{{"nope", "n1"}, {"base", "nope"}} {
		if _, _, err := s.SetImageNode(ctx, gone.image, model.ImageNodeStatus{Node: gone.node, Phase: model.ImageReady}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the state of %s on %s: got %v, want ErrNotFound", gone.image, gone.node, err)
		}
	}
	got, err := s.Images().Get(ctx, "", "base")
	if err != nil {
		t.Fatal(err)
	}
	if got.Metadata.ResourceVersion != img.Metadata.ResourceVersion {
		t.Fatalf("a node's state rewrote the image: version %s, was %s", got.Metadata.ResourceVersion, img.Metadata.ResourceVersion)
	}
	wantNodes := func(where string, nodes []model.ImageNodeStatus, want ...string) {
		t.Helper()
		var have []string
		for _, n := range nodes {
			have = append(have, n.Node+":"+n.Phase+":"+n.Reason+":"+n.Message)
		}
		if strings.Join(have, ",") != strings.Join(want, ",") {
			t.Fatalf("%s shows nodes %v; want %v", where, have, want)
		}
	}
	wantNodes("a read", got.Status.Nodes, "n1:Failed:PullFailed:", "n2:Ready::received")
	list, err := s.Images().List(ctx, store.ListOptions{FieldSelector: "status.phase=Ready"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	wantNodes("a list", list.Items[0].Status.Nodes, "n1:Failed:PullFailed:", "n2:Ready::received")

	// A write of the image with stale nodes stores none of them; the
	// change it makes carries the nodes as they are.
	got.Status.Nodes = []model.ImageNodeStatus{{Node: "stale", Phase: model.ImagePulling}}
	got.Status.Message = "on 1 of 2 nodes, 1 failed"
	if err := s.Images().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	wantNodes("the update's result", got.Status.Nodes, "n1:Failed:PullFailed:", "n2:Ready::received")
	var stored bool
	if err := s.Pool().QueryRow(ctx, "SELECT status ? 'nodes' FROM images WHERE name = 'base'").Scan(&stored); err != nil || stored {
		t.Fatalf("the image's row holds nodes: %v %v", stored, err)
	}
	select {
	case ev := <-w.Events:
		var seen model.Image
		if err := json.Unmarshal(ev.Object, &seen); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "MODIFIED" || seen.Status.Message != got.Status.Message {
			t.Fatalf("watch: %s %+v", ev.Type, seen.Status)
		}
		wantNodes("the watch", seen.Status.Nodes, "n1:Failed:PullFailed:", "n2:Ready::received")
	case <-time.After(10 * time.Second):
		t.Fatal("the watch saw no change of the image")
	}

	if _, err := s.DeleteNode(ctx, "n1", ""); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Images().Get(ctx, "", "base")
	wantNodes("a read after n1 was deleted", got.Status.Nodes, "n2:Ready::received")
	if _, err := s.Images().Delete(ctx, "", "base", ""); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM image_node_status").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d node states outlive their image (%v)", rows, err)
	}
}

func mustRV(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Migration 00012 moves the nodes an image's status held into their rows,
// and back when it is rolled back.
func TestImageNodeStatesMigrateBothWays(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	m, err := store.NewMigrator(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := m.DownTo(ctx, 11); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	// As an earlier version stored them, and a node since deleted.
	if _, err := db.Pool().Exec(ctx, `INSERT INTO nodes (uid, name, resource_version) VALUES (gen_random_uuid(), 'n1', 1);
		INSERT INTO images (uid, name, resource_version, spec, status) VALUES (gen_random_uuid(), 'base', 2, '{"kind": "zfs-stream"}',
			'{"phase": "Ready", "nodes": [{"node": "gone", "phase": "Ready"},
				{"node": "n1", "phase": "Failed", "reason": "PullFailed", "message": "no room", "updated": "2026-01-02T03:04:05Z"}]}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	img, err := db.Images().Get(ctx, "", "base")
	if err != nil {
		t.Fatal(err)
	}
	if len(img.Status.Nodes) != 1 || img.Status.Nodes[0].Message != "no room" || img.Status.Nodes[0].Updated == nil ||
		!img.Status.Nodes[0].Updated.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("after the migration the image shows %+v; want n1 Failed as it was", img.Status.Nodes)
	}
	var stored bool
	if err := db.Pool().QueryRow(ctx, "SELECT status ? 'nodes' FROM images WHERE name = 'base'").Scan(&stored); err != nil || stored {
		t.Fatalf("the image's row still holds nodes: %v %v", stored, err)
	}
	if _, err := m.DownTo(ctx, 11); err != nil {
		t.Fatal(err)
	}
	var phase string
	if err := db.Pool().QueryRow(ctx, "SELECT status -> 'nodes' -> 0 ->> 'phase' FROM images WHERE name = 'base'").Scan(&phase); err != nil || phase != model.ImageFailed {
		t.Fatalf("rolled back, the image's row holds node phase %q (%v); want Failed", phase, err)
	}
}

// An oci image's layers are read alone; another image has none, and an
// image that does not exist is not found.
func TestImageLayersAreReadAlone(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	layers := []model.OCILayer{{Digest: "sha256:" + strings.Repeat("a", 64), Size: 10}, {Digest: "sha256:" + strings.Repeat("b", 64), Size: 20}}
	for _, img := range []*model.Image{
		{Metadata: model.ObjectMeta{Name: "layered"}, Spec: model.ImageSpec{Kind: model.ImageOCI, Source: "registry.example/layered:1"},
			Status: model.ImageStatus{Phase: model.ImageReady, OCI: &model.OCIImage{Digest: "sha256:" + strings.Repeat("c", 64), Layers: layers}}},
		{Metadata: model.ObjectMeta{Name: "base"}, Spec: model.ImageSpec{Kind: model.ImageZFSStream, Source: "https://example.com/b"}},
	} {
		if err := s.Images().Create(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.ImageLayers(ctx, "layered"); err != nil || len(got) != 2 || got[0] != layers[0] || got[1] != layers[1] {
		t.Errorf("layers of layered: %+v, %v", got, err)
	}
	if got, err := s.ImageLayers(ctx, "base"); err != nil || got != nil {
		t.Errorf("layers of a zfs image: %+v, %v", got, err)
	}
	if _, err := s.ImageLayers(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("layers of no image: %v, want not found", err)
	}
}
