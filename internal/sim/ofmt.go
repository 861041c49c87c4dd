package sim

import (
	"fmt"
	"io"
	"strings"
)

// ofmt reproduces libofmt, the output formatter of dladm and ipadm: human
// mode pads columns to fixed widths under an upper-case header; parsable
// mode (-p) prints no header and joins fields with ':', escaping ':' and
// '\' only when more than one field is printed.

type ofmtField struct {
	name  string
	width int
}

type ofmtTable struct {
	fields []ofmtField // in output order
}

// selectFields resolves a -o list (case-insensitive, "all" allowed) against
// the known fields. It returns the unknown name on failure.
func selectFields(known []ofmtField, defaults []string, spec string) (*ofmtTable, string) {
	var names []string
	switch strings.ToLower(spec) {
	case "":
		names = defaults
	case "all":
		for _, f := range known {
			names = append(names, f.name)
		}
	default:
		names = strings.Split(spec, ",")
	}
	t := &ofmtTable{}
	for _, n := range names {
		found := false
		for _, f := range known {
			if strings.EqualFold(f.name, n) {
				t.fields = append(t.fields, f)
				found = true
				break
			}
		}
		if !found {
			return nil, n
		}
	}
	return t, ""
}

// print writes rows (maps from upper-case field name to value).
func (t *ofmtTable) print(w io.Writer, parsable bool, rows []map[string]string) {
	if parsable {
		for _, r := range rows {
			vals := make([]string, len(t.fields))
			for i, f := range t.fields {
				v := r[f.name]
				if len(t.fields) > 1 {
					v = ofmtEscape(v)
				}
				vals[i] = v
			}
			fmt.Fprintln(w, strings.Join(vals, ":"))
		}
		return
	}
	header := map[string]string{}
	for _, f := range t.fields {
		header[f.name] = f.name
	}
	t.printHuman(w, header)
	for _, r := range rows {
		human := map[string]string{}
		for _, f := range t.fields {
			v := r[f.name]
			if v == "" {
				v = "--"
			}
			human[f.name] = v
		}
		t.printHuman(w, human)
	}
}

// printHuman pads every field but the last to its width; a value that does
// not fit pushes the rest of the line right, as ofmt's overflow does.
func (t *ofmtTable) printHuman(w io.Writer, r map[string]string) {
	var b strings.Builder
	overflow := 0
	for i, f := range t.fields {
		v := r[f.name]
		if i == len(t.fields)-1 {
			b.WriteString(v)
			break
		}
		width := f.width - overflow
		if len(v) >= width {
			b.WriteString(v)
			b.WriteByte(' ')
			overflow = len(v) + 1 - width
			if overflow < 0 {
				overflow = 0
			}
			continue
		}
		overflow = 0
		b.WriteString(v)
		b.WriteString(strings.Repeat(" ", width-len(v)))
	}
	fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
}

func ofmtEscape(v string) string {
	if !strings.ContainsAny(v, ":\\") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == ':' || v[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
