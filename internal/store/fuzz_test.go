package store

import (
	"regexp"
	"testing"
)

var placeholders = regexp.MustCompile(`\$[0-9]+`)

// A label selector that parses stays within the bounds, renders one SQL
// condition per requirement, each value a parameter; and labels made to
// satisfy it do.
func FuzzParseLabelSelector(f *testing.F) {
	for _, s := range []string{"app=web", "app==web,tier!=db", "env in (prod, staging)", "env notin (dev)", "gpu", "!legacy",
		"a=b,c in (d,e),!f,g", "x in ()", "k=(v)", "in in (in)", " spaced = value ", "a.b/c-d_e=f.g",
		"k notin ()", "(((", "a=b,,", "a in (b", ")a", "ink in (a)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseLabelSelector(s)
		if err != nil {
			return
		}
		if len(sel) > MaxSelectorTerms {
			t.Fatalf("%d terms accepted", len(sel))
		}
		var args []any
		cond := sel.sql(&args)
		if got := len(placeholders.FindAllString(cond, -1)); got != len(args) {
			t.Fatalf("%q renders %q with %d placeholders for %d arguments", s, cond, got, len(args))
		}
		labels, seen := map[string]string{}, map[string]bool{}
		for _, r := range sel {
			if checkKey(r.Key) != nil {
				t.Fatalf("%q parsed with the invalid key %q", s, r.Key)
			}
			if seen[r.Key] {
				return // a key constrained twice may be unsatisfiable
			}
			seen[r.Key] = true
			switch r.Op {
			case "=", "in":
				if len(r.Values) == 0 {
					t.Fatalf("%q: %s with no value", s, r.Op)
				}
				labels[r.Key] = r.Values[0]
			case "exists":
				labels[r.Key] = "x"
			case "!", "!=", "notin": // satisfied by the key's absence
			default:
				t.Fatalf("%q parsed with the unknown operator %q", s, r.Op)
			}
		}
		if !sel.Matches(labels) {
			t.Fatalf("%q does not match %v, made to satisfy it", s, labels)
		}
	})
}

// A field selector that parses names only supported fields and renders
// one parameter per term.
func FuzzParseFieldSelector(f *testing.F) {
	supported := map[string]string{"metadata.name": "name", "spec.nodeName": "node_name", "status.phase": "phase"}
	for _, s := range []string{"spec.nodeName=n1", "status.phase!=Running,metadata.name==x", "spec.nodeName=", "a=b", "=", "status.phase!=", "!=", ",,,", "metadata.name"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseFieldSelector(s, supported)
		if err != nil {
			return
		}
		if len(sel) > MaxSelectorTerms {
			t.Fatalf("%d terms accepted", len(sel))
		}
		var args []any
		cond := sel.sql(supported, &args)
		if len(args) != len(sel) || len(placeholders.FindAllString(cond, -1)) != len(sel) {
			t.Fatalf("%q renders %q with %d arguments for %d terms", s, cond, len(args), len(sel))
		}
		doc := map[string]any{}
		for _, r := range sel {
			if _, ok := supported[r.Field]; !ok {
				t.Fatalf("%q parsed with the unsupported field %q", s, r.Field)
			}
		}
		_ = sel.Matches(doc)
	})
}

// A continue token decodes to what it was issued for, and anything else is
// refused without a panic.
func FuzzDecodeContinue(f *testing.F) {
	f.Add(encodeContinue(continueToken{Namespace: "default", Name: "web-1"}))
	f.Add(encodeContinue(continueToken{Name: "node-1"}))
	f.Add("not base64!")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeContinue(s)
		if err != nil {
			return
		}
		again, err := decodeContinue(encodeContinue(tok))
		if err != nil || again != tok {
			t.Fatalf("%q decodes to %+v, which encodes to a token decoding to %+v, %v", s, tok, again, err)
		}
	})
}
