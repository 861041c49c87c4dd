package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	zw "github.com/zonewright/zonewright/internal/zwclient"
)

func (a *app) waitCommand() *cobra.Command {
	var (
		forCond string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "wait TYPE/NAME... | TYPE NAME... --for=condition=COND[=STATUS]|--for=delete",
		Short: "Wait until objects have a condition, or are gone; exit 1 on timeout",
		Example: `  zwctl wait pod/web --for=condition=Ready --timeout=60s
  zwctl wait node n1 --for=condition=Ready=False
  zwctl wait pod/web --for=delete`,
		ValidArgsFunction: a.completeNames(""),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, names, err := typeAndNames(args)
			if err != nil {
				return err
			}
			if len(names) == 0 {
				return errors.New("name the objects to wait for")
			}
			check, done, err := waitCondition(forCond)
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			ns := ""
			if r.Namespaced {
				ns = a.namespace()
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			for _, n := range names {
				t := target{r, ns, n}
				err := zw.WaitUntil(ctx, 250*time.Millisecond, func() (bool, error) {
					obj, err := c.Get(ctx, r, ns, n)
					if ctx.Err() != nil {
						return false, ctx.Err()
					}
					return check(obj, err)
				})
				if errors.Is(err, context.DeadlineExceeded) {
					return &exitError{code: 1, msg: fmt.Sprintf("error: timed out waiting for the condition on %s/%s", r.Name, n)}
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(a.out, "%s %s\n", t, done)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&forCond, "for", "condition=Ready", "condition=TYPE[=STATUS] or delete")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait (0: as long as it takes)")
	return cmd
}

// waitCondition turns a --for value into a check of a fetched object and
// the words said when it holds.
func waitCondition(spec string) (func(zw.Object, error) (bool, error), string, error) {
	if spec == "delete" {
		return func(_ zw.Object, err error) (bool, error) {
			if zw.IsNotFound(err) {
				return true, nil
			}
			return false, err
		}, "deleted", nil
	}
	cond, ok := strings.CutPrefix(spec, "condition=")
	if !ok || cond == "" {
		return nil, "", fmt.Errorf("--for=%s: want condition=TYPE[=STATUS] or delete", spec)
	}
	typ, status, found := strings.Cut(cond, "=")
	if !found {
		status = "True"
	}
	return func(obj zw.Object, err error) (bool, error) {
		// An object that does not exist yet may come (a node joining).
		if zw.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, c := range zw.NestedSlice(obj, "status", "conditions") {
			if strings.EqualFold(zw.NestedString(c, "type"), typ) {
				return strings.EqualFold(zw.NestedString(c, "status"), status), nil
			}
		}
		return false, nil
	}, "condition met", nil
}
