package endpoints_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/endpoints"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newStore(t *testing.T) *store.Store { return storetest.New(t) }

// startController runs a controller until the returned stop is called.
func startController(t *testing.T, s *store.Store) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&endpoints.Controller{Store: s, Log: slog.New(slog.DiscardHandler), Resync: time.Minute}).Run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func createService(t *testing.T, s *store.Store, name string) {
	t.Helper()
	svc := &model.Service{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace, Labels: map[string]string{"tier": "front"}},
		Spec: model.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []model.ServicePort{{Name: "http", Port: 80, TargetPort: model.StrValue("http")}}}}
	model.DefaultService(svc)
	if err := s.CreateService(context.Background(), svc, clusterip.MustParse(clusterip.DefaultCIDR)); err != nil {
		t.Fatal(err)
	}
}

func createPod(t *testing.T, s *store.Store, name, app, ip string, ready bool) {
	t.Helper()
	p := &model.Pod{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace, Labels: map[string]string{"app": app}},
		Spec: model.PodSpec{NodeName: "n1", Containers: []model.Container{{Name: "c", Image: "i", Command: []string{"c"},
			Ports: []model.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
	model.DefaultPod(p)
	p.Status = model.PodStatus{Phase: model.PodRunning, PodIP: ip, Conditions: []model.PodCondition{{Type: model.PodReady, Status: cond(ready)}}}
	if err := s.CreatePod(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func cond(ready bool) string {
	if ready {
		return model.ConditionTrue
	}
	return model.ConditionFalse
}

func setReady(t *testing.T, s *store.Store, name string, ready bool) {
	t.Helper()
	_, err := s.Pods().Modify(context.Background(), model.DefaultNamespace, name, func(p *model.Pod) bool {
		model.SetCondition(&p.Status.Conditions, model.PodCondition{Type: model.PodReady, Status: cond(ready)}, time.Now())
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}

// addresses renders a service's Endpoints as "ready|notReady" pod names,
// or "none" when the object does not exist.
func addresses(s *store.Store, name string) string {
	ep, err := s.Endpoints().Get(context.Background(), model.DefaultNamespace, name)
	if errors.Is(err, store.ErrNotFound) {
		return "none"
	}
	if err != nil {
		return "error: " + err.Error()
	}
	var ready, notReady []string
	for _, sub := range ep.Subsets {
		for _, a := range sub.Addresses {
			ready = append(ready, a.TargetRef.Name+":"+a.IP)
		}
		for _, a := range sub.NotReadyAddresses {
			notReady = append(notReady, a.TargetRef.Name+":"+a.IP)
		}
	}
	return strings.Join(ready, ",") + "|" + strings.Join(notReady, ",")
}

// within waits up to d for the Endpoints of name to read want.
func within(t *testing.T, s *store.Store, d time.Duration, name, want string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := addresses(s, name)
		if got == want {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("endpoints %s are %q after %s, want %q", name, got, d, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestEndpointsFollowReadinessWithinASecond(t *testing.T) {
	s := newStore(t)
	createService(t, s, "web")
	createPod(t, s, "a", "web", "10.88.0.2", true)
	createPod(t, s, "b", "web", "10.88.0.3", false)
	createPod(t, s, "other", "db", "10.88.0.4", true)
	startController(t, s)
	within(t, s, 10*time.Second, "web", "a:10.88.0.2|b:10.88.0.3")
	ep, _ := s.Endpoints().Get(context.Background(), model.DefaultNamespace, "web")
	if ep.Metadata.Labels["tier"] != "front" || ep.Subsets[0].Ports[0].Port != 8080 || ep.Subsets[0].Ports[0].Name != "http" {
		t.Fatalf("endpoints lack the service's labels or the resolved port: %+v", ep)
	}

	setReady(t, s, "b", true)
	within(t, s, time.Second, "web", "a:10.88.0.2,b:10.88.0.3|")
	setReady(t, s, "a", false)
	within(t, s, time.Second, "web", "b:10.88.0.3|a:10.88.0.2")
	if _, err := s.Pods().Delete(context.Background(), model.DefaultNamespace, "b", ""); err != nil {
		t.Fatal(err)
	}
	within(t, s, time.Second, "web", "|a:10.88.0.2")
	// A new selector picks other pods.
	if _, err := s.Services().Modify(context.Background(), model.DefaultNamespace, "web", func(svc *model.Service) bool {
		svc.Spec.Selector = map[string]string{"app": "db"}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	within(t, s, time.Second, "web", "other:10.88.0.4|")
	if _, err := s.Services().Modify(context.Background(), model.DefaultNamespace, "web", func(svc *model.Service) bool {
		svc.Spec.Selector = map[string]string{"app": "web"}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	within(t, s, time.Second, "web", "|a:10.88.0.2")
	// Relabelled out of the selector: gone from the service.
	if _, err := s.Pods().Modify(context.Background(), model.DefaultNamespace, "a", func(p *model.Pod) bool {
		p.Metadata.Labels = map[string]string{"app": "elsewhere"}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	within(t, s, time.Second, "web", "|")
	if _, err := s.DeleteService(context.Background(), model.DefaultNamespace, "web", ""); err != nil {
		t.Fatal(err)
	}
	within(t, s, time.Second, "web", "none")
}

func TestARestartedControllerConvergesOnWhatChangedWhileItWasDown(t *testing.T) {
	s := newStore(t)
	createService(t, s, "web")
	createPod(t, s, "a", "web", "10.88.0.2", true)
	stop := startController(t, s)
	within(t, s, 10*time.Second, "web", "a:10.88.0.2|")
	stop()

	// While no controller runs: a service goes, one comes, a pod turns.
	if _, err := s.DeleteService(context.Background(), model.DefaultNamespace, "web", ""); err != nil {
		t.Fatal(err)
	}
	createService(t, s, "api")
	createPod(t, s, "b", "api", "10.88.0.3", true)
	setReady(t, s, "a", false)
	// And someone wrote to an Endpoints object behind the controller's back.
	stray := &model.Endpoints{Metadata: model.ObjectMeta{Name: "api", Namespace: model.DefaultNamespace},
		EndpointsData: model.EndpointsData{Subsets: []model.EndpointSubset{{Addresses: []model.EndpointAddress{{IP: "10.1.1.1", TargetRef: &model.ObjectReference{Name: "ghost"}}}}}}}
	if err := s.Endpoints().Create(context.Background(), stray); err != nil {
		t.Fatal(err)
	}

	// And an address outlived its service (removed by hand).
	createService(t, s, "lost")
	if _, err := s.Pool().Exec(context.Background(), "DELETE FROM services WHERE name = 'lost'"); err != nil {
		t.Fatal(err)
	}

	startController(t, s)
	within(t, s, 10*time.Second, "api", "b:10.88.0.3|")
	within(t, s, time.Second, "web", "none")
	var leaked int
	if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM cluster_ips WHERE name = 'lost'").Scan(&leaked); err != nil || leaked != 0 {
		t.Fatalf("the controller's start left %d address(es) of a vanished service (%v)", leaked, err)
	}
}

func TestOnlyOneReplicaLeads(t *testing.T) {
	s := newStore(t)
	var leading, most atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &endpoints.Leader{Pool: s.Pool(), Key: 42, Check: 50 * time.Millisecond}
			for ctx.Err() == nil {
				_ = l.While(ctx, func(lctx context.Context) error {
					n := leading.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					select {
					case <-lctx.Done():
					case <-time.After(150 * time.Millisecond): // lead a while, then step down
					}
					leading.Add(-1)
					return nil
				})
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	cancel()
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d replicas led at once, want 1", most.Load())
	}

	// A leader whose connection dies loses its lead, and another takes it.
	l := &endpoints.Leader{Pool: s.Pool(), Key: 43, Check: 50 * time.Millisecond}
	lost := make(chan struct{})
	go func() {
		_ = l.While(context.Background(), func(lctx context.Context) error {
			// Kill this session from another connection.
			_, _ = s.Pool().Exec(context.Background(),
				"SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = 43 AND granted")
			<-lctx.Done()
			close(lost)
			return nil
		})
	}()
	select {
	case <-lost:
	case <-time.After(5 * time.Second):
		t.Fatal("a leader whose session was terminated kept leading")
	}
	took := make(chan struct{})
	go func() {
		_ = (&endpoints.Leader{Pool: s.Pool(), Key: 43, Check: 50 * time.Millisecond}).While(context.Background(), func(context.Context) error {
			close(took)
			return nil
		})
	}()
	select {
	case <-took:
	case <-time.After(5 * time.Second):
		t.Fatal("no one took over the lock of the terminated leader")
	}
}
