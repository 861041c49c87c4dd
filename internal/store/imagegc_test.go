package store_test

import (
	"context"
	"testing"

	"github.com/zonewright/zonewright/internal/model"
)

// A node's hold of an image is released for its garbage collection only
// while its state there is Ready and no pod assigned to the node names
// it: a pod scheduled there, in any phase, keeps it; the node sync then
// leaves the pair alone until a pull brings it back. It fails with the
// pod check dropped from ReleaseImageNode's switch (`case inUse`).
func TestReleaseImageNodeKeepsWhatAPodOnTheNodeUses(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	img := &model.Image{Metadata: model.ObjectMeta{Name: "base"}, Spec: model.ImageSpec{Kind: model.ImageZFSStream, Source: "https://example.com/b"},
		Status: model.ImageStatus{Phase: model.ImageReady, ArtefactSize: 4096}}
	if err := s.Images().Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if err := s.Nodes().Create(ctx, &model.Node{Metadata: model.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetImageNode(ctx, "base", model.ImageNodeStatus{Node: n, Phase: model.ImageReady}); err != nil {
			t.Fatal(err)
		}
	}
	p := pod("web", nil)
	p.Spec.NodeName = "n1"
	if err := s.Pods().Create(ctx, p); err != nil {
		t.Fatal(err)
	}

	held, err := s.ImagesOnNode(ctx, "n1")
	if err != nil || len(held) != 1 || !held[0].InUse || held[0].Bytes != 4096 || held[0].LastUsed.IsZero() {
		t.Fatalf("n1 holds %+v (%v); want base in use, 4096 bytes, last used when pulled", held, err)
	}
	if ok, why, err := s.ReleaseImageNode(ctx, "base", "n1"); err != nil || ok {
		t.Fatalf("released the image a pod on n1 uses: %v %q %v", ok, why, err)
	}
	if ok, why, err := s.ReleaseImageNode(ctx, "base", "n2"); err != nil || !ok {
		t.Fatalf("n2, where no pod uses it: %v %q %v", ok, why, err)
	}
	if got, _ := s.Images().Get(ctx, "", "base"); len(got.Status.Nodes) != 1 || got.Status.Nodes[0].Node != "n1" {
		t.Fatalf("a released node leaves status.nodes: %+v", got.Status.Nodes)
	}
	if c, err := s.CollectedImageNodes(ctx); err != nil || !c["base"]["n2"] || len(c["base"]) != 1 {
		t.Fatalf("collected %v (%v); want base on n2: the node sync must not bring it back", c, err)
	}
	if _, _, err := s.SetImageNode(ctx, "base", model.ImageNodeStatus{Node: "n2", Phase: model.ImagePulling}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.CollectedImageNodes(ctx); err != nil || len(c) != 0 {
		t.Fatalf("a pull brings base back to n2: collected %v (%v)", c, err)
	}
	if ok, _, err := s.ReleaseImageNode(ctx, "base", "n2"); err != nil || ok {
		t.Fatalf("released an image being pulled: %v %v", ok, err)
	}
	if _, err := s.Pods().Delete(ctx, model.DefaultNamespace, "web", ""); err != nil {
		t.Fatal(err)
	}
	if ok, why, err := s.ReleaseImageNode(ctx, "base", "n1"); err != nil || !ok {
		t.Fatalf("n1 once its pod went: %v %q %v", ok, why, err)
	}
}
