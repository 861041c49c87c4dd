package illumos

import (
	"fmt"
	"strings"
)

// splitParsable splits one line of libofmt parsable output (dladm, ipadm
// `-p -o F1,F2,...`) into want fields. With more than one field, values are
// joined by ':' and a ':' or '\' inside a value is escaped with '\'; with
// exactly one field nothing is escaped (spec 7.3).
func splitParsable(line string, want int) ([]string, error) {
	if want == 1 {
		return []string{line}, nil
	}
	fields := make([]string, 0, want)
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '\\':
			if i+1 >= len(line) {
				return nil, fmt.Errorf("dangling backslash in %q", line)
			}
			i++
			cur.WriteByte(line[i])
		case ':':
			fields = append(fields, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	fields = append(fields, cur.String())
	if len(fields) != want {
		return nil, fmt.Errorf("%d fields, want %d: %q", len(fields), want, line)
	}
	return fields, nil
}

// nonEmptyLines returns the lines of out that are not blank.
func nonEmptyLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, strings.TrimRight(l, "\r"))
		}
	}
	return lines
}
