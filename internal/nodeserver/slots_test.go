package nodeserver

import "testing"

// A namespace holds at most half of a node's slots, so another
// namespace always finds one while the node is not full; a slot given
// back is free again, once. (Make take skip the namespace's share to see
// ns a take them all.)
func TestANamespaceHoldsAtMostHalfTheSlots(t *testing.T) {
	s := newSlots(4)
	var held []func()
	for i := range 2 {
		release, why, ok := s.take("a")
		if !ok {
			t.Fatalf("a's slot %d: refused (%s)", i+1, why)
		}
		held = append(held, release)
	}
	if _, why, ok := s.take("a"); ok || why != "namespace" {
		t.Fatalf("a's third slot of four: ok %t (%s), want refused for its share", ok, why)
	}
	for i := range 2 {
		release, why, ok := s.take("b")
		if !ok {
			t.Fatalf("b's slot %d: refused (%s)", i+1, why)
		}
		held = append(held, release)
	}
	if _, why, ok := s.take("c"); ok || why != "node" {
		t.Fatalf("c on a full node: ok %t (%s), want refused for the node", ok, why)
	}
	held[0]()
	held[0]() // a second release gives back nothing more
	if _, _, ok := s.take("c"); !ok {
		t.Fatal("c after a's slot was given back: refused")
	}
	if _, why, ok := s.take("a"); ok || why != "node" {
		t.Fatalf("a on a full node after the double release: ok %t (%s)", ok, why)
	}
	if one := newSlots(1); one.share() != 1 {
		t.Errorf("a node of one slot gives a namespace %d", one.share())
	}
}
