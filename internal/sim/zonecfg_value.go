package sim

import (
	"strconv"
	"strings"
)

// Property values: "PROP = VALUE" with simple, list and complex values,
// option lists, rctl values and the prop=value selectors of add, select and
// remove (spec §4.2, §4.3).

// zcValue is a parsed property value: simple, list or complex.
type zcValue struct {
	kind    string // "simple", "list", "complex"
	simple  string
	list    []zcValue
	complex [][2]string
}

func (v zcValue) String() string {
	switch v.kind {
	case "list":
		parts := make([]string, len(v.list))
		for i, x := range v.list {
			parts[i] = x.String()
		}
		return "[" + strings.Join(parts, ",") + "]"
	case "complex":
		parts := make([]string, len(v.complex))
		for i, kv := range v.complex {
			parts[i] = kv[0] + "=" + kv[1]
		}
		return "(" + strings.Join(parts, ",") + ")"
	}
	return v.simple
}

// parseValue parses one value starting at toks[0]; it returns the value and
// the number of tokens used, or the offending token.
func parseValue(toks []zcToken) (zcValue, int, string, bool) {
	if len(toks) == 0 {
		return zcValue{}, 0, "", false
	}
	switch toks[0].kind {
	case tkWord:
		return zcValue{kind: "simple", simple: toks[0].text}, 1, "", true
	case tkLParen:
		return parseComplex(toks)
	case tkLBrack:
		v := zcValue{kind: "list"}
		i := 1
		if i < len(toks) && toks[i].kind == tkRBrack {
			return v, i + 1, "", true
		}
		for {
			if i >= len(toks) {
				return zcValue{}, 0, "", false
			}
			var item zcValue
			switch toks[i].kind {
			case tkWord:
				item = zcValue{kind: "simple", simple: toks[i].text}
				i++
			case tkLParen:
				c, n, bad, ok := parseComplex(toks[i:])
				if !ok {
					return zcValue{}, 0, bad, false
				}
				item = c
				i += n
			default:
				return zcValue{}, 0, toks[i].text, false
			}
			v.list = append(v.list, item)
			if i >= len(toks) {
				return zcValue{}, 0, "", false
			}
			switch toks[i].kind {
			case tkComma:
				i++
			case tkRBrack:
				return v, i + 1, "", true
			default:
				return zcValue{}, 0, toks[i].text, false
			}
		}
	}
	return zcValue{}, 0, toks[0].text, false
}

func parseComplex(toks []zcToken) (zcValue, int, string, bool) {
	v := zcValue{kind: "complex"}
	i := 1
	for {
		if i+2 >= len(toks) {
			if i < len(toks) {
				return zcValue{}, 0, toks[i].text, false
			}
			return zcValue{}, 0, "", false
		}
		if toks[i].kind != tkWord || toks[i+1].kind != tkEqual || toks[i+2].kind != tkWord {
			bad := toks[i]
			if bad.kind == tkWord {
				bad = toks[i+1]
				if bad.kind == tkEqual {
					bad = toks[i+2]
				}
			}
			return zcValue{}, 0, bad.text, false
		}
		v.complex = append(v.complex, [2]string{toks[i].text, toks[i+2].text})
		i += 3
		if i >= len(toks) {
			return zcValue{}, 0, "", false
		}
		switch toks[i].kind {
		case tkComma:
			i++
		case tkRParen:
			return v, i + 1, "", true
		default:
			return zcValue{}, 0, toks[i].text, false
		}
	}
}

// propAssign parses "PROP = VALUE" and reports syntax errors.
func (s *zcSession) propAssign(args []zcToken, term string) (string, zcValue, bool) {
	if len(args) == 0 {
		s.syntaxError(term)
		return "", zcValue{}, false
	}
	if args[0].kind != tkWord || !zonecfgKeywords[args[0].text] {
		s.syntaxError(args[0].text)
		return "", zcValue{}, false
	}
	if len(args) < 2 {
		s.syntaxError(term)
		return "", zcValue{}, false
	}
	if args[1].kind != tkEqual {
		s.syntaxError(args[1].text)
		return "", zcValue{}, false
	}
	v, n, bad, ok := parseValue(args[2:])
	if !ok {
		if bad == "" {
			bad = term
		}
		s.syntaxError(bad)
		return "", zcValue{}, false
	}
	if 2+n < len(args) {
		s.syntaxError(args[2+n].text)
		return "", zcValue{}, false
	}
	return args[0].text, v, true
}

func (s *zcSession) simpleValue(prop string, v zcValue) (string, bool) {
	if v.kind != "simple" {
		s.zerr("A simple value was expected here.")
		return "", false
	}
	return v.simple, true
}

func (s *zcSession) optionList(v zcValue) ([]string, bool) {
	switch v.kind {
	case "simple":
		return []string{v.simple}, true
	case "list":
		var out []string
		for _, x := range v.list {
			if x.kind != "simple" {
				s.zerr("A simple value was expected here.")
				return nil, false
			}
			out = append(out, x.simple)
		}
		return out, true
	}
	s.zerr("A simple or list value was expected here.")
	return nil, false
}

func (s *zcSession) rctlValues(v zcValue) ([]RctlValue, bool) {
	var items []zcValue
	switch v.kind {
	case "complex":
		items = []zcValue{v}
	case "list":
		items = v.list
	default:
		s.zerr("A complex value was expected here.")
		return nil, false
	}
	var out []RctlValue
	for _, it := range items {
		if it.kind != "complex" {
			s.zerr("A complex value was expected here.")
			return nil, false
		}
		var rv RctlValue
		for _, kv := range it.complex {
			switch kv[0] {
			case "priv":
				rv.Priv = kv[1]
			case "limit":
				rv.Limit = kv[1]
			case "action":
				rv.Action = kv[1]
			default:
				s.zerr("%s: No such property type", kv[0])
				return nil, false
			}
		}
		if rv.Priv == "" || rv.Limit == "" || rv.Action == "" {
			s.zerr("rctl: priv, limit and action must all be specified in %s", it)
			return nil, false
		}
		if rv.Priv != "privileged" && rv.Priv != "basic" && rv.Priv != "system" {
			s.zerr("%s: invalid priv; must be privileged, basic or system", rv.Priv)
			return nil, false
		}
		if _, err := strconv.ParseUint(rv.Limit, 10, 64); err != nil {
			s.zerr("%s: invalid limit", rv.Limit)
			return nil, false
		}
		if rv.Action != "none" && rv.Action != "deny" && !strings.HasPrefix(rv.Action, "signal=") {
			s.zerr("%s: invalid action", rv.Action)
			return nil, false
		}
		out = append(out, rv)
	}
	return out, true
}

// matchPairs parses "prop=value" selectors after a resource type.
func (s *zcSession) matchPairs(args []zcToken, term string) (map[string]string, bool) {
	m := map[string]string{}
	for i := 0; i < len(args); {
		prop, v, ok := s.propAssign(args[i:min(i+3, len(args))], term)
		if !ok {
			return nil, false
		}
		m[prop] = v.String()
		i += 3
	}
	return m, true
}
