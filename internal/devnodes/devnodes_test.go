package devnodes

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestEachDataDirHasAPodRangeOfItsOwn(t *testing.T) {
	service := netip.MustParsePrefix("127.96.0.0/16")
	seen := map[string]string{}
	for i := range 8 {
		dir := fmt.Sprintf("/home/user%d/zonewright/.data", i)
		cidr := ClusterCIDROf(dir, service)
		if again := ClusterCIDROf(dir, service); again != cidr {
			t.Fatalf("%s: %s, then %s: the same directory must keep its range", dir, cidr, again)
		}
		p := netip.MustParsePrefix(cidr)
		if b := p.Addr().As4(); b[0] != 127 || b[1] < 128 || b[1] == 255 || p.Bits() != 16 {
			t.Fatalf("%s: %s, want 127.<128-254>.0.0/16", dir, cidr)
		}
		if other, ok := seen[cidr]; ok {
			t.Logf("%s and %s share %s (a hash collision)", dir, other, cidr)
		}
		seen[cidr] = dir
	}
	if len(seen) < 6 {
		t.Fatalf("8 data dirs got %d distinct ranges: %v", len(seen), seen)
	}
	// A range that overlaps the service range moves on.
	dir := "/srv/dev"
	taken := netip.MustParsePrefix(ClusterCIDROf(dir))
	if got := ClusterCIDROf(dir, taken); netip.MustParsePrefix(got).Overlaps(taken) {
		t.Fatalf("with %s taken, %s got %s", taken, dir, got)
	}
}
