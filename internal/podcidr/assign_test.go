package podcidr_test

import (
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/zonewright/zonewright/internal/pgtest"
	"github.com/zonewright/zonewright/internal/podcidr"
	"github.com/zonewright/zonewright/internal/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Two hundred nodes joining at once each get a CIDR of their own on the
// first ask. Without the allocation lock (drop pg_advisory_xact_lock in
// assignNew and restore the old retry of five picks) those asking
// together pick the same lowest free block, one wins each round, and some
// fail with "the table kept changing".
func TestNodesJoiningAtOnceEachGetACIDR(t *testing.T) {
	st := storetest.New(t)
	r, err := podcidr.ParseRange("10.88.0.0/16", 24)
	if err != nil {
		t.Fatal(err)
	}
	a := podcidr.New(st.Pool(), r)
	const nodes = 200
	got := make([]string, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { got[i], errs[i] = a.Assign(t.Context(), fmt.Sprintf("node-%d", i), "") })
	}
	wg.Wait()
	seen := map[netip.Prefix]bool{}
	for i := range nodes {
		if errs[i] != nil {
			t.Errorf("node %d: %v", i, errs[i])
			continue
		}
		p := netip.MustParsePrefix(got[i])
		for q := range seen {
			if p.Overlaps(q) {
				t.Errorf("node %d got %s, which overlaps %s", i, p, q)
			}
		}
		seen[p] = true
	}
	// Asking again keeps a node's CIDR.
	again, err := a.Assign(t.Context(), "node-0", "")
	if err != nil || again != got[0] {
		t.Errorf("node-0 asked again: %q, %v; want %q", again, err, got[0])
	}
}
