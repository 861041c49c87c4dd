package servicenet

import (
	"context"
	"sync"
)

// Holder keeps the newest snapshot it was given. Readers get it without
// locking; an older or equal generation is refused, so a late delivery
// never rolls a holder back.
type Holder struct {
	mu      sync.Mutex
	current *Snapshot
	changed chan struct{} // closed when current changes
}

// Load returns the current snapshot (nil before the first).
func (h *Holder) Load() *Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.current
}

// Store makes s current if it is newer than what is held; it reports
// whether it did. s must not be changed afterwards.
func (h *Holder) Store(s *Snapshot) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s == nil || (h.current != nil && s.Generation <= h.current.Generation) {
		return false
	}
	h.current = s
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	return true
}

// Newer waits until the held snapshot's generation is above gen and
// returns it, or returns nil when ctx ends first.
func (h *Holder) Newer(ctx context.Context, gen int64) *Snapshot {
	for {
		h.mu.Lock()
		if h.current != nil && h.current.Generation > gen {
			s := h.current
			h.mu.Unlock()
			return s
		}
		if h.changed == nil {
			h.changed = make(chan struct{})
		}
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
}
