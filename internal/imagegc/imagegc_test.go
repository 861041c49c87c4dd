package imagegc

import (
	"slices"
	"testing"
	"time"
)

func names(imgs []Image) []string {
	var out []string
	for _, i := range imgs {
		out = append(out, i.Name)
	}
	return out
}

// The unused images go least recently used first, the in-use ones stay,
// and the choice stops once the estimate is below the low threshold.
// Each case fails with its guard dropped in Choose: the InUse filter
// (slices.DeleteFunc), the LastUsed sort, the `below` break, or the high
// threshold's early return.
func TestChooseRemovesUnusedLeastRecentlyUsedUntilBelowLow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	images := []Image{
		{Name: "newest-unused", Bytes: 10, LastUsed: at(30)},
		{Name: "in-use-oldest", Bytes: 40, LastUsed: at(0), InUse: true},
		{Name: "old-unused", Bytes: 10, LastUsed: at(10)},
		{Name: "middle-unused", Bytes: 10, LastUsed: at(20)},
	}
	th := Thresholds{High: 85, Low: 80}
	for _, tc := range []struct {
		name       string
		used, size int64
		want       []string
		short      bool
	}{
		{"below the high threshold nothing goes", 84, 100, nil, false},
		{"at the high threshold the oldest unused goes, and it is enough", 85, 100, []string{"old-unused"}, false},
		{"two are needed to get below the low threshold", 95, 100, []string{"old-unused", "middle-unused"}, false},
		{"exactly at low is not below: one more goes", 100, 100, []string{"old-unused", "middle-unused", "newest-unused"}, false},
		{"the in-use image never goes, even when that falls short", 200, 200 + 1, []string{"old-unused", "middle-unused", "newest-unused"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Choose(th, tc.used, tc.size, images)
			if got := names(c.Remove); !slices.Equal(got, tc.want) {
				t.Errorf("removes %v, want %v", got, tc.want)
			}
			if c.Short != tc.short {
				t.Errorf("short = %v, want %v (left %d of %d)", c.Short, tc.short, c.Left, tc.size)
			}
		})
	}
	if c := Choose(Thresholds{High: 100, Low: 80}, 100, 100, images); c.Collect() {
		t.Errorf("high 100 turns collection off: %+v", c)
	}
}

func TestThresholdsCheck(t *testing.T) {
	for _, tc := range []struct {
		t  Thresholds
		ok bool
	}{
		{Thresholds{85, 80}, true}, {Thresholds{100, 99}, true}, {Thresholds{2, 1}, true},
		{Thresholds{80, 80}, false}, {Thresholds{80, 85}, false}, {Thresholds{101, 80}, false},
		{Thresholds{85, 0}, false}, {Thresholds{0, 0}, false}, {Thresholds{85, -1}, false},
	} {
		if err := tc.t.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.t, err)
		}
	}
}
