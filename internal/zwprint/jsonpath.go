package zwprint

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// JSONPath is a template in kubectl's JSONPath dialect, the parts zwctl
// supports: {.a.b}, {.items[0]}, {.items[*].x}, {.a['b.c']},
// filters {.items[?(@.type=="Ready")].status}, {range …}{end} and
// quoted literals {"\n"}.
type JSONPath struct{ nodes []jpNode }

type jpNode struct {
	text  string // literal text, when path is nil and not range/end
	path  []jpStep
	kind  int // 0 literal, 1 path, 2 range, 3 end
	inner []jpNode
}

type jpStep struct {
	field  string
	index  *int
	all    bool
	filter *jpFilter
}

type jpFilter struct {
	path  []string
	op    string
	value string
}

// ParseJSONPath parses a template.
func ParseJSONPath(tmpl string) (*JSONPath, error) {
	var flat []jpNode
	for len(tmpl) > 0 {
		i := strings.Index(tmpl, "{")
		if i < 0 {
			flat = append(flat, jpNode{text: tmpl})
			break
		}
		if i > 0 {
			flat = append(flat, jpNode{text: tmpl[:i]})
		}
		j := closing(tmpl, i)
		if j < 0 {
			return nil, fmt.Errorf("jsonpath %q: unclosed {", tmpl)
		}
		expr := strings.TrimSpace(tmpl[i+1 : j])
		tmpl = tmpl[j+1:]
		switch {
		case expr == "end":
			flat = append(flat, jpNode{kind: 3})
		case strings.HasPrefix(expr, "range "):
			p, err := parsePath(strings.TrimSpace(strings.TrimPrefix(expr, "range ")))
			if err != nil {
				return nil, err
			}
			flat = append(flat, jpNode{kind: 2, path: p})
		case strings.HasPrefix(expr, `"`) || strings.HasPrefix(expr, "'"):
			s, err := strconv.Unquote(`"` + strings.Trim(expr, `"'`) + `"`)
			if err != nil {
				return nil, fmt.Errorf("jsonpath literal %s: %w", expr, err)
			}
			flat = append(flat, jpNode{text: s})
		default:
			p, err := parsePath(expr)
			if err != nil {
				return nil, err
			}
			flat = append(flat, jpNode{kind: 1, path: p})
		}
	}
	nodes, rest, err := nest(flat)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("jsonpath: {end} without {range}")
	}
	return &JSONPath{nodes: nodes}, nil
}

// closing finds the } that closes the { at i, skipping quoted text.
func closing(s string, i int) int {
	quote := byte(0)
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case quote != 0 && c == '\\':
			j++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == '}':
			return j
		}
	}
	return -1
}

func nest(flat []jpNode) (nodes, rest []jpNode, err error) {
	for len(flat) > 0 {
		n := flat[0]
		flat = flat[1:]
		switch n.kind {
		case 3:
			return nodes, append([]jpNode{n}, flat...), nil
		case 2:
			inner, r, err := nest(flat)
			if err != nil {
				return nil, nil, err
			}
			if len(r) == 0 {
				return nil, nil, fmt.Errorf("jsonpath: {range} without {end}")
			}
			n.inner, flat = inner, r[1:]
		}
		nodes = append(nodes, n)
	}
	return nodes, nil, nil
}

func parsePath(expr string) ([]jpStep, error) {
	if expr == "@" || expr == "." || expr == "$" {
		return nil, nil
	}
	expr = strings.TrimPrefix(strings.TrimPrefix(expr, "$"), "@")
	if !strings.HasPrefix(expr, ".") && !strings.HasPrefix(expr, "[") {
		return nil, fmt.Errorf("jsonpath expression %q must start with . or [", expr)
	}
	var steps []jpStep
	for len(expr) > 0 {
		switch expr[0] {
		case '.':
			expr = expr[1:]
			end := strings.IndexAny(expr, ".[")
			if end < 0 {
				end = len(expr)
			}
			if f := expr[:end]; f == "*" {
				steps = append(steps, jpStep{all: true})
			} else if f != "" {
				steps = append(steps, jpStep{field: f})
			}
			expr = expr[end:]
		case '[':
			end := closingBracket(expr)
			if end < 0 {
				return nil, fmt.Errorf("jsonpath: unclosed [ in %q", expr)
			}
			in := strings.TrimSpace(expr[1:end])
			expr = expr[end+1:]
			switch {
			case in == "*":
				steps = append(steps, jpStep{all: true})
			case strings.HasPrefix(in, "?(") && strings.HasSuffix(in, ")"):
				f, err := parseFilter(in[2 : len(in)-1])
				if err != nil {
					return nil, err
				}
				steps = append(steps, jpStep{filter: f})
			case strings.HasPrefix(in, "'") || strings.HasPrefix(in, `"`):
				steps = append(steps, jpStep{field: strings.Trim(in, `'"`)})
			default:
				n, err := strconv.Atoi(in)
				if err != nil {
					return nil, fmt.Errorf("jsonpath: [%s] is not an index, *, a quoted name or a filter", in)
				}
				steps = append(steps, jpStep{index: &n})
			}
		default:
			return nil, fmt.Errorf("jsonpath: unexpected %q", expr)
		}
	}
	return steps, nil
}

func closingBracket(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func parseFilter(s string) (*jpFilter, error) {
	for _, op := range []string{"==", "!="} {
		if l, r, ok := strings.Cut(s, op); ok {
			l = strings.TrimSpace(l)
			if !strings.HasPrefix(l, "@.") {
				return nil, fmt.Errorf("jsonpath filter %q: the left side must be @.field", s)
			}
			return &jpFilter{path: strings.Split(l[2:], "."), op: op, value: strings.Trim(strings.TrimSpace(r), `'"`)}, nil
		}
	}
	return nil, fmt.Errorf("jsonpath filter %q: want @.field==value or !=", s)
}

// Execute renders the template over data (JSON-decoded).
func (jp *JSONPath) Execute(data any) (string, error) {
	var b strings.Builder
	if err := render(&b, jp.nodes, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

func render(b *strings.Builder, nodes []jpNode, data any) error {
	for _, n := range nodes {
		switch n.kind {
		case 0:
			b.WriteString(n.text)
		case 1:
			vals := eval(n.path, data)
			for i, v := range vals {
				if i > 0 {
					b.WriteString(" ")
				}
				b.WriteString(scalar(v))
			}
		case 2:
			for _, v := range eval(n.path, data) {
				items := []any{v}
				if list, ok := v.([]any); ok {
					items = list
				}
				for _, item := range items {
					if err := render(b, n.inner, item); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func eval(steps []jpStep, data any) []any {
	cur := []any{data}
	for _, s := range steps {
		var next []any
		for _, v := range cur {
			switch {
			case s.field != "":
				if m, ok := v.(map[string]any); ok {
					if x, ok := m[s.field]; ok {
						next = append(next, x)
					}
				}
			case s.index != nil:
				if l, ok := v.([]any); ok {
					i := *s.index
					if i < 0 {
						i += len(l)
					}
					if i >= 0 && i < len(l) {
						next = append(next, l[i])
					}
				}
			case s.all:
				switch x := v.(type) {
				case []any:
					next = append(next, x...)
				case map[string]any:
					keys := make([]string, 0, len(x))
					for k := range x {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					for _, k := range keys {
						next = append(next, x[k])
					}
				}
			case s.filter != nil:
				if l, ok := v.([]any); ok {
					for _, item := range l {
						got := eval(pathSteps(s.filter.path), item)
						match := len(got) == 1 && scalar(got[0]) == s.filter.value
						if match == (s.filter.op == "==") {
							next = append(next, item)
						}
					}
				}
			}
		}
		cur = next
	}
	return cur
}

func pathSteps(fields []string) []jpStep {
	steps := make([]jpStep, len(fields))
	for i, f := range fields {
		steps[i] = jpStep{field: f}
	}
	return steps
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}
