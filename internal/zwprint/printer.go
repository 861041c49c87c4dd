package zwprint

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	zw "github.com/zonewright/zonewright/internal/zwclient"
)

// Printer prints objects in one output format. A table printer prints its
// header once, so successive calls (a watch) continue the same table.
type Printer interface {
	// Print prints objs; single says the user asked for one object, which
	// the JSON, YAML and JSONPath formats print bare instead of as a List.
	Print(objs []zw.Object, single bool) error
}

// New makes the printer of an -o value: "" (table), wide, json, yaml, name
// or jsonpath=TEMPLATE.
func New(format string, r zw.Resource, w io.Writer, o TableOptions, now func() time.Time) (Printer, error) {
	switch {
	case format == "" || format == "wide":
		o.Wide = format == "wide"
		return &tablePrinter{t: NewTable(w), cols: ColumnsFor(r), opts: o, now: now}, nil
	case format == "json":
		return encodePrinter{w: w, encode: func(v any) ([]byte, error) {
			b, err := json.MarshalIndent(v, "", "    ")
			return append(b, '\n'), err
		}}, nil
	case format == "yaml":
		return encodePrinter{w: w, encode: yaml.Marshal}, nil
	case format == "name":
		return namePrinter{w: w, r: r}, nil
	case strings.HasPrefix(format, "jsonpath="):
		jp, err := ParseJSONPath(strings.TrimPrefix(format, "jsonpath="))
		if err != nil {
			return nil, err
		}
		return jsonPathPrinter{w: w, jp: jp}, nil
	}
	return nil, fmt.Errorf("unknown output format %q: want wide, json, yaml, name or jsonpath=TEMPLATE", format)
}

type tablePrinter struct {
	t           *Table
	cols        Columns
	opts        TableOptions
	now         func() time.Time
	headerShown bool
}

func (p *tablePrinter) Print(objs []zw.Object, _ bool) error {
	var rows [][]string
	if !p.headerShown && !p.opts.NoHeaders {
		rows = append(rows, p.cols.HeaderRow(p.opts))
	}
	p.headerShown = true
	now := p.now()
	for _, o := range objs {
		rows = append(rows, p.cols.RowOf(o, now, p.opts))
	}
	return p.t.Write(rows)
}

func listOf(objs []zw.Object) zw.Object {
	items := make([]any, len(objs))
	for i, o := range objs {
		items[i] = o
	}
	return zw.Object{"apiVersion": "v1", "kind": "List", "items": items}
}

type encodePrinter struct {
	w      io.Writer
	encode func(any) ([]byte, error)
}

func (p encodePrinter) Print(objs []zw.Object, single bool) error {
	var v any = listOf(objs)
	if single && len(objs) == 1 {
		v = objs[0]
	}
	b, err := p.encode(v)
	if err != nil {
		return err
	}
	_, err = p.w.Write(b)
	return err
}

type namePrinter struct {
	w io.Writer
	r zw.Resource
}

// NameOf is how an object is named in messages: pod/web.
func NameOf(r zw.Resource, o zw.Object) string {
	n := zw.NestedString(o, "metadata", "name")
	if r.Name == "tokens" {
		n = zw.NestedString(o, "id")
	}
	return r.Singular + "/" + n
}

func (p namePrinter) Print(objs []zw.Object, _ bool) error {
	for _, o := range objs {
		if _, err := fmt.Fprintln(p.w, NameOf(p.r, o)); err != nil {
			return err
		}
	}
	return nil
}

type jsonPathPrinter struct {
	w  io.Writer
	jp *JSONPath
}

func (p jsonPathPrinter) Print(objs []zw.Object, single bool) error {
	var v any = listOf(objs)
	if single && len(objs) == 1 {
		v = objs[0]
	}
	out, err := p.jp.Execute(v)
	if err != nil {
		return err
	}
	_, err = io.WriteString(p.w, out)
	return err
}
