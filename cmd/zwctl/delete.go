package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	zw "github.com/zonewright/zonewright/internal/zwclient"
)

// target is one object a command acts on.
type target struct {
	r        zw.Resource
	ns, name string
}

func (t target) String() string { return t.r.Singular + "/" + t.name }

// deleteFlags are delete's flags.
type deleteFlags struct {
	files          []string
	selector       string
	grace          int64
	force, wait    bool
	ignoreNotFound bool
	timeout        time.Duration
}

func (a *app) deleteCommand() *cobra.Command {
	var o deleteFlags
	cmd := &cobra.Command{
		Use:   "delete TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR | -f FILE",
		Short: "Delete objects, and wait until they are gone",
		Long: `delete asks for each object's removal and then, like kubectl, waits until
it is gone (a pod stops within its grace period first). --wait=false returns
at once; --grace-period overrides a pod's terminationGracePeriodSeconds;
--force is --grace-period=0.`,
		ValidArgsFunction: a.completeNames(""),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			return a.delete(cmd.Context(), c, args, o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.files, "filename", "f", nil, "delete the objects of these files, directories or -")
	f.StringVarP(&o.selector, "selector", "l", "", "delete the objects with these labels")
	f.Int64Var(&o.grace, "grace-period", -1, "seconds a pod has to stop (-1: its own terminationGracePeriodSeconds)")
	f.BoolVar(&o.force, "force", false, "stop pods at once (--grace-period=0)")
	f.BoolVar(&o.wait, "wait", true, "wait until the objects are gone")
	f.BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "an object that does not exist is not an error")
	f.DurationVar(&o.timeout, "timeout", 0, "how long to wait (0: as long as it takes)")
	return cmd
}

// delete asks for the removal of the objects args or the flags name, then
// waits until those it asked for are gone.
func (a *app) delete(ctx context.Context, c *zw.Client, args []string, o deleteFlags) error {
	var targets []target
	var err error
	if len(o.files) > 0 {
		if len(args) > 0 {
			return errors.New("give either -f or TYPE NAME, not both")
		}
		targets, err = a.manifestTargets(o.files)
	} else {
		targets, err = a.namedTargets(ctx, c, args, o.selector)
	}
	if err != nil {
		return err
	}
	asked, failed := a.askDeletes(ctx, c, targets, o)
	if o.wait && len(asked) > 0 {
		wctx, cancel := withTimeout(ctx, o.timeout)
		defer cancel()
		for _, t := range asked {
			if err := waitGone(wctx, c, t); err != nil {
				return &exitError{code: 1, msg: fmt.Sprintf("error: %s is not gone yet: %v", t, err)}
			}
		}
	}
	if failed {
		return &exitError{code: 1}
	}
	return nil
}

// manifestTargets are the objects the manifests in files describe.
func (a *app) manifestTargets(files []string) ([]target, error) {
	ms, err := readManifests(files, a.in)
	if err != nil {
		return nil, err
	}
	var targets []target
	for _, m := range ms {
		r, err := zw.ResourceForKind(zw.NestedString(m.object, "kind"))
		if err != nil {
			return nil, err
		}
		targets = append(targets, target{r, a.namespaceOf(r, m.object), zw.NestedString(m.object, "metadata", "name")})
	}
	return targets, nil
}

// namedTargets are the objects args name (TYPE NAME... or TYPE/NAME...),
// or those of TYPE that selector selects.
func (a *app) namedTargets(ctx context.Context, c *zw.Client, args []string, selector string) ([]target, error) {
	r, names, err := typeAndNames(args)
	if err != nil {
		return nil, err
	}
	ns := ""
	if r.Namespaced {
		ns = a.namespace()
	}
	var targets []target
	if len(names) == 0 {
		if selector == "" {
			return nil, fmt.Errorf("name the %s to delete, or select them with -l", r.Name)
		}
		items, _, err := c.List(ctx, r, ns, zw.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			fmt.Fprintf(a.errOut, "No resources found\n")
		}
		for _, o := range items {
			targets = append(targets, target{r, ns, zw.NestedString(o, "metadata", "name")})
		}
	} else if selector != "" {
		return nil, errors.New("give either names or -l, not both")
	}
	for _, n := range names {
		targets = append(targets, target{r, ns, n})
	}
	return targets, nil
}

// askDeletes asks for each target's removal, printing each answer; asked
// are those the server took, failed whether any other failed.
func (a *app) askDeletes(ctx context.Context, c *zw.Client, targets []target, o deleteFlags) (asked []target, failed bool) {
	q := url.Values{}
	grace := o.grace
	if o.force {
		grace = 0
	}
	if grace >= 0 {
		q.Set("gracePeriodSeconds", strconv.FormatInt(grace, 10))
	}
	for _, t := range targets {
		if err := c.Delete(ctx, t.r, t.ns, t.name, q); err != nil {
			if o.ignoreNotFound && zw.IsNotFound(err) {
				continue
			}
			fmt.Fprintln(a.errOut, errorLine(err))
			failed = true
			continue
		}
		fmt.Fprintf(a.out, "%s %q deleted\n", t.r.Singular, t.name)
		asked = append(asked, t)
	}
	return asked, failed
}

// waitGone returns when t no longer exists.
func waitGone(ctx context.Context, c *zw.Client, t target) error {
	return zw.WaitUntil(ctx, 250*time.Millisecond, func() (bool, error) {
		_, err := c.Get(ctx, t.r, t.ns, t.name)
		if zw.IsNotFound(err) {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, err
	})
}
