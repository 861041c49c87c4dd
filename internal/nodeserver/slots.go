package nodeserver

import "sync"

// slots bounds the streams a node serves at once (exec sessions, or log
// reads), and each namespace's share of them: one namespace holds at most
// half, so one tenant's streams never leave the others none.
type slots struct {
	mu   sync.Mutex
	max  int
	used int
	byNS map[string]int
}

func newSlots(max int) *slots { return &slots{max: max, byNS: map[string]int{}} }

// share is the most one namespace holds.
func (s *slots) share() int { return max(1, s.max/2) }

// take holds a slot for namespace ns; release gives it back (once). ok is
// false, and why says why, when the node or the namespace's share is
// full.
func (s *slots) take(ns string) (release func(), why string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.used >= s.max:
		return nil, "node", false
	case s.byNS[ns] >= s.share():
		return nil, "namespace", false
	}
	s.used++
	s.byNS[ns]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.used--
			if s.byNS[ns]--; s.byNS[ns] == 0 {
				delete(s.byNS, ns)
			}
		})
	}, "", true
}
