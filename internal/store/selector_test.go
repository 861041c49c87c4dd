package store_test

import (
	"strings"
	"testing"

	"github.com/zonewright/zonewright/internal/store"
)

func TestLabelSelectorKeysMayHoldTheOperatorsWords(t *testing.T) {
	for _, s := range []string{"ink in (a,b)", "notinx notin (a)", "inx in (a),b"} {
		sel, err := store.ParseLabelSelector(s)
		if err != nil || len(sel) == 0 || len(sel[0].Values) == 0 {
			t.Errorf("%q: %v %+v", s, err, sel)
		}
	}
	sel, _ := store.ParseLabelSelector("ink in (a,b)")
	if !sel.Matches(map[string]string{"ink": "b"}) || sel.Matches(map[string]string{"ink": "c"}) {
		t.Errorf("ink in (a,b) matches wrongly: %+v", sel)
	}
}

func TestSelectorsAreBounded(t *testing.T) {
	terms := func(n int, term string) string { return strings.TrimSuffix(strings.Repeat(term+",", n), ",") }
	fields := map[string]string{"metadata.name": "name"}
	for _, tc := range []struct {
		name    string
		parse   func() error
		allowed bool
	}{
		{"100 label terms", func() error { _, err := store.ParseLabelSelector(terms(100, "a=b")); return err }, true},
		{"101 label terms", func() error { _, err := store.ParseLabelSelector(terms(101, "a=b")); return err }, false},
		{"70,000 label terms", func() error { _, err := store.ParseLabelSelector(terms(70000, "a=b")); return err }, false},
		{"8 KiB label selector", func() error { _, err := store.ParseLabelSelector("a=" + strings.Repeat("b", 8<<10-2)); return err }, true},
		{"8 KiB + 1 label selector", func() error { _, err := store.ParseLabelSelector("a=" + strings.Repeat("b", 8<<10-1)); return err }, false},
		{"100 field terms", func() error { _, err := store.ParseFieldSelector(terms(100, "metadata.name=x"), fields); return err }, true},
		{"101 field terms", func() error { _, err := store.ParseFieldSelector(terms(101, "metadata.name=x"), fields); return err }, false},
	} {
		err := tc.parse()
		if (err == nil) != tc.allowed {
			t.Errorf("%s: %v, want allowed %v", tc.name, err, tc.allowed)
		}
	}
}
