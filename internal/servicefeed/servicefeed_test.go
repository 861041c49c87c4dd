package servicefeed_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/servicefeed"
	"github.com/zonewright/zonewright/internal/servicenet"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func svc(name, clusterIP string, ports ...model.ServicePort) model.Service {
	s := model.Service{Metadata: model.ObjectMeta{Name: name, Namespace: "default"}, Spec: model.ServiceSpec{ClusterIP: clusterIP, Ports: ports}}
	model.DefaultService(&s)
	return s
}

func addr(ip, pod string) model.EndpointAddress {
	return model.EndpointAddress{IP: ip, NodeName: "n1", TargetRef: &model.ObjectReference{Kind: "Pod", Name: pod}}
}

func TestBuildResolvesEachEndpointsPorts(t *testing.T) {
	web := svc("web", "10.96.5.5", model.ServicePort{Name: "http", Port: 80}, model.ServicePort{Name: "dns", Port: 53, Protocol: "UDP"})
	db := svc("db", model.ClusterIPNone)
	eps := []model.Endpoints{{Metadata: model.ObjectMeta{Name: "web", Namespace: "default"}, EndpointsData: model.EndpointsData{Subsets: []model.EndpointSubset{
		{Addresses: []model.EndpointAddress{addr("10.88.0.10", "b")}, NotReadyAddresses: []model.EndpointAddress{addr("10.88.0.3", "c")},
			Ports: []model.EndpointPort{{Name: "http", Port: 8080, Protocol: "TCP"}, {Name: "dns", Port: 5353, Protocol: "UDP"}}},
		{Addresses: []model.EndpointAddress{addr("10.88.0.9", "a")}, Ports: []model.EndpointPort{{Name: "http", Port: 9090, Protocol: "TCP"}}},
	}}}}
	snap := servicefeed.Build(7, []model.Service{web, db}, eps)
	if snap.Generation != 7 || len(snap.Services) != 2 {
		t.Fatalf("snapshot %+v", snap)
	}
	w := snap.Services[0]
	if w.ClusterIP != "10.96.5.5" || w.SessionAffinity != "None" || len(w.Ports) != 2 || w.Ports[1].Protocol != "UDP" {
		t.Fatalf("service web: %+v", w)
	}
	if len(w.Endpoints) != 2 {
		t.Fatalf("web's endpoints %+v: want the two ready pods, not the not-ready one", w.Endpoints)
	}
	a, b := w.Endpoints[0], w.Endpoints[1]
	if a.Pod != "a" || a.IP != "10.88.0.9" || a.TargetPorts[0] != 9090 || a.TargetPorts[1] != 0 || a.Node != "n1" {
		t.Fatalf("endpoint a: %+v, want 10.88.0.9 first (numeric order) with ports [9090 0]", a)
	}
	if b.Pod != "b" || b.TargetPorts[0] != 8080 || b.TargetPorts[1] != 5353 {
		t.Fatalf("endpoint b: %+v, want ports [8080 5353]", b)
	}
	if d := snap.Services[1]; !d.Headless() || d.Endpoints != nil {
		t.Fatalf("headless db without endpoints: %+v", d)
	}
}

func newStore(t *testing.T) *store.Store { return storetest.New(t) }

func follow(t *testing.T, s *store.Store) *servicenet.Holder {
	t.Helper()
	h := &servicenet.Holder{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&servicefeed.Follower{Store: s, Holder: h, Log: slog.New(slog.DiscardHandler)}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func waitFor(t *testing.T, h *servicenet.Holder, after int64, d time.Duration) *servicenet.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	snap := h.Newer(ctx, after)
	if snap == nil {
		t.Fatalf("no snapshot above generation %d within %s", after, d)
	}
	return snap
}

func TestSnapshotFollowsChangesAndNeverGoesBack(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	ips := clusterip.MustParse(clusterip.DefaultCIDR)
	web := svc("web", "", model.ServicePort{Port: 80})
	if err := s.CreateService(ctx, &web, ips); err != nil {
		t.Fatal(err)
	}
	h := follow(t, s)
	first := waitFor(t, h, 0, 5*time.Second)
	if len(first.Services) != 1 || first.Services[0].ClusterIP != web.Spec.ClusterIP {
		t.Fatalf("first snapshot %+v", first)
	}

	// An Endpoints change advances the generation within a second.
	ep := &model.Endpoints{Metadata: model.ObjectMeta{Name: "web", Namespace: "default"}, EndpointsData: model.EndpointsData{Subsets: []model.EndpointSubset{
		{Addresses: []model.EndpointAddress{addr("10.88.0.2", "a")}, Ports: []model.EndpointPort{{Port: 8080, Protocol: "TCP"}}}}}}
	if err := s.Endpoints().Create(ctx, ep); err != nil {
		t.Fatal(err)
	}
	second := waitFor(t, h, first.Generation, time.Second)
	if e := second.Services[0].Endpoints; len(e) != 1 || e[0].IP != "10.88.0.2" || e[0].TargetPorts[0] != 8080 {
		t.Fatalf("endpoints not in the snapshot: %+v", second.Services[0])
	}
	// Other kinds' changes do not make a new generation.
	if err := s.EnsureNamespace(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if snap := h.Newer(wctx, second.Generation); snap != nil {
		t.Fatalf("a namespace made generation %d", snap.Generation)
	}
	cancel()
	// A deleted service leaves the snapshot.
	if _, err := s.DeleteService(ctx, "default", "web", ""); err != nil {
		t.Fatal(err)
	}
	third := waitFor(t, h, second.Generation, time.Second)
	if len(third.Services) != 0 {
		t.Fatalf("deleted service still in the snapshot: %+v", third)
	}
	// A new follower (a restart) starts at or above what was served.
	again := waitFor(t, follow(t, s), 0, 5*time.Second)
	if again.Generation < third.Generation || len(again.Services) != 0 {
		t.Fatalf("after a restart generation %d (served %d before)", again.Generation, third.Generation)
	}
}
