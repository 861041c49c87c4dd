package sim

import "strings"

// The zonecfg lexer, after zonecfg_lex.l: commands end at a newline or ';';
// '#' at the start of a token comments out the rest of the line; '=' is
// always its own token; '[' ']' '(' ')' open and close lists and complex
// values, and ',' separates items only inside them (outside, a comma is part
// of a word, so "set limitpriv=default,dtrace_proc" is one value); double
// quotes make one word of anything up to the closing quote, with no escapes.

type zcTokKind int

const (
	tkWord zcTokKind = iota
	tkEqual
	tkLBrack
	tkRBrack
	tkLParen
	tkRParen
	tkComma
)

type zcToken struct {
	kind   zcTokKind
	text   string // the word (quotes removed) or the punctuation
	quoted bool
	line   int
}

// zcLine is one command: its tokens and the line it started on.
type zcLine struct {
	line   int
	tokens []zcToken
	// badQuote is set when a quoted string ran into the end of a line; the
	// command is a syntax error at that token.
	badQuote *zcToken
	// term is what ended the command: "\n", ";" or "" at end of input.
	term string
}

// lexZonecfg splits input into commands. It never fails: syntax problems
// are left for the parser so they are reported in order.
func lexZonecfg(input string) []zcLine {
	var out []zcLine
	line := 1
	cur := zcLine{line: 1}
	depth := 0
	flush := func(term string) {
		if len(cur.tokens) > 0 || cur.badQuote != nil {
			cur.term = term
			out = append(out, cur)
		}
		cur = zcLine{line: line}
		depth = 0
	}
	i := 0
	for i < len(input) {
		c := input[i]
		switch {
		case c == '\n':
			flush("\n")
			line++
			cur.line = line
			i++
		case c == ';':
			flush(";")
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#':
			for i < len(input) && input[i] != '\n' {
				i++
			}
		case c == '=':
			cur.tokens = append(cur.tokens, zcToken{kind: tkEqual, text: "=", line: line})
			i++
		case c == '[' || c == '(':
			k := tkLBrack
			if c == '(' {
				k = tkLParen
			}
			depth++
			cur.tokens = append(cur.tokens, zcToken{kind: k, text: string(c), line: line})
			i++
		case c == ']' || c == ')':
			k := tkRBrack
			if c == ')' {
				k = tkRParen
			}
			if depth > 0 {
				depth--
			}
			cur.tokens = append(cur.tokens, zcToken{kind: k, text: string(c), line: line})
			i++
		case c == ',' && depth > 0:
			cur.tokens = append(cur.tokens, zcToken{kind: tkComma, text: ",", line: line})
			i++
		case c == '"':
			j := i + 1
			for j < len(input) && input[j] != '"' && input[j] != '\n' {
				j++
			}
			tok := zcToken{kind: tkWord, text: input[i+1 : j], quoted: true, line: line}
			if j >= len(input) || input[j] == '\n' {
				bad := tok
				bad.text = input[i:j]
				if cur.badQuote == nil {
					cur.badQuote = &bad
				}
				i = j
				continue
			}
			cur.tokens = append(cur.tokens, tok)
			i = j + 1
		default:
			j := i
			for j < len(input) && !isWordBreak(input[j], depth) {
				j++
			}
			cur.tokens = append(cur.tokens, zcToken{kind: tkWord, text: input[i:j], line: line})
			i = j
		}
	}
	flush("")
	return out
}

func isWordBreak(c byte, depth int) bool {
	switch c {
	case ' ', '\t', '\r', '\f', '\v', '\n', ';', '=', '"', '[', ']', '(', ')':
		return true
	case ',':
		return depth > 0
	}
	return false
}

// quoteZonecfg renders a value so that lexZonecfg reads it back as one
// word: bare when it is plain, double-quoted otherwise.
func quoteZonecfg(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\r\f\v\n;=\"[]()#,") {
		return v
	}
	return `"` + v + `"`
}
