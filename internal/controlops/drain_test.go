package controlops_test

import (
	"context"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/controlapi"
	"github.com/zonewright/zonewright/internal/controlops"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/storetest"
)

// A terminating pod may stop once no service lists it and every Ready
// node programming service rules has applied that; the wait ends at its
// deadline otherwise.
func TestWaitEndpointsLeftFollowsTheNodes(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	createNode(t, st, "n1", time.Now())
	createNode(t, st, "n2", time.Now()) // programs no rules: not waited for
	setApplied := func(gen int64) {
		t.Helper()
		n, err := st.Nodes().Get(ctx, "", "n1")
		if err != nil {
			t.Fatal(err)
		}
		n.Status.ServiceNetwork = &model.NodeServiceNetwork{Generation: gen}
		if err := st.Nodes().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	setApplied(5)
	holder := &servicenet.Holder{}
	holder.Store(&servicenet.Snapshot{Generation: 5, Services: []servicenet.Service{{Namespace: "default", Name: "web",
		ClusterIP: "10.96.0.20", Endpoints: []servicenet.Endpoint{{IP: "10.88.1.2"}, {IP: "10.88.1.3"}}}}})
	c := controlops.NewControl(st, nil)
	c.ServiceNet = holder
	in := controlapi.EndpointsLeftInput{IP: "10.88.1.2", Until: time.Now().Add(300 * time.Millisecond)}
	if res, err := c.WaitEndpointsLeft(ctx, in); err != nil || res.Left {
		t.Fatalf("left while a service still lists the pod: %+v %v", res, err)
	}

	done := make(chan controlapi.EndpointsLeftResult, 1)
	in.Until = time.Now().Add(10 * time.Second)
	go func() {
		res, err := c.WaitEndpointsLeft(ctx, in)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	holder.Store(&servicenet.Snapshot{Generation: 6, Services: []servicenet.Service{{Namespace: "default", Name: "web",
		ClusterIP: "10.96.0.20", Endpoints: []servicenet.Endpoint{{IP: "10.88.1.3"}}}}})
	select {
	case res := <-done:
		t.Fatalf("left before the node applied generation 6: %+v", res)
	case <-time.After(400 * time.Millisecond):
	}
	setApplied(6)
	select {
	case res := <-done:
		if !res.Left || res.Generation != 6 {
			t.Fatalf("result %+v, want left at generation 6", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after the node applied generation 6")
	}
}
