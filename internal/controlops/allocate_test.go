package controlops_test

import (
	"errors"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/ipam"
	"github.com/zonewright/zonewright/internal/model"
)

// An allocation for a pod whose row is gone (a forced delete removed it
// and released its address while a lifecycle it terminated still ran a
// step) keeps no address: it is released at once. The pod's own
// allocation is unaffected.
func TestAnAddressIsNeverKeptForAPodThatIsGone(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	createNode(t, st, "n1", time.Now())
	p := &model.Pod{Metadata: model.ObjectMeta{Name: "web", Namespace: model.DefaultNamespace},
		Spec: model.PodSpec{Containers: []model.Container{{Name: "c", Image: "i", Command: []string{"c"}}}}}
	if err := st.CreatePod(ctx, p); err != nil {
		t.Fatal(err)
	}
	ctl := controlops.NewControl(st, nil)
	live := controlapi.PodRef{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID}
	res, err := ctl.AllocatePodIP(ctx, controlapi.AllocateInput{Pod: live, Node: "n1"})
	if err != nil || res.IP == "" {
		t.Fatalf("the pod's allocation: %+v, %v", res, err)
	}

	// The same name, an incarnation that was removed; and a name with no row.
	for _, gone := range []controlapi.PodRef{
		{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: "0b6f6d9e-5c1a-4c41-9d0e-6a1e2f3b4c5d"},
		{Namespace: p.Metadata.Namespace, Name: "removed", UID: "7f1c2d3e-4b5a-4e6f-8a9b-0c1d2e3f4a5b"},
	} {
		_, err := ctl.AllocatePodIP(ctx, controlapi.AllocateInput{Pod: gone, Node: "n1"})
		if !errors.Is(err, controlops.ErrPodGone) {
			t.Errorf("allocation for %s: %v, want ErrPodGone", gone.UID, err)
		}
		if _, addr, held, err := ipam.New(st.Pool()).Lookup(ctx, gone.UID); err != nil || held {
			t.Errorf("pod %s, which is gone, holds %s (%v)", gone.UID, addr, err)
		}
	}
	if _, addr, held, err := ipam.New(st.Pool()).Lookup(ctx, live.UID); err != nil || !held || addr.String() != res.IP {
		t.Errorf("the live pod holds %s, %v (%v); want %s", addr, held, err, res.IP)
	}
}
