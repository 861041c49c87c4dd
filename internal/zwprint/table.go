// Package zwprint prints API objects the way zwctl shows them: tables
// like kubectl's, and JSON, YAML, names and JSONPath.
package zwprint

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	zw "github.com/zonewright/zonewright/internal/zwclient"
)

// Age is a duration as tables show it: 42s, 5m, 3h, 2d, 1y.
func Age(d time.Duration) string {
	switch s := int64(d.Round(time.Second) / time.Second); {
	case s < 0:
		return "0s"
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 60*60:
		return fmt.Sprintf("%dm", s/60)
	case s < 24*60*60:
		return fmt.Sprintf("%dh", s/3600)
	case s < 365*24*60*60:
		return fmt.Sprintf("%dd", s/86400)
	default:
		return fmt.Sprintf("%dy", s/(365*86400))
	}
}

// EventInterval is when an event was last seen, and for one seen more
// than once how often over how long, as kubectl shows it: "3m (x5 over 10m)".
func EventInterval(o zw.Object, now time.Time) string {
	last := since(now, eventTime(o, "lastTimestamp"))
	if n := zw.NestedInt(o, "count"); n > 1 {
		return fmt.Sprintf("%s (x%d over %s)", last, n, since(now, eventTime(o, "firstTimestamp")))
	}
	return last
}

// eventTime is an event's firstTimestamp or lastTimestamp, or for one that
// has none its creation.
func eventTime(o zw.Object, field string) string {
	if t := zw.NestedString(o, field); t != "" {
		return t
	}
	return zw.NestedString(o, "metadata", "creationTimestamp")
}

// since is the age of an RFC 3339 time, or <unknown>.
func since(now time.Time, ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "<unknown>"
	}
	return Age(now.Sub(t))
}

// Table writes rows padded to columns that only ever grow, so a watch's
// rows line up with the list before them.
type Table struct {
	w      io.Writer
	widths []int
}

// NewTable writes to w.
func NewTable(w io.Writer) *Table { return &Table{w: w} }

// Write writes rows, widening the columns to fit them first.
func (t *Table) Write(rows [][]string) error {
	for _, r := range rows {
		for i, c := range r {
			if i >= len(t.widths) {
				t.widths = append(t.widths, 0)
			}
			t.widths[i] = max(t.widths[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", t.widths[i]-len(c)+3))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

// Columns is how a resource shows in a table.
type Columns struct {
	Header []string
	// Wide are the columns -o wide adds.
	Wide []string
	Row  func(o zw.Object, now time.Time, wide bool) []string
}

// TableOptions say which columns a table has.
type TableOptions struct {
	Wide bool
	// WithNamespace puts NAMESPACE first (-A).
	WithNamespace bool
	NoHeaders     bool
	// ShowLabels adds a LABELS column (--show-labels).
	ShowLabels bool
}

// HeaderRow is the table's header row.
func (c Columns) HeaderRow(o TableOptions) []string {
	h := append([]string(nil), c.Header...)
	if o.Wide {
		h = append(h, c.Wide...)
	}
	if o.ShowLabels {
		h = append(h, "LABELS")
	}
	if o.WithNamespace {
		h = append([]string{"NAMESPACE"}, h...)
	}
	return h
}

// RowOf is one object's row.
func (c Columns) RowOf(obj zw.Object, now time.Time, o TableOptions) []string {
	r := c.Row(obj, now, o.Wide)
	if o.ShowLabels {
		r = append(r, labelsString(zw.NestedMap(obj, "metadata", "labels")))
	}
	if o.WithNamespace {
		r = append([]string{zw.NestedString(obj, "metadata", "namespace")}, r...)
	}
	return r
}

// ColumnsFor returns the columns of resource r.
func ColumnsFor(r zw.Resource) Columns {
	if c, ok := columns[r.Name]; ok {
		return c
	}
	return Columns{Header: []string{"NAME", "AGE"}, Row: func(o zw.Object, now time.Time, _ bool) []string {
		return []string{name(o), age(o, now)}
	}}
}

func name(o zw.Object) string { return zw.NestedString(o, "metadata", "name") }
func age(o zw.Object, now time.Time) string {
	return since(now, zw.NestedString(o, "metadata", "creationTimestamp"))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func labelsString(m map[string]any) string {
	if len(m) == 0 {
		return "<none>"
	}
	var kv []string
	for k, v := range m {
		kv = append(kv, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func condition(o zw.Object, typ string) map[string]any {
	for _, c := range zw.NestedSlice(o, "status", "conditions") {
		if zw.NestedString(c, "type") == typ {
			m, _ := c.(map[string]any)
			return m
		}
	}
	return nil
}

var columns = map[string]Columns{
	"namespaces": {Header: []string{"NAME", "STATUS", "AGE"}, Row: func(o zw.Object, now time.Time, _ bool) []string {
		return []string{name(o), zw.NestedString(o, "status", "phase"), age(o, now)}
	}},
	"pods": {Header: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}, Wide: []string{"IP", "NODE"}, Row: podRow},
	"nodes": {Header: []string{"NAME", "STATUS", "AGE", "VERSION"}, Wide: []string{"INTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "POD-CIDR"},
		Row: func(o zw.Object, now time.Time, wide bool) []string {
			status := "Unknown"
			if c := condition(o, "Ready"); c != nil {
				status = "NotReady"
				if zw.NestedString(c, "status") == "True" {
					status = "Ready"
				}
			}
			if zw.Nested(o, "spec", "unschedulable") == true {
				status += ",SchedulingDisabled"
			}
			r := []string{name(o), status, age(o, now), orNone(zw.NestedString(o, "status", "nodeInfo", "agentVersion"))}
			if wide {
				ip := "<none>"
				for _, a := range zw.NestedSlice(o, "status", "addresses") {
					if zw.NestedString(a, "type") == "InternalIP" {
						ip = zw.NestedString(a, "address")
					}
				}
				r = append(r, ip, orNone(zw.NestedString(o, "status", "nodeInfo", "osRelease")),
					orNone(zw.NestedString(o, "status", "nodeInfo", "kernelVersion")), orNone(zw.NestedString(o, "spec", "podCIDR")))
			}
			return r
		}},
	"images": {Header: []string{"NAME", "KIND", "PHASE", "PROGRESS", "AGE"}, Wide: []string{"SIZE", "NODES", "SOURCE"},
		Row: func(o zw.Object, now time.Time, wide bool) []string {
			r := []string{name(o), zw.NestedString(o, "spec", "kind"), orNone(zw.NestedString(o, "status", "phase")), imageProgress(o), age(o, now)}
			if wide {
				size := zw.NestedInt(o, "status", "artefactSize")
				if size == 0 {
					size = zw.NestedInt(o, "spec", "size")
				}
				var nodes []string
				for _, n := range zw.NestedSlice(o, "status", "nodes") {
					node := zw.NestedString(n, "node") + ":" + zw.NestedString(n, "phase")
					if total := zw.NestedInt(n, "bytesTotal"); total > 0 && zw.NestedString(n, "phase") == "Pulling" {
						node += fmt.Sprintf("(%d%%)", zw.NestedInt(n, "bytesDone")*100/total)
					}
					nodes = append(nodes, node)
				}
				r = append(r, Bytes(size), orNone(strings.Join(nodes, ",")), orNone(zw.NestedString(o, "spec", "source")))
			}
			return r
		}},
	"services": {Header: []string{"NAME", "TYPE", "CLUSTER-IP", "PORT(S)", "AGE"}, Wide: []string{"SELECTOR"},
		Row: func(o zw.Object, now time.Time, wide bool) []string {
			var ports []string
			for _, p := range zw.NestedSlice(o, "spec", "ports") {
				proto := zw.NestedString(p, "protocol")
				if proto == "" {
					proto = "TCP"
				}
				ports = append(ports, zw.NestedString(p, "port")+"/"+proto)
			}
			typ := zw.NestedString(o, "spec", "type")
			if typ == "" {
				typ = "ClusterIP"
			}
			r := []string{name(o), typ, orNone(zw.NestedString(o, "spec", "clusterIP")), orNone(strings.Join(ports, ",")), age(o, now)}
			if wide {
				r = append(r, labelsString(zw.NestedMap(o, "spec", "selector")))
			}
			return r
		}},
	"secrets": {Header: []string{"NAME", "TYPE", "DATA", "AGE"}, Row: func(o zw.Object, now time.Time, _ bool) []string {
		n := len(zw.NestedMap(o, "data"))
		for k := range zw.NestedMap(o, "stringData") {
			if _, dup := zw.NestedMap(o, "data")[k]; !dup {
				n++
			}
		}
		typ := zw.NestedString(o, "type")
		if typ == "" {
			typ = "Opaque"
		}
		return []string{name(o), typ, fmt.Sprint(n), age(o, now)}
	}},
	// As kubectl prints a quota: used/hard of each bound, limits apart.
	"resourcequotas": {Header: []string{"NAME", "AGE", "REQUEST", "LIMIT"},
		Row: func(o zw.Object, now time.Time, _ bool) []string {
			hard := zw.NestedMap(o, "status", "hard")
			var request, limit []string
			for _, k := range slices.Sorted(maps.Keys(hard)) {
				cell := fmt.Sprintf("%s: %s/%v", k, zw.NestedString(o, "status", "used", k), hard[k])
				if strings.HasPrefix(k, "limits.") {
					limit = append(limit, cell)
				} else {
					request = append(request, cell)
				}
			}
			return []string{name(o), age(o, now), strings.Join(request, ", "), strings.Join(limit, ", ")}
		}},
	"persistentvolumeclaims": {Header: []string{"NAME", "STATUS", "CAPACITY", "ACCESS MODES", "NODE", "AGE"},
		Row: func(o zw.Object, now time.Time, _ bool) []string {
			var modes []string
			for _, m := range zw.NestedSlice(o, "spec", "accessModes") {
				modes = append(modes, accessMode(fmt.Sprint(m)))
			}
			capacity := zw.NestedString(o, "status", "capacity", "storage")
			return []string{name(o), orNone(zw.NestedString(o, "status", "phase")), orNone(capacity), orNone(strings.Join(modes, ",")),
				orNone(zw.NestedString(o, "status", "nodeName")), age(o, now)}
		}},
	"endpoints": {Header: []string{"NAME", "ENDPOINTS", "AGE"}, Row: func(o zw.Object, now time.Time, _ bool) []string {
		var eps []string
		for _, s := range zw.NestedSlice(o, "subsets") {
			for _, a := range zw.NestedSlice(s, "addresses") {
				ports := zw.NestedSlice(s, "ports")
				if len(ports) == 0 {
					eps = append(eps, zw.NestedString(a, "ip"))
				}
				for _, p := range ports {
					eps = append(eps, zw.NestedString(a, "ip")+":"+zw.NestedString(p, "port"))
				}
			}
		}
		shown := strings.Join(eps, ",")
		if len(eps) > 3 {
			shown = strings.Join(eps[:3], ",") + fmt.Sprintf(" + %d more...", len(eps)-3)
		}
		return []string{name(o), orNone(shown), age(o, now)}
	}},
	"tokens": {Header: []string{"ID", "ROLE", "NAMESPACE", "EXPIRES", "REVOKED", "AGE"}, Row: func(o zw.Object, now time.Time, _ bool) []string {
		revoked := "<none>"
		if r := zw.NestedString(o, "revokedAt"); r != "" {
			revoked = since(now, r) + " ago"
		}
		expires := "<unknown>"
		if t, err := time.Parse(time.RFC3339Nano, zw.NestedString(o, "expiresAt")); err == nil {
			expires = "in " + Age(t.Sub(now))
			if t.Before(now) {
				expires = Age(now.Sub(t)) + " ago"
			}
		}
		return []string{zw.NestedString(o, "id"), zw.NestedString(o, "role"), orNone(zw.NestedString(o, "namespace")), expires, revoked,
			since(now, zw.NestedString(o, "createdAt"))}
	}},
	"deployments": {Header: []string{"NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"}, Wide: []string{"CONTAINERS", "IMAGES", "SELECTOR"},
		Row: func(o zw.Object, now time.Time, wide bool) []string {
			want := int64(1)
			if zw.Nested(o, "spec", "replicas") != nil {
				want = zw.NestedInt(o, "spec", "replicas")
			}
			r := []string{name(o), fmt.Sprintf("%d/%d", zw.NestedInt(o, "status", "readyReplicas"), want),
				zw.NestedString(o, "status", "updatedReplicas"), zw.NestedString(o, "status", "availableReplicas"), age(o, now)}
			if wide {
				names, images := containers(zw.NestedSlice(o, "spec", "template", "spec", "containers"))
				r = append(r, names, images, labelsString(zw.NestedMap(o, "spec", "selector", "matchLabels")))
			}
			return r
		}},
	"replicasets": {Header: []string{"NAME", "DESIRED", "CURRENT", "READY", "AGE"}, Wide: []string{"CONTAINERS", "IMAGES", "SELECTOR"},
		Row: func(o zw.Object, now time.Time, wide bool) []string {
			r := []string{name(o), fmt.Sprint(zw.NestedInt(o, "spec", "replicas")), fmt.Sprint(zw.NestedInt(o, "status", "replicas")),
				fmt.Sprint(zw.NestedInt(o, "status", "readyReplicas")), age(o, now)}
			if wide {
				names, images := containers(zw.NestedSlice(o, "spec", "template", "spec", "containers"))
				r = append(r, names, images, labelsString(zw.NestedMap(o, "spec", "selector", "matchLabels")))
			}
			return r
		}},
	"controllerrevisions": {Header: []string{"NAME", "CONTROLLER", "REVISION", "AGE"}, Row: func(o zw.Object, now time.Time, _ bool) []string {
		owner := "<none>"
		for _, ref := range zw.NestedSlice(o, "metadata", "ownerReferences") {
			owner = strings.ToLower(zw.NestedString(ref, "kind")) + ".apps/" + zw.NestedString(ref, "name")
		}
		return []string{name(o), owner, zw.NestedString(o, "revision"), age(o, now)}
	}},
	"jobs": {Header: []string{"NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"}, Wide: []string{"CONTAINERS", "IMAGES"},
		Row: func(o zw.Object, now time.Time, wide bool) []string {
			completions := int64(1)
			if zw.Nested(o, "spec", "completions") != nil {
				completions = zw.NestedInt(o, "spec", "completions")
			}
			status := "Running"
			for _, t := range []string{"Complete", "Failed", "Suspended"} {
				if c := condition(o, t); c != nil && zw.NestedString(c, "status") == "True" {
					status = t
				}
			}
			duration := ""
			if start, err := time.Parse(time.RFC3339Nano, zw.NestedString(o, "status", "startTime")); err == nil {
				end := now
				if t, err := time.Parse(time.RFC3339Nano, zw.NestedString(o, "status", "completionTime")); err == nil {
					end = t
				}
				duration = Age(end.Sub(start))
			}
			r := []string{name(o), status, fmt.Sprintf("%d/%d", zw.NestedInt(o, "status", "succeeded"), completions), orNone(duration), age(o, now)}
			if wide {
				names, images := containers(zw.NestedSlice(o, "spec", "template", "spec", "containers"))
				r = append(r, names, images)
			}
			return r
		}},
	"events": {Header: []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}, Wide: []string{"SOURCE", "FIRST SEEN", "COUNT", "NAME"},
		Row: func(o zw.Object, now time.Time, wide bool) []string {
			obj := strings.ToLower(zw.NestedString(o, "involvedObject", "kind")) + "/" + zw.NestedString(o, "involvedObject", "name")
			r := []string{EventInterval(o, now), zw.NestedString(o, "type"), zw.NestedString(o, "reason"), obj, zw.NestedString(o, "message")}
			if wide {
				r = append(r, orNone(zw.NestedString(o, "source")), since(now, eventTime(o, "firstTimestamp")),
					fmt.Sprint(max(zw.NestedInt(o, "count"), 1)), name(o))
			}
			return r
		}},
	"volumesnapshots": {Header: []string{"NAME", "READYTOUSE", "SOURCEPVC", "RESTORESIZE", "AGE"}, Row: func(o zw.Object, now time.Time, _ bool) []string {
		ready := "false"
		if zw.Nested(o, "status", "readyToUse") == true {
			ready = "true"
		}
		return []string{name(o), ready, orNone(zw.NestedString(o, "spec", "source", "persistentVolumeClaimName")),
			orNone(zw.NestedString(o, "status", "restoreSize")), age(o, now)}
	}},
}

func accessMode(m string) string {
	switch m {
	case "ReadWriteOnce":
		return "RWO"
	case "ReadOnlyMany":
		return "ROX"
	case "ReadWriteMany":
		return "RWX"
	case "ReadWriteOncePod":
		return "RWOP"
	}
	return m
}

func containers(cs []any) (names, images string) {
	var n, i []string
	for _, c := range cs {
		n = append(n, zw.NestedString(c, "name"))
		i = append(i, zw.NestedString(c, "image"))
	}
	return orNone(strings.Join(n, ",")), orNone(strings.Join(i, ","))
}

func podRow(o zw.Object, now time.Time, wide bool) []string {
	total := len(zw.NestedSlice(o, "spec", "containers"))
	ready, restarts := 0, int64(0)
	status := zw.NestedString(o, "status", "phase")
	if status == "" {
		status = "Pending"
	}
	if r := zw.NestedString(o, "status", "reason"); r != "" {
		status = r
	}
	for _, cs := range zw.NestedSlice(o, "status", "containerStatuses") {
		if zw.Nested(cs, "ready") == true {
			ready++
		}
		restarts += zw.NestedInt(cs, "restartCount")
		if r := zw.NestedString(cs, "state", "waiting", "reason"); r != "" && (status == "Pending" || status == "Running") {
			status = r
		}
	}
	if zw.Nested(o, "metadata", "deletionTimestamp") != nil {
		status = "Terminating"
	}
	r := []string{name(o), fmt.Sprintf("%d/%d", ready, total), status, fmt.Sprint(restarts), age(o, now)}
	if wide {
		r = append(r, orNone(zw.NestedString(o, "status", "podIP")), orNone(zw.NestedString(o, "spec", "nodeName")))
	}
	return r
}

// imageProgress is an import's bytes done of the total, as a percentage.
func imageProgress(o zw.Object) string {
	done, total := zw.NestedInt(o, "status", "bytesDone"), zw.NestedInt(o, "status", "bytesTotal")
	switch {
	case total > 0:
		return fmt.Sprintf("%d%%", done*100/total)
	case done > 0:
		return Bytes(done)
	}
	return "-"
}

// Bytes is a size in binary units: 512B, 1.5KiB, 40.0MiB.
func Bytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	f, units := float64(n), []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	for i := range units {
		f /= 1024
		if f < 1024 || i == len(units)-1 {
			return fmt.Sprintf("%.1f%s", f, units[i])
		}
	}
	return ""
}
