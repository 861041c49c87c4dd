package mountinfo

import "testing"

// Octal escapes become their bytes; a backslash without three octal
// digits after it stays.
func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/cg\040two`: "/mnt/cg two",
		`/a\011b\134c`:   "/a\tb\\c",
		`/plain`:         "/plain",
		`/end\04`:        `/end\04`,
		`/not\999`:       `/not\999`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
