package servicenet

import (
	"context"
	"testing"
	"time"
)

func TestHolderKeepsTheNewestAndWakesWaiters(t *testing.T) {
	var h Holder
	if h.Load() != nil {
		t.Fatal("an empty holder holds something")
	}
	got := make(chan *Snapshot, 1)
	go func() { got <- h.Newer(context.Background(), 1) }()
	if !h.Store(&Snapshot{Generation: 1}) || !h.Store(&Snapshot{Generation: 3}) {
		t.Fatal("newer generations refused")
	}
	if h.Store(&Snapshot{Generation: 2}) || h.Store(&Snapshot{Generation: 3}) || h.Load().Generation != 3 {
		t.Fatalf("an older or equal generation replaced generation 3: now %d", h.Load().Generation)
	}
	select {
	case s := <-got:
		if s.Generation != 3 {
			t.Fatalf("waiter got generation %d, want 3", s.Generation)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter for a generation above 1 was not woken")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if s := h.Newer(ctx, 3); s != nil {
		t.Fatalf("nothing newer than 3, yet got %d", s.Generation)
	}
}
