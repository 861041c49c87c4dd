package api

import (
	"encoding/json"
	"mime"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/model"
	zw "github.com/zonewright/zonewright/internal/zwclient"
	"github.com/zonewright/zonewright/internal/zwprint"
)

// Server-side tables, as kubectl asks for them (Accept:
// application/json;as=Table;v=v1;g=meta.k8s.io): a get or list answered
// as a meta.k8s.io/v1 Table with the columns zwctl prints, so kubectl
// get shows what zwctl get does.

// tableResourceKey is where the guard leaves the resource of a get or
// list, for respond to tabulate.
const tableResourceKey = "zonewright.tableResource"

// Table is Kubernetes' meta.k8s.io/v1 Table.
type Table struct {
	Kind              string         `json:"kind"`
	APIVersion        string         `json:"apiVersion"`
	Metadata          model.ListMeta `json:"metadata"`
	ColumnDefinitions []TableColumn  `json:"columnDefinitions"`
	Rows              []TableRow     `json:"rows"`
}

// TableColumn describes a column; priority 0 columns show by default,
// 1 with -o wide.
type TableColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Format      string `json:"format"`
	Description string `json:"description"`
	Priority    int32  `json:"priority"`
}

// TableRow is one object's cells and, as includeObject asks, the object
// (Object), its metadata (Metadata, the default) or nothing (None).
type TableRow struct {
	Cells  []any `json:"cells"`
	Object any   `json:"object,omitempty"`
}

// wantsTable: the Accept header asks for a meta.k8s.io/v1 Table first.
func wantsTable(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if mt == "application/json" && params["as"] == "Table" && params["g"] == "meta.k8s.io" && params["v"] == "v1" {
			return true
		}
		if mt == "application/json" || mt == "*/*" {
			return false // JSON is preferred to a table
		}
	}
	return false
}

// asTable tabulates v, an object or a list of resource's, as zwctl
// prints it.
func asTable(resource string, v any, includeObject string, now time.Time) (Table, bool) {
	b, err := json.Marshal(v)
	if err != nil {
		return Table{}, false
	}
	var obj zw.Object
	if err := json.Unmarshal(b, &obj); err != nil {
		return Table{}, false
	}
	items := []any{obj}
	t := Table{Kind: "Table", APIVersion: "meta.k8s.io/v1", Rows: []TableRow{}}
	if list, ok := obj["items"].([]any); ok && strings.HasSuffix(zw.NestedString(obj, "kind"), "List") {
		items = list
		t.Metadata.ResourceVersion = zw.NestedString(obj, "metadata", "resourceVersion")
	}
	cols := zwprint.ColumnsFor(zw.Resource{Name: resource})
	for i, h := range append(append([]string(nil), cols.Header...), cols.Wide...) {
		c := TableColumn{Name: h, Type: "string", Priority: 0}
		if i >= len(cols.Header) {
			c.Priority = 1
		}
		if h == "NAME" {
			c.Format = "name"
		}
		t.ColumnDefinitions = append(t.ColumnDefinitions, c)
	}
	for _, it := range items {
		o, ok := it.(map[string]any)
		if !ok {
			continue
		}
		row := TableRow{}
		for _, cell := range cols.Row(o, now, true) {
			row.Cells = append(row.Cells, cell)
		}
		switch includeObject {
		case "None":
		case "Object":
			row.Object = o
		default:
			row.Object = map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
		}
		t.Rows = append(t.Rows, row)
	}
	return t, true
}
