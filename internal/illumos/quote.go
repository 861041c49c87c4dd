package illumos

import (
	"fmt"
	"strings"
)

// shellSafe reports whether s can be given to a POSIX shell as a word
// without quoting: it is non-empty and made only of characters no shell
// treats specially (no glob, expansion, separator, quote or whitespace; no
// leading tilde or hash, no '=' so it can never be read as an assignment).
func shellSafe(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == '/' || c == ',' || c == ':' || c == '+' || c == '@' || c == '%':
		default:
			return false
		}
	}
	return true
}

// ShellQuote returns s as one POSIX shell word that the shell reads back as
// exactly s. Words made only of harmless characters are left as they are;
// anything else is single-quoted, and each single quote inside becomes
// close-quote, backslash, quote, open-quote.
//
// A NUL byte cannot be passed in an argument at all; callers reject it (see
// ShellJoin).
func ShellQuote(s string) string {
	if shellSafe(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellJoin quotes every word of argv and joins them with spaces: the string
// a shell parses back into argv. It refuses NUL bytes, which no argument
// can carry.
func ShellJoin(argv []string) (string, error) {
	words := make([]string, len(argv))
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("argument %d contains a NUL byte", i)
		}
		words[i] = ShellQuote(a)
	}
	return strings.Join(words, " "), nil
}

// shellUnquote undoes ShellQuote for one word (used to see which command a
// zlogin argv runs). It understands exactly what ShellQuote produces.
func shellUnquote(w string) (string, bool) {
	if shellSafe(w) {
		return w, true
	}
	var b strings.Builder
	for len(w) > 0 {
		switch {
		case strings.HasPrefix(w, `\'`):
			b.WriteByte('\'')
			w = w[2:]
		case w[0] == '\'':
			end := strings.IndexByte(w[1:], '\'')
			if end < 0 {
				return "", false
			}
			b.WriteString(w[1 : 1+end])
			w = w[2+end:]
		default:
			return "", false
		}
	}
	return b.String(), true
}
