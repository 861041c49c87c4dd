package clusterip_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/internal/clusterip"
	"github.com/zonewright/zonewright/internal/model"
	"github.com/zonewright/zonewright/internal/pglock"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newStore(t *testing.T) *store.Store { return storetest.New(t) }

func service(name, clusterIP string) *model.Service {
	svc := &model.Service{Metadata: model.ObjectMeta{Name: name, Namespace: model.DefaultNamespace},
		Spec: model.ServiceSpec{ClusterIP: clusterIP, Ports: []model.ServicePort{{Port: 80}}}}
	model.DefaultService(svc)
	return svc
}

func TestBandsAndReservedAddresses(t *testing.T) {
	for _, tc := range []struct {
		cidr, staticLast, dns string
	}{
		{"10.96.0.0/16", "10.96.1.0", "10.96.0.10"},  // 65536/16 = 4096, capped at 256
		{"10.96.0.0/22", "10.96.0.64", "10.96.0.10"}, // 1024/16 = 64
		{"10.96.0.0/24", "10.96.0.16", "10.96.0.10"}, // 256/16 = 16
		{"10.96.0.0/28", "10.96.0.16", "10.96.0.10"}, // at least 16: all static
		{"127.96.0.0/16", "127.96.1.0", "127.96.0.10"},
	} {
		r := clusterip.MustParse(tc.cidr)
		first, last := r.StaticBand()
		if first.String() != r.Prefix().Addr().Next().String() || last.String() != tc.staticLast {
			t.Errorf("%s: static band %s-%s, want %s-%s", tc.cidr, first, last, r.Prefix().Addr().Next(), tc.staticLast)
		}
		if got := r.DNSAddress().String(); got != tc.dns {
			t.Errorf("%s: DNS address %s, want %s", tc.cidr, got, tc.dns)
		}
		if got := clusterip.DNSAddress(netip.MustParsePrefix(tc.cidr)); got.String() != tc.dns {
			t.Errorf("DNSAddress(%s) = %s, want %s", tc.cidr, got, tc.dns)
		}
	}
	for _, bad := range []string{"10.96.0.0", "fd00::/108", "10.0.0.0/8", "10.96.0.0/29", "x"} {
		if _, err := clusterip.Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted a range it cannot serve", bad)
		}
	}
}

func TestConcurrentCreatesNeverShareAnAddress(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	r := clusterip.MustParse("10.96.0.0/16")
	const n = 1000
	ips := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			svc := service(fmt.Sprintf("svc-%d", i), "")
			errs[i] = s.CreateService(ctx, svc, r)
			ips[i] = svc.Spec.ClusterIP
		}()
	}
	wg.Wait()
	_, staticLast := r.StaticBand()
	seen := map[string]int{}
	for i, ip := range ips {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if j, dup := seen[ip]; dup {
			t.Fatalf("services %d and %d both got %s", j, i, ip)
		}
		seen[ip] = i
		a := netip.MustParseAddr(ip)
		if !r.Prefix().Contains(a) || !staticLast.Less(a) {
			t.Fatalf("service %d got %s, outside the dynamic band above %s", i, ip, staticLast)
		}
	}
	var rows int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM cluster_ips").Scan(&rows); err != nil || rows != n {
		t.Fatalf("cluster_ips holds %d rows (%v), want %d", rows, err, n)
	}
	// What the client was told is what was stored.
	got, err := s.Services().Get(ctx, model.DefaultNamespace, "svc-7")
	if err != nil || got.Spec.ClusterIP != ips[7] {
		t.Fatalf("stored clusterIP %v (%v), create answered %s", got, err, ips[7])
	}
}

func fieldMessage(t *testing.T, err error) string {
	t.Helper()
	var fe model.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want a field error", err)
	}
	return fe.Error()
}

func TestRequestedAddresses(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	r := clusterip.MustParse("10.96.0.0/16")
	if err := s.CreateService(ctx, service("a", "10.96.0.50"), r); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ip, want string }{
		{"10.96.0.50", `spec.clusterIP: Invalid value: "10.96.0.50": provided IP is already allocated`},
		{"10.97.0.5", `spec.clusterIP: Invalid value: "10.97.0.5": provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/16`},
		{"10.96.0.0", `spec.clusterIP: Invalid value: "10.96.0.0": provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/16`},
		{"10.96.255.255", `spec.clusterIP: Invalid value: "10.96.255.255": provided IP is not in the valid range. The range of valid IPs is 10.96.0.0/16`},
		{"10.96.0.10", `spec.clusterIP: Invalid value: "10.96.0.10": provided IP is reserved (the range's first address and its tenth, the cluster DNS)`},
		{"10.96.0.1", `spec.clusterIP: Invalid value: "10.96.0.1": provided IP is reserved (the range's first address and its tenth, the cluster DNS)`},
	} {
		err := s.CreateService(ctx, service("b", tc.ip), r)
		if got := fieldMessage(t, err); got != tc.want {
			t.Errorf("request %s: %q, want %q", tc.ip, got, tc.want)
		}
	}
	if _, err := s.Services().Get(ctx, model.DefaultNamespace, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused service was stored: %v", err)
	}
	// A duplicate name says so, and does not take an address.
	if err := s.CreateService(ctx, service("a", "10.96.0.51"), r); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second service a: %v, want ErrAlreadyExists", err)
	}
	if _, err := s.DeleteService(ctx, model.DefaultNamespace, "a", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateService(ctx, service("b", "10.96.0.50"), r); err != nil {
		t.Fatalf("the deleted service's address was not freed: %v", err)
	}
	if err := s.CreateService(ctx, service("c", "10.96.0.51"), r); err != nil {
		t.Fatalf("the duplicate's address was kept: %v", err)
	}
	headless := service("h", model.ClusterIPNone)
	if err := s.CreateService(ctx, headless, r); err != nil || headless.Spec.ClusterIP != model.ClusterIPNone {
		t.Fatalf("headless service: %v, clusterIP %q", err, headless.Spec.ClusterIP)
	}
	var rows int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM cluster_ips").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("cluster_ips holds %d rows (%v), want 2 (b and c; none for the headless one)", rows, err)
	}
}

func TestSmallRangeUsesTheStaticBandThenRunsOut(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	r := clusterip.MustParse("10.96.0.0/28") // 14 host addresses, .1 and .10 reserved
	got := map[string]bool{}
	for i := range 12 {
		svc := service(fmt.Sprintf("s%d", i), "")
		if err := s.CreateService(ctx, svc, r); err != nil {
			t.Fatalf("service %d: %v", i, err)
		}
		got[svc.Spec.ClusterIP] = true
	}
	if got["10.96.0.1"] || got["10.96.0.10"] || got["10.96.0.0"] || got["10.96.0.15"] || len(got) != 12 {
		t.Fatalf("handed out %v: want 12 distinct addresses, never .0, .1, .10 or .15", got)
	}
	if err := s.CreateService(ctx, service("full", ""), r); !errors.Is(err, clusterip.ErrExhausted) {
		t.Fatalf("13th service: %v, want ErrExhausted", err)
	}
}

func TestSweepFreesAddressesOfVanishedServices(t *testing.T) {
	s, ctx := newStore(t), context.Background()
	r := clusterip.MustParse("10.96.0.0/16")
	for _, name := range []string{"kept", "lost"} {
		if err := s.CreateService(ctx, service(name, ""), r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(ctx, "DELETE FROM services WHERE name = 'lost'"); err != nil {
		t.Fatal(err)
	}
	n, err := clusterip.Sweep(ctx, s.Pool())
	if err != nil || n != 1 {
		t.Fatalf("sweep freed %d (%v), want 1", n, err)
	}
	var left string
	if err := s.Pool().QueryRow(ctx, "SELECT name FROM cluster_ips").Scan(&left); err != nil || left != "kept" {
		t.Fatalf("after the sweep cluster_ips holds %q (%v), want only kept", left, err)
	}
}

// Allocation waits on no other lock of the control plane: a replica
// placing a pod holds the scheduling lock while it writes, and its write
// waits for the service's transaction; if that waited for the scheduling
// lock in turn, both would hang until their deadlines.
func TestAllocationDoesNotWaitForTheSchedulingLock(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", pglock.Scheduling); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", pglock.Scheduling)
	if err := s.CreateService(ctx, service("web", ""), clusterip.MustParse("10.96.0.0/16")); err != nil {
		t.Fatalf("create a service while a placement holds the scheduling lock: %v", err)
	}
}
