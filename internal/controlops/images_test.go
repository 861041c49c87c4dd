package controlops_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/workflows/podcontract"
)

// imageChanges counts the Image's rows in the change feed and their bytes.
func imageChanges(t *testing.T, st *store.Store, name string) (rows, bytes int64) {
	t.Helper()
	err := st.Pool().QueryRow(context.Background(), `SELECT count(*), coalesce(sum(length(object::text)), 0)
		FROM changes WHERE kind = $1 AND name = $2`, model.KindImage, name).Scan(&rows, &bytes)
	if err != nil {
		t.Fatal(err)
	}
	return rows, bytes
}

// A distribution to a hundred nodes reporting at once: every node's
// report lands in its own row and every read shows it, while the Image is
// written once when the last pull ends (its watchers see the start and
// the end of the distribution), not once per report.
func TestDistributionToManyNodesWritesTheImageOnceAtTheEnd(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	const nodes = 100
	now := time.Now()
	for i := range nodes {
		n := &model.Node{Metadata: model.ObjectMeta{Name: fmt.Sprintf("n%03d", i), Labels: map[string]string{model.LabelNodeBrandPrefix + model.BrandLX: "true"}},
			Status: model.NodeStatus{Conditions: []model.NodeCondition{{Type: model.NodeReady, Status: model.ConditionTrue, LastHeartbeatTime: &now}}}}
		model.DefaultNode(n)
		if err := st.Nodes().Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	img := &model.Image{Metadata: model.ObjectMeta{Name: "base"}, Spec: model.ImageSpec{Kind: model.ImageZFSStream, Source: "https://example.com/base.zfs"}}
	if err := st.Images().Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	ops := &controlops.Images{Store: st}
	targets, err := ops.MarkImageReady(ctx, controlapi.ImageReadyInput{Image: controlapi.ImageRef{Name: "base", UID: img.Metadata.UID},
		Artefact: controlapi.ImageArtefact{SHA256: "ab", Size: 1 << 20}})
	if err != nil || len(targets.Nodes) != nodes {
		t.Fatalf("the import goes to %d nodes (%v); want %d", len(targets.Nodes), err, nodes)
	}
	if ready, _ := st.Images().Get(ctx, "", "base"); len(ready.Status.Nodes) != nodes || ready.Status.Nodes[0].Phase != model.ImagePulling {
		t.Fatalf("once Ready every node is Pulling: %+v", ready.Status.Nodes)
	}
	rows0, bytes0 := imageChanges(t, st, "base")
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 2*nodes)
	for _, node := range targets.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			end := model.ImageReady
			if node == "n007" {
				end = model.ImageFailed
			}
			for _, phase := range []string{model.ImagePulling, end} {
				errs <- ops.SetImageNodeStatus(ctx, controlapi.ImageNodeUpdate{Image: "base", Node: node, Phase: phase, Message: phase + " on " + node})
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, bytes := imageChanges(t, st, "base")
	t.Logf("%d nodes reporting Pulling then Ready at once: %v, %d write(s) of the Image, %d bytes of change feed",
		nodes, took, rows-rows0, bytes-bytes0)
	got, err := st.Images().Get(ctx, "", "base")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Nodes) != nodes {
		t.Fatalf("the image shows %d nodes; want %d", len(got.Status.Nodes), nodes)
	}
	for _, ns := range got.Status.Nodes {
		want := model.ImageReady
		if ns.Node == "n007" {
			want = model.ImageFailed
		}
		if ns.Phase != want || ns.Message != want+" on "+ns.Node || ns.Updated == nil {
			t.Errorf("node %s: %+v; want %s with its message and time", ns.Node, ns, want)
		}
	}
	if want := "on 99 of 100 nodes, 1 failed"; got.Status.Message != want {
		t.Errorf("message %q; want %q", got.Status.Message, want)
	}
	if rows-rows0 != 1 {
		t.Errorf("the distribution's reports wrote the Image %d times; want once, at its end", rows-rows0)
	}
}

// A pod whose pull policy is Never is told its image is missing (and
// not to pull it) where its node lacks the image, and runs where it has it.
func TestResolveNeverPull(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	img := &model.Image{Metadata: model.ObjectMeta{Name: "base"}, Spec: model.ImageSpec{Kind: model.ImageZFSStream, Source: "https://example.com/base.zfs"},
		Status: model.ImageStatus{Phase: model.ImageReady}}
	if err := st.Images().Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	n := &model.Node{Metadata: model.ObjectMeta{Name: "has"}}
	model.DefaultNode(n)
	if err := st.Nodes().Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.SetImageNode(ctx, "base", model.ImageNodeStatus{Node: "has", Phase: model.ImageReady, Updated: &now}); err != nil {
		t.Fatal(err)
	}
	ops := &controlops.Images{Store: st}
	lacks, err := ops.ResolvePodImage(ctx, controlapi.ImageNodeInput{Image: "base", Node: "lacks", NeverPull: true})
	if err != nil || lacks.Pull || !lacks.Failed || lacks.Reason != podcontract.ReasonErrImageNeverPull {
		t.Fatalf("node without the image: %+v %v", lacks, err)
	}
	if pulls, _ := ops.ResolvePodImage(ctx, controlapi.ImageNodeInput{Image: "base", Node: "lacks"}); !pulls.Pull || pulls.Failed {
		t.Fatalf("without Never the same node pulls: %+v", pulls)
	}
	if has, err := ops.ResolvePodImage(ctx, controlapi.ImageNodeInput{Image: "base", Node: "has", NeverPull: true}); err != nil || !has.Present {
		t.Fatalf("node with the image: %+v %v", has, err)
	}
}

// importsAsked records the imports ResolvePodImage starts again.
type importsAsked struct{ names []string }

func (p *importsAsked) EnsurePull(context.Context, string, string) error { return nil }
func (p *importsAsked) StartDelete(context.Context, controlapi.ImageRef) error {
	return errors.New("no deletions in this test")
}
func (p *importsAsked) EnsureImport(_ context.Context, ref controlapi.ImageRef) error {
	p.names = append(p.names, ref.Name)
	return nil
}

// A registry image whose import failed is imported again when a pod
// looks at it (the kubelet retries pulls); an operator's image that
// failed is left for the operator.
func TestAFailedRegistryImageIsImportedAgainWhenAPodLooks(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	for _, img := range []*model.Image{
		{Metadata: model.ObjectMeta{Name: "oci-later"}, Spec: model.ImageSpec{Kind: model.ImageOCI, Source: "registry.example/later:1"},
			Status: model.ImageStatus{Phase: model.ImageFailed, Message: "the registry has no such image"}},
		{Metadata: model.ObjectMeta{Name: "tarball"}, Spec: model.ImageSpec{Kind: model.ImageZFSStream, Source: "https://example.com/t.zfs"},
			Status: model.ImageStatus{Phase: model.ImageFailed, Message: "DigestMismatch"}},
	} {
		if err := st.Images().Create(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	pulls := &importsAsked{}
	ops := &controlops.Images{Store: st, Pulls: pulls}
	r, err := ops.ResolvePodImage(ctx, controlapi.ImageNodeInput{Image: "oci-later", Node: "n1"})
	if err != nil || !r.Failed || !strings.Contains(r.Message, "importing it again") || !slices.Equal(pulls.names, []string{"oci-later"}) {
		t.Fatalf("a failed registry image: %+v %v; imports asked %v", r, err, pulls.names)
	}
	r, err = ops.ResolvePodImage(ctx, controlapi.ImageNodeInput{Image: "tarball", Node: "n1"})
	if err != nil || !r.Failed || strings.Contains(r.Message, "again") || len(pulls.names) != 1 {
		t.Fatalf("a failed operator's image: %+v %v; imports asked %v", r, err, pulls.names)
	}
}

// An image added for pods whose import did not start with its first pod
// (Temporal did not answer after the pod was stored) is imported when a
// pod of it looks; an operator's image waiting for its own import is
// not. (Drop `|| pending` in ResolvePodImage to see the pod wait for
// ever.)
func TestAPendingImageAddedForPodsIsImportedWhenAPodLooks(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	for _, img := range []*model.Image{
		{Metadata: model.ObjectMeta{Name: "oci-new", Labels: map[string]string{model.LabelMadeForPods: "true"}},
			Spec: model.ImageSpec{Kind: model.ImageOCI, Source: "registry.example/new:1"}, Status: model.ImageStatus{Phase: model.ImagePending}},
		{Metadata: model.ObjectMeta{Name: "ops-new"}, Spec: model.ImageSpec{Kind: model.ImageOCI, Source: "registry.example/new:1"},
			Status: model.ImageStatus{Phase: model.ImagePending}},
	} {
		if err := st.Images().Create(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	pulls := &importsAsked{}
	ops := &controlops.Images{Store: st, Pulls: pulls}
	for _, name := range []string{"oci-new", "ops-new"} {
		if r, err := ops.ResolvePodImage(ctx, controlapi.ImageNodeInput{Image: name, Node: "n1"}); err != nil || r.Failed || r.Present {
			t.Fatalf("a pending image %s: %+v %v", name, r, err)
		}
	}
	if !slices.Equal(pulls.names, []string{"oci-new"}) {
		t.Errorf("imports asked: %v", pulls.names)
	}
}
