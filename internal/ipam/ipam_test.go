package ipam_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/zonewright/zonewright/internal/ipam"
	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func newIPAM(t *testing.T) *ipam.IPAM {
	t.Helper()
	url := pgtest.NewDatabase(t)
	if err := store.MigrateUp(context.Background(), url, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return ipam.New(st.Pool())
}

// uid makes a pod uid from a short name, as the pods table uses uuids.
func uid(name string) string {
	var b [16]byte
	copy(b[:], name)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func TestAllocateIsIdempotentPerPodAndSkipsTheGateway(t *testing.T) {
	a, ctx := newIPAM(t), context.Background()
	first, err := a.Allocate(ctx, "n1", "10.88.1.0/24", uid("pod-a"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Addr != netip.MustParseAddr("10.88.1.2") || first.Gateway != netip.MustParseAddr("10.88.1.1") || first.Prefix != 24 {
		t.Fatalf("first allocation %+v: want 10.88.1.2/24 via 10.88.1.1", first)
	}
	again, err := a.Allocate(ctx, "n1", "10.88.1.0/24", uid("pod-a"))
	if err != nil || again.Addr != first.Addr {
		t.Fatalf("retried allocation gave %v (%v), want %v", again.Addr, err, first.Addr)
	}
	second, _ := a.Allocate(ctx, "n1", "10.88.1.0/24", uid("pod-b"))
	if second.Addr != netip.MustParseAddr("10.88.1.3") {
		t.Fatalf("second pod got %v", second.Addr)
	}
	// A pod that moves gives up its old address.
	moved, err := a.Allocate(ctx, "n2", "10.88.2.0/24", uid("pod-a"))
	if err != nil || moved.Addr != netip.MustParseAddr("10.88.2.2") || moved.GaveUp != "n1" {
		t.Fatalf("moved pod got %v, gave up an address on %q (%v)", moved.Addr, moved.GaveUp, err)
	}
	reused, _ := a.Allocate(ctx, "n1", "10.88.1.0/24", uid("pod-c"))
	if reused.Addr != first.Addr {
		t.Fatalf("the moved pod's old address was not freed: pod-c got %v", reused.Addr)
	}
}

func TestExhaustionIsAnErrorNotACrash(t *testing.T) {
	a, ctx := newIPAM(t), context.Background()
	// A /29 has 6 host addresses; one is the gateway.
	for i := range 5 {
		if _, err := a.Allocate(ctx, "n1", "10.0.0.0/29", uid(fmt.Sprintf("p%d", i))); err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
	}
	if _, err := a.Allocate(ctx, "n1", "10.0.0.0/29", uid("one-too-many")); !errors.Is(err, ipam.ErrExhausted) {
		t.Fatalf("got %v, want ErrExhausted", err)
	}
	if node, err := a.Release(ctx, uid("p3")); err != nil || node != "n1" {
		t.Fatalf("release freed an address on %q (%v); want n1", node, err)
	}
	if node, err := a.Release(ctx, uid("p3")); err != nil || node != "" {
		t.Fatalf("a second release freed an address on %q (%v); want none", node, err)
	}
	holders, err := a.Holders(ctx, "n1")
	if err != nil || len(holders) != 4 || holders[uid("p3")] || !holders[uid("p4")] {
		t.Fatalf("holders after a release: %v (%v)", holders, err)
	}
	got, err := a.Allocate(ctx, "n1", "10.0.0.0/29", uid("one-too-many"))
	if err != nil || got.Addr != netip.MustParseAddr("10.0.0.5") {
		t.Fatalf("after a release: %v %v, want 10.0.0.5", got.Addr, err)
	}
}

func TestConcurrentAllocationsNeverCollide(t *testing.T) {
	a, ctx := newIPAM(t), context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[netip.Addr]string{}
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod := fmt.Sprintf("pod-%d", i)
			got, err := a.Allocate(ctx, "n1", "10.1.0.0/24", uid(pod))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := seen[got.Addr]; dup {
				t.Errorf("%v given to %s and %s", got.Addr, other, pod)
			}
			seen[got.Addr] = pod
		}()
	}
	wg.Wait()
	if len(seen) != 40 {
		t.Fatalf("%d distinct addresses for 40 pods", len(seen))
	}
}
