package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	zw "github.com/zonewright/zonewright/internal/zwclient"
	"github.com/zonewright/zonewright/internal/zwprint"
)

func (a *app) describeCommand() *cobra.Command {
	var selector string
	cmd := &cobra.Command{
		Use:               "describe TYPE [NAME...] | TYPE/NAME...",
		Short:             "Show objects in detail, with their conditions and events",
		ValidArgsFunction: a.completeNames(""),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, names, err := typeAndNames(args)
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			ns := a.namespace()
			var objs []zw.Object
			if len(names) == 0 {
				if objs, _, err = c.List(cmd.Context(), r, ns, zw.ListOptions{LabelSelector: selector}); err != nil {
					return err
				}
			}
			for _, n := range names {
				obj, err := c.Get(cmd.Context(), r, ns, n)
				if err != nil {
					return err
				}
				objs = append(objs, obj)
			}
			for i, obj := range objs {
				if i > 0 {
					fmt.Fprintln(a.out)
				}
				var events []zw.Object
				if r.Name != "events" && r.Name != "tokens" {
					sel := "involvedObject.kind=" + r.Kind + ",involvedObject.name=" + zw.NestedString(obj, "metadata", "name")
					events, _, err = c.List(cmd.Context(), zw.Resource{Name: "events", Prefix: "/api/v1", Namespaced: true}, "", zw.ListOptions{FieldSelector: sel})
					if err != nil {
						return err
					}
					if r.Namespaced {
						events = inNamespace(events, zw.NestedString(obj, "metadata", "namespace"))
					}
					events = aboutUID(events, zw.NestedString(obj, "metadata", "uid"))
				}
				if err := describe(a.out, obj, events, a.now()); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector")
	return cmd
}

// aboutUID keeps the events about the object with uid, as kubectl does,
// not those of an earlier object of the same name; an event that names
// no UID is kept.
func aboutUID(events []zw.Object, uid string) []zw.Object {
	var out []zw.Object
	for _, e := range events {
		if u := zw.NestedString(e, "involvedObject", "uid"); uid == "" || u == "" || u == uid {
			out = append(out, e)
		}
	}
	return out
}

func inNamespace(objs []zw.Object, ns string) []zw.Object {
	var out []zw.Object
	for _, o := range objs {
		if zw.NestedString(o, "metadata", "namespace") == ns {
			out = append(out, o)
		}
	}
	return out
}

// describe writes one object as a reader wants it: its identity, spec
// and status as indented YAML, conditions and events as tables.
func describe(w io.Writer, obj zw.Object, events []zw.Object, now time.Time) error {
	field := func(k, v string) { fmt.Fprintf(w, "%-14s%s\n", k+":", v) }
	md := zw.NestedMap(obj, "metadata")
	field("Name", orNone(zw.NestedString(md, "name")))
	if ns := zw.NestedString(md, "namespace"); ns != "" {
		field("Namespace", ns)
	}
	field("Kind", zw.NestedString(obj, "kind"))
	writeMap(w, "Labels", zw.NestedMap(md, "labels"))
	writeMap(w, "Annotations", zw.NestedMap(md, "annotations"))
	if ts := zw.NestedString(md, "creationTimestamp"); ts != "" {
		field("Created", ts+" ("+age(now, ts)+" ago)")
	}
	if ts := zw.NestedString(md, "deletionTimestamp"); ts != "" {
		field("Deleting", ts+" (grace "+zw.NestedString(md, "deletionGracePeriodSeconds")+"s)")
	}
	for _, ref := range zw.NestedSlice(md, "ownerReferences") {
		field("Controlled By", zw.NestedString(ref, "kind")+"/"+zw.NestedString(ref, "name"))
	}
	var keys []string
	for k := range obj {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		return rank(keys[i]) < rank(keys[j]) || rank(keys[i]) == rank(keys[j]) && keys[i] < keys[j]
	})
	for _, k := range keys {
		v := obj[k]
		if k == "status" {
			if m, ok := v.(map[string]any); ok {
				rest := make(map[string]any, len(m))
				for sk, sv := range m {
					if sk != "conditions" {
						rest[sk] = sv
					}
				}
				v = rest
			}
		}
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s:\n", strings.ToUpper(k[:1])+k[1:])
		if s := strings.TrimSpace(string(b)); s != "{}" && s != "[]" && s != "" {
			for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
				fmt.Fprintf(w, "  %s\n", line)
			}
		}
	}
	if conds := zw.NestedSlice(obj, "status", "conditions"); len(conds) > 0 {
		fmt.Fprintln(w, "Conditions:")
		rows := [][]string{{"  Type", "Status", "Reason", "Age", "Message"}}
		for _, c := range conds {
			rows = append(rows, []string{"  " + zw.NestedString(c, "type"), zw.NestedString(c, "status"), orNone(zw.NestedString(c, "reason")),
				age(now, zw.NestedString(c, "lastTransitionTime")), zw.NestedString(c, "message")})
		}
		if err := zwprint.NewTable(w).Write(rows); err != nil {
			return err
		}
	}
	if zw.NestedString(obj, "kind") == "Event" {
		return nil
	}
	if len(events) == 0 {
		fmt.Fprintln(w, "Events:       <none>")
		return nil
	}
	sort.SliceStable(events, func(i, j int) bool { return lastSeen(events[i]) < lastSeen(events[j]) })
	fmt.Fprintln(w, "Events:")
	rows := [][]string{{"  Type", "Reason", "Age", "From", "Message"}}
	for _, e := range events {
		rows = append(rows, []string{"  " + zw.NestedString(e, "type"), zw.NestedString(e, "reason"), zwprint.EventInterval(e, now),
			orNone(zw.NestedString(e, "source")), zw.NestedString(e, "message")})
	}
	return zwprint.NewTable(w).Write(rows)
}

// rank puts spec before status and both before the rest.
func rank(k string) int {
	switch k {
	case "spec":
		return 0
	case "status":
		return 2
	}
	return 1
}

func lastSeen(e zw.Object) string {
	if t := zw.NestedString(e, "lastTimestamp"); t != "" {
		return t
	}
	return zw.NestedString(e, "metadata", "creationTimestamp")
}

func age(now time.Time, ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "<unknown>"
	}
	return zwprint.Age(now.Sub(t))
}

func writeMap(w io.Writer, title string, m map[string]any) {
	if len(m) == 0 {
		fmt.Fprintf(w, "%-14s<none>\n", title+":")
		return
	}
	var kv []string
	for k, v := range m {
		kv = append(kv, fmt.Sprintf("%s=%v", k, v))
	}
	sort.Strings(kv)
	for i, s := range kv {
		if i == 0 {
			fmt.Fprintf(w, "%-14s%s\n", title+":", s)
		} else {
			fmt.Fprintf(w, "%-14s%s\n", "", s)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
