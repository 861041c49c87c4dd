package podcidr

import (
	"net/netip"
	"testing"
)

func TestFirstFreeSkipsEveryOverlap(t *testing.T) {
	r, err := ParseRange("10.88.0.0/22", 24)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		held []string
		want string
	}{
		{"an empty range starts at its base", nil, "10.88.0.0/24"},
		{"a held block is skipped", []string{"10.88.0.0/24"}, "10.88.1.0/24"},
		{"a larger held range covers several blocks", []string{"10.88.0.0/23"}, "10.88.2.0/24"},
		{"a smaller held range blocks its whole block", []string{"10.88.0.128/25", "10.88.1.0/24"}, "10.88.2.0/24"},
		{"ranges outside the cluster range do not matter", []string{"10.99.0.0/16"}, "10.88.0.0/24"},
		{"a full range has none", []string{"10.88.0.0/22"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var held []netip.Prefix
			for _, h := range c.held {
				held = append(held, netip.MustParsePrefix(h))
			}
			got, ok := r.FirstFree(held)
			if c.want == "" {
				if ok {
					t.Errorf("got %s, want none", got)
				}
				return
			}
			if !ok || got.String() != c.want {
				t.Errorf("got %s (%t), want %s", got, ok, c.want)
			}
		})
	}
}

func TestParseRangeRefusesNonsense(t *testing.T) {
	for _, c := range []struct {
		cidr string
		bits int
	}{{"10.88.0.0/16", 8}, {"10.88.0.1/16", 24}, {"fd00::/64", 80}, {"10.88.0.0/16", 31}, {"x", 24}, {"0.0.0.0/0", 30}} {
		if _, err := ParseRange(c.cidr, c.bits); err == nil {
			t.Errorf("ParseRange(%q, %d) accepted", c.cidr, c.bits)
		}
	}
}
