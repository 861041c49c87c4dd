package sim

import (
	"fmt"
	"strings"
)

// The ipnat lexer and the parser's plumbing: tokens with their lines,
// $NAME definitions, and the loop that yields one rule at a time.

// natToken is one lexical token with the line it is on.
type natToken struct {
	text   string
	line   int
	quoted bool
	eof    bool
}

// natLex splits a rule file into tokens: `#` comments, `\` line
// continuations, `;` `,` `=` and `->` as tokens of their own.
func natLex(input string) []natToken {
	var toks []natToken
	line := 1
	i := 0
	for i < len(input) {
		c := input[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == '\\' && i+1 < len(input) && input[i+1] == '\n':
			line++
			i += 2
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#':
			for i < len(input) && input[i] != '\n' {
				i++
			}
		case c == ';' || c == ',' || c == '=':
			toks = append(toks, natToken{text: string(c), line: line})
			i++
		case c == '-' && i+1 < len(input) && input[i+1] == '>':
			toks = append(toks, natToken{text: "->", line: line})
			i += 2
		case c == '"':
			j := i + 1
			for j < len(input) && input[j] != '"' && input[j] != '\n' {
				j++
			}
			toks = append(toks, natToken{text: input[i+1 : j], line: line, quoted: true})
			i = j + 1
		default:
			j := i
			for j < len(input) && !strings.ContainsRune(" \t\r\n#;,=\"", rune(input[j])) &&
				!(input[j] == '-' && j+1 < len(input) && input[j+1] == '>') {
				j++
			}
			toks = append(toks, natToken{text: input[i:j], line: line})
			i = j
		}
	}
	return toks
}

// natError is a parse error as ipnat prints it: `MSG error at "TOK", line N`.
type natError struct {
	msg  string
	tok  string
	line int
}

func (e *natError) Error() string {
	return fmt.Sprintf("%s error at \"%s\", line %d", e.msg, e.tok, e.line)
}

// natParser parses rules one at a time, so each can be applied before the
// next is read (spec §10.6).
type natParser struct {
	toks []natToken
	pos  int
	vars map[string]string
	// warn receives non-fatal messages (the sticky guard).
	warn func(string)
}

func newNATParser(input string, warn func(string)) *natParser {
	if warn == nil {
		warn = func(string) {}
	}
	return &natParser{toks: natLex(input), vars: map[string]string{}, warn: warn}
}

func (p *natParser) peek() natToken {
	for p.pos < len(p.toks) {
		t := p.toks[p.pos]
		if t.quoted || !strings.HasPrefix(t.text, "$") {
			return t
		}
		// $NAME expands to the tokens of its value, on the same line.
		v, ok := p.vars[t.text[1:]]
		if !ok {
			return t
		}
		exp := natLex(v)
		for i := range exp {
			exp[i].line = t.line
		}
		p.toks = append(p.toks[:p.pos], append(exp, p.toks[p.pos+1:]...)...)
	}
	// At end of input yacc's line is 1 (the lexer resets it, spec §10.5).
	last := ""
	if len(p.toks) > 0 {
		last = p.toks[len(p.toks)-1].text
	}
	return natToken{text: last, line: 1, eof: true}
}

func (p *natParser) next() natToken {
	t := p.peek()
	if !t.eof {
		p.pos++
	}
	return t
}

// is reports whether the next token is the keyword kw (case-insensitive).
func (p *natParser) is(kw string) bool {
	t := p.peek()
	return !t.eof && !t.quoted && strings.EqualFold(t.text, kw)
}

func (p *natParser) accept(kw string) bool {
	if p.is(kw) {
		p.pos++
		return true
	}
	return false
}

func syntaxErr(t natToken) error { return &natError{msg: "syntax error", tok: t.text, line: t.line} }

func (p *natParser) expect(kw string) error {
	if !p.accept(kw) {
		return syntaxErr(p.peek())
	}
	return nil
}

func isRuleKeyword(s string) bool {
	switch strings.ToLower(s) {
	case "rdr", "map", "bimap", "map-block":
		return true
	}
	return false
}

// Next parses the next rule; it returns nil, 0, nil at the end of input.
// line is the line the rule starts on.
func (p *natParser) Next() (*NATRule, int, error) {
	for {
		t := p.peek()
		if t.eof {
			return nil, 0, nil
		}
		if t.text == ";" && !t.quoted {
			p.pos++
			continue
		}
		// NAME = "value" ;
		if !t.quoted && !isRuleKeyword(t.text) && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "=" {
			p.pos += 2
			v := p.next()
			if v.eof || !v.quoted {
				return nil, 0, syntaxErr(v)
			}
			p.vars[t.text] = v.text
			continue
		}
		if !isRuleKeyword(t.text) || t.quoted {
			return nil, 0, syntaxErr(t)
		}
		p.pos++
		r := &NATRule{Kind: strings.ToLower(t.text), ToBits: -1}
		var err error
		if r.Kind == "rdr" {
			err = p.rdr(r)
		} else {
			err = p.mapRule(r)
		}
		if err != nil {
			return nil, 0, err
		}
		// The rule ends here: `;`, another rule, or the end of input.
		end := p.peek()
		switch {
		case end.eof:
		case end.text == ";" && !end.quoted:
			p.pos++
		case isRuleKeyword(end.text) && !end.quoted:
		case !end.quoted && p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "=":
		default:
			return nil, 0, syntaxErr(end)
		}
		return r, t.line, nil
	}
}

// natLine is one parsed rule with the line it starts on.
type natLine struct {
	line int
	rule *NATRule
}

// parseNATRules parses a whole rule file (for tests and the forwarder). It
// returns the line of the first error (0 when none).
func parseNATRules(input string) ([]natLine, int) {
	p := newNATParser(input, nil)
	var out []natLine
	for {
		r, line, err := p.Next()
		if err != nil {
			if e, ok := err.(*natError); ok && e.line > 0 {
				return nil, e.line
			}
			return nil, -1
		}
		if r == nil {
			return out, 0
		}
		out = append(out, natLine{line: line, rule: r})
	}
}

// parseNATRule parses one normalised rule, as stored.
func parseNATRule(text string) (*NATRule, bool) {
	rules, bad := parseNATRules(text)
	if bad != 0 || len(rules) != 1 {
		return nil, false
	}
	return rules[0].rule, true
}
