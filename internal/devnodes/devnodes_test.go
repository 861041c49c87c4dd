package devnodes

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
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

// A file rewritten while it is read (an agent's pid file at its restart)
// is never read empty or half written. (Write with os.WriteFile in
// writeRenamed to see empty reads.)
func TestARewrittenFileIsNeverReadEmpty(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent.pid")
	if err := writeRenamed(file, []byte("100000\n")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			if err := writeRenamed(file, []byte(strconv.Itoa(100000+i)+"\n")); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for reads := 0; ; reads++ {
		select {
		case <-done:
			return
		default:
		}
		b, err := os.ReadFile(file)
		if err != nil || len(b) != len("100000\n") {
			t.Fatalf("read %d: %q, %v", reads, b, err)
		}
	}
}
