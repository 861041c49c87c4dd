package store_test

import (
	"testing"
	"time"
)

// Orphans keep their first sighting while they stay orphans, per node; one
// no longer reported is forgotten, and starts over if it comes back.
func TestTrackOrphans(t *testing.T) {
	st := newStore(t)
	ctx := t.Context()
	seen, err := st.TrackOrphans(ctx, "n1", []string{"zone/a", "vnic/b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || !seen["zone/a"].New || !seen["vnic/b"].New {
		t.Fatalf("first sighting: %+v", seen)
	}
	if _, err := st.TrackOrphans(ctx, "n2", []string{"zone/a"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	seen, err = st.TrackOrphans(ctx, "n1", []string{"zone/a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen["zone/a"].New || seen["zone/a"].Age < 200*time.Millisecond {
		t.Fatalf("second sighting: %+v", seen)
	}
	seen, err = st.TrackOrphans(ctx, "n1", []string{"zone/a", "vnic/b"})
	if err != nil {
		t.Fatal(err)
	}
	if !seen["vnic/b"].New || seen["vnic/b"].Age >= 200*time.Millisecond {
		t.Errorf("an orphan forgotten and seen again must start over: %+v", seen["vnic/b"])
	}
	if err := st.ForgetOrphan(ctx, "n1", "zone/a"); err != nil {
		t.Fatal(err)
	}
	seen, err = st.TrackOrphans(ctx, "n1", nil)
	if err != nil || len(seen) != 0 {
		t.Errorf("after forgetting everything: %+v %v", seen, err)
	}
	// Another node's orphans are its own.
	if seen, err = st.TrackOrphans(ctx, "n2", []string{"zone/a"}); err != nil || seen["zone/a"].New {
		t.Errorf("node n2's orphan: %+v %v", seen, err)
	}
}
