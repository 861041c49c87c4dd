package store

import (
	"fmt"
	"slices"
	"strings"
)

// Requirement is one term of a label selector.
type Requirement struct {
	Key    string
	Op     string // "=", "!=", "in", "notin", "exists", "!"
	Values []string
}

// LabelSelector is a conjunction of requirements, as in `app=web,tier!=db`.
type LabelSelector []Requirement

// Selectors are bounded before they become SQL: every term is a query
// parameter or two, and PostgreSQL takes at most 65,535 in a statement.
// Kubernetes sets no limit of its own but bounds the request line; these
// are well above what a person or a controller writes.
const (
	MaxSelectorTerms = 100
	MaxSelectorBytes = 8 << 10
)

// checkSelectorSize refuses a selector (which names it) over the bounds.
func checkSelectorSize(which, s string, terms int) error {
	if len(s) > MaxSelectorBytes {
		return fmt.Errorf("%w: %s is %d bytes long; at most %d are allowed", ErrInvalid, which, len(s), MaxSelectorBytes)
	}
	if terms > MaxSelectorTerms {
		return fmt.Errorf("%w: %s has %d terms; at most %d are allowed", ErrInvalid, which, terms, MaxSelectorTerms)
	}
	return nil
}

// ParseLabelSelector parses the Kubernetes label selector syntax:
// k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k — joined by commas.
func ParseLabelSelector(s string) (LabelSelector, error) {
	if err := checkSelectorSize("labelSelector", s, 0); err != nil {
		return nil, err
	}
	terms := splitTerms(s)
	if err := checkSelectorSize("labelSelector", s, len(terms)); err != nil {
		return nil, err
	}
	var sel LabelSelector
	for _, term := range terms {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		r, err := parseRequirement(term)
		if err != nil {
			return nil, fmt.Errorf("%w: labelSelector %q: %v", ErrInvalid, s, err)
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// splitTerms splits on commas outside parentheses.
func splitTerms(s string) []string {
	var terms []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				terms = append(terms, s[start:i])
				start = i + 1
			}
		}
	}
	return append(terms, s[start:])
}

func parseRequirement(t string) (Requirement, error) {
	if strings.HasPrefix(t, "!") {
		k := strings.TrimSpace(t[1:])
		return Requirement{Key: k, Op: "!"}, checkKey(k)
	}
	for _, op := range []string{"!=", "==", "="} {
		if k, v, ok := strings.Cut(t, op); ok {
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if op == "==" {
				op = "="
			}
			if err := checkKey(k); err != nil {
				return Requirement{}, err
			}
			if strings.ContainsAny(v, "=!(), ") {
				return Requirement{}, fmt.Errorf("invalid value %q", v)
			}
			return Requirement{Key: k, Op: op, Values: []string{v}}, nil
		}
	}
	fields := strings.Fields(t)
	if len(fields) == 1 {
		return Requirement{Key: fields[0], Op: "exists"}, checkKey(fields[0])
	}
	if len(fields) >= 2 && (fields[1] == "in" || fields[1] == "notin") {
		// The list follows the operator, not the first "in" of the term
		// (which may be inside the key: "ink in (a)").
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(t, fields[0])), fields[1]))
		if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
			return Requirement{}, fmt.Errorf("%s needs a parenthesised list: %q", fields[1], t)
		}
		var vals []string
		for _, v := range strings.Split(rest[1:len(rest)-1], ",") {
			if v = strings.TrimSpace(v); v != "" {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			return Requirement{}, fmt.Errorf("%s needs at least one value: %q", fields[1], t)
		}
		return Requirement{Key: fields[0], Op: fields[1], Values: vals}, checkKey(fields[0])
	}
	return Requirement{}, fmt.Errorf("cannot parse %q", t)
}

func checkKey(k string) error {
	if k == "" || strings.ContainsAny(k, " =!(),") {
		return fmt.Errorf("invalid label key %q", k)
	}
	return nil
}

// Matches reports whether labels satisfy every requirement.
func (sel LabelSelector) Matches(labels map[string]string) bool {
	for _, r := range sel {
		v, has := labels[r.Key]
		var ok bool
		switch r.Op {
		case "=":
			ok = has && v == r.Values[0]
		case "!=":
			ok = !has || v != r.Values[0]
		case "in":
			ok = has && slices.Contains(r.Values, v)
		case "notin":
			ok = !has || !slices.Contains(r.Values, v)
		case "exists":
			ok = has
		case "!":
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}

// sql renders the selector as a condition over a jsonb labels column,
// appending its values to args.
func (sel LabelSelector) sql(args *[]any) string {
	var conds []string
	arg := func(v any) string { *args = append(*args, v); return fmt.Sprintf("$%d", len(*args)) }
	for _, r := range sel {
		switch r.Op {
		case "=":
			conds = append(conds, fmt.Sprintf("labels ->> %s = %s", arg(r.Key), arg(r.Values[0])))
		case "!=":
			conds = append(conds, fmt.Sprintf("(labels ->> %s) IS DISTINCT FROM %s", arg(r.Key), arg(r.Values[0])))
		case "in":
			conds = append(conds, fmt.Sprintf("labels ->> %s = ANY(%s)", arg(r.Key), arg(r.Values)))
		case "notin":
			conds = append(conds, fmt.Sprintf("NOT coalesce(labels ->> %s = ANY(%s), false)", arg(r.Key), arg(r.Values)))
		case "exists":
			conds = append(conds, fmt.Sprintf("labels ? %s", arg(r.Key)))
		case "!":
			conds = append(conds, fmt.Sprintf("NOT labels ? %s", arg(r.Key)))
		}
	}
	return strings.Join(conds, " AND ")
}

// FieldRequirement is one term of a field selector: field=value or field!=value.
type FieldRequirement struct {
	Field string
	Not   bool
	Value string
}

// FieldSelector is a conjunction of field requirements.
type FieldSelector []FieldRequirement

// ParseFieldSelector parses `spec.nodeName=n1,status.phase!=Running`,
// accepting only the fields the kind supports.
func ParseFieldSelector(s string, supported map[string]string) (FieldSelector, error) {
	if err := checkSelectorSize("fieldSelector", s, 0); err != nil {
		return nil, err
	}
	terms := strings.Split(s, ",")
	if err := checkSelectorSize("fieldSelector", s, len(terms)); err != nil {
		return nil, err
	}
	var sel FieldSelector
	for _, term := range terms {
		term = strings.TrimSpace(term)
		if term == "" {
			continue
		}
		var r FieldRequirement
		if k, v, ok := strings.Cut(term, "!="); ok {
			r = FieldRequirement{Field: strings.TrimSpace(k), Not: true, Value: strings.TrimSpace(v)}
		} else if k, v, ok := strings.Cut(term, "=="); ok {
			r = FieldRequirement{Field: strings.TrimSpace(k), Value: strings.TrimSpace(v)}
		} else if k, v, ok := strings.Cut(term, "="); ok {
			r = FieldRequirement{Field: strings.TrimSpace(k), Value: strings.TrimSpace(v)}
		} else {
			return nil, fmt.Errorf("%w: fieldSelector %q: %q is not field=value or field!=value", ErrInvalid, s, term)
		}
		if _, ok := supported[r.Field]; !ok {
			keys := make([]string, 0, len(supported))
			for k := range supported {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			return nil, fmt.Errorf("%w: fieldSelector: field label %q not supported; supported: %s", ErrInvalid, r.Field, strings.Join(keys, ", "))
		}
		sel = append(sel, r)
	}
	return sel, nil
}

func (sel FieldSelector) sql(columns map[string]string, args *[]any) string {
	var conds []string
	for _, r := range sel {
		*args = append(*args, r.Value)
		col := columns[r.Field]
		if r.Not {
			conds = append(conds, fmt.Sprintf("coalesce(%s, '') <> $%d", col, len(*args)))
		} else {
			conds = append(conds, fmt.Sprintf("coalesce(%s, '') = $%d", col, len(*args)))
		}
	}
	return strings.Join(conds, " AND ")
}

// Matches reports whether an object (as a generic JSON document) satisfies
// the selector; a missing field reads as "".
func (sel FieldSelector) Matches(doc map[string]any) bool {
	for _, r := range sel {
		v := lookup(doc, r.Field)
		if (v == r.Value) == r.Not {
			return false
		}
	}
	return true
}

func lookup(doc map[string]any, path string) string {
	var cur any = doc
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[part]
	}
	if s, ok := cur.(string); ok {
		return s
	}
	return ""
}
