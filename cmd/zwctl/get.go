package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	zw "github.com/zonewright/zonewright/internal/zwclient"
	"github.com/zonewright/zonewright/internal/zwprint"
)

type getOptions struct {
	output        string
	watch         bool
	watchOnly     bool
	selector      string
	fieldSelector string
	noHeaders     bool
	showLabels    bool
}

func (a *app) getCommand() *cobra.Command {
	var o getOptions
	var raw string
	cmd := &cobra.Command{
		Use:   "get TYPE [NAME...] | TYPE/NAME...",
		Short: "Show objects as a table, JSON, YAML, names or JSONPath; -w follows changes",
		Example: `  zwctl get pods
  zwctl get pods -A -o wide
  zwctl get deploy web -o yaml
  zwctl get pods -l app=web -w
  zwctl get nodes -o jsonpath='{.items[*].metadata.name}'
  zwctl get --raw /metrics`,
		ValidArgsFunction: a.completeNames(""),
		RunE: func(cmd *cobra.Command, args []string) error {
			if raw != "" {
				return a.getRaw(cmd, args, raw)
			}
			return a.get(cmd, args, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&raw, "raw", "", "print what GET of this API path answers, as it is (e.g. /metrics, /openapi/v3)")
	f.StringVarP(&o.output, "output", "o", "", "output format: wide, json, yaml, name or jsonpath=TEMPLATE")
	f.BoolVarP(&o.watch, "watch", "w", false, "after the list, print a line per change")
	f.BoolVar(&o.watchOnly, "watch-only", false, "print only the changes, not the list first")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. app=web,tier!=db")
	f.StringVar(&o.fieldSelector, "field-selector", "", "field selector, e.g. status.phase=Running")
	f.BoolVar(&o.noHeaders, "no-headers", false, "tables without their header")
	f.BoolVar(&o.showLabels, "show-labels", false, "tables with a LABELS column")
	f.BoolVarP(&a.allNS, "all-namespaces", "A", false, "every namespace")
	return cmd
}

func (a *app) get(cmd *cobra.Command, args []string, o getOptions) error {
	// Several types at once (pods,svc): one table each.
	if len(args) == 1 && strings.Contains(args[0], ",") && !strings.Contains(args[0], "/") {
		if o.watch || o.watchOnly {
			return errors.New("watch one resource type at a time")
		}
		for i, t := range strings.Split(args[0], ",") {
			if i > 0 && (o.output == "" || o.output == "wide") {
				fmt.Fprintln(a.out)
			}
			if err := a.get(cmd, []string{t}, o); err != nil {
				return err
			}
		}
		return nil
	}
	r, names, err := typeAndNames(args)
	if err != nil {
		return err
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	ns := a.namespace()
	if a.allNS || !r.Namespaced {
		ns = ""
	}
	p, err := zwprint.New(o.output, r, a.out, zwprint.TableOptions{WithNamespace: a.allNS && r.Namespaced, NoHeaders: o.noHeaders, ShowLabels: o.showLabels}, a.now)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	opts := zw.ListOptions{LabelSelector: o.selector, FieldSelector: o.fieldSelector}
	if o.watch || o.watchOnly {
		return watchObjects(ctx, c, r, ns, names, opts, o.watchOnly, p)
	}
	if len(names) > 0 {
		return a.getNamed(ctx, c, r, ns, names, p)
	}
	items, _, err := c.List(ctx, r, ns, opts)
	if err != nil {
		return err
	}
	if len(items) == 0 && (o.output == "" || o.output == "wide") {
		if ns != "" {
			fmt.Fprintf(a.errOut, "No resources found in %s namespace.\n", ns)
		} else {
			fmt.Fprintln(a.errOut, "No resources found")
		}
		return nil
	}
	return p.Print(items, false)
}

// watchObjects prints r's objects (those named, if any), unless
// watchOnly, then each change to them.
func watchObjects(ctx context.Context, c *zw.Client, r zw.Resource, ns string, names []string, opts zw.ListOptions, watchOnly bool, p zwprint.Printer) error {
	if !r.Watchable {
		return fmt.Errorf("%s cannot be watched", r.Name)
	}
	if len(names) == 1 {
		opts.FieldSelector = joinSelector(opts.FieldSelector, "metadata.name="+names[0])
	}
	items, rv, err := c.List(ctx, r, ns, opts)
	if err != nil {
		return err
	}
	items = named(items, names)
	if !watchOnly && len(items) > 0 {
		if err := p.Print(items, false); err != nil {
			return err
		}
	}
	return c.Watch(ctx, r, ns, opts, rv, func(ev zw.Event) error {
		if len(names) > 0 && !slices.Contains(names, zw.NestedString(ev.Object, "metadata", "name")) {
			return nil
		}
		return p.Print([]zw.Object{ev.Object}, true)
	})
}

// getNamed prints the named objects that exist; a name that does not is
// reported and makes the command fail once the others are printed.
func (a *app) getNamed(ctx context.Context, c *zw.Client, r zw.Resource, ns string, names []string, p zwprint.Printer) error {
	var found []zw.Object
	var failed error
	for _, n := range names {
		obj, err := c.Get(ctx, r, ns, n)
		if err != nil {
			fmt.Fprintln(a.errOut, err)
			failed = &exitError{code: 1}
			continue
		}
		found = append(found, obj)
	}
	if len(found) > 0 {
		if err := p.Print(found, len(names) == 1); err != nil {
			return err
		}
	}
	return failed
}

func named(items []zw.Object, names []string) []zw.Object {
	if len(names) == 0 {
		return items
	}
	var out []zw.Object
	for _, o := range items {
		if slices.Contains(names, zw.NestedString(o, "metadata", "name")) {
			out = append(out, o)
		}
	}
	return out
}

func joinSelector(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

// getRaw prints the answer to a GET of an API path, as kubectl get --raw.
func (a *app) getRaw(cmd *cobra.Command, args []string, raw string) error {
	if len(args) > 0 {
		return errors.New("--raw takes a path and no resource type or names")
	}
	path, query, _ := strings.Cut(raw, "?")
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("--raw %q: want an absolute path such as /metrics", raw)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("--raw %q: %w", raw, err)
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	body, err := c.Stream(cmd.Context(), "GET", path, q, nil)
	if err != nil {
		return err
	}
	defer body.Close()
	_, err = io.Copy(a.out, body)
	return err
}
