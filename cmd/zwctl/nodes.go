package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	zw "github.com/zonewright/zonewright/internal/zwclient"
)

var nodes, _ = zw.LookupResource("nodes")
var pods, _ = zw.LookupResource("pods")

// nodeName reads `NAME`, `node/NAME` or `node NAME`.
func nodeName(args []string) (string, error) {
	switch len(args) {
	case 1:
		if r, names, err := typeAndNames(args); err == nil && len(names) == 1 {
			if r.Name != "nodes" {
				return "", fmt.Errorf("%s: only nodes are cordoned and drained", r.Name)
			}
			return names[0], nil
		}
		return args[0], nil
	case 2:
		if r, err := zw.LookupResource(args[0]); err != nil || r.Name != "nodes" {
			return "", fmt.Errorf("%s: only nodes are cordoned and drained", args[0])
		}
		return args[1], nil
	}
	return "", errors.New("name one node")
}

// nodeCommand is cordon or uncordon.
func (a *app) nodeCommand(verb string) *cobra.Command {
	short := "Mark a node unschedulable: new pods go elsewhere, its pods stay"
	done := "cordoned"
	if verb == "uncordon" {
		short, done = "Mark a node schedulable again", "uncordoned"
	}
	return &cobra.Command{
		Use:               verb + " NODE",
		Short:             short,
		ValidArgsFunction: a.completeNames("nodes"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, c, err := a.node(args)
			if err != nil {
				return err
			}
			if err := c.Post(cmd.Context(), nodes, "", name, verb, nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "node/%s %s\n", name, done)
			return nil
		},
	}
}

func (a *app) drainCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "drain NODE",
		Short: "Cordon a node, tell its pods to leave, and wait until it has none",
		Long: `drain cordons the node and asks the server to evict its pods (pods of
deployments come back elsewhere; claims move with their pods), then waits
until no pod is left on the node. --timeout bounds the wait (exit 1); the
drain itself goes on.`,
		ValidArgsFunction: a.completeNames("nodes"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, c, err := a.node(args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := c.Post(ctx, nodes, "", name, "drain", nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "node/%s cordoned\n", name)
			wctx, cancel := withTimeout(ctx, timeout)
			defer cancel()
			seen := map[string]bool{}
			err = zw.WaitUntil(wctx, 500*time.Millisecond, func() (bool, error) {
				left, _, err := c.List(wctx, pods, "", zw.ListOptions{FieldSelector: "spec.nodeName=" + name})
				if err != nil {
					return false, err
				}
				for _, p := range left {
					key := zw.NestedString(p, "metadata", "namespace") + "/" + zw.NestedString(p, "metadata", "name")
					if !seen[key] {
						seen[key] = true
						fmt.Fprintf(a.out, "evicting pod %s\n", key)
					}
				}
				return len(left) == 0, nil
			})
			if errors.Is(err, context.DeadlineExceeded) {
				return &exitError{code: 1, msg: fmt.Sprintf("error: node/%s still has pods after %s; the drain goes on", name, timeout)}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "node/%s drained\n", name)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait for the pods to leave (0: as long as it takes)")
	return cmd
}

// podLifecycleCommand is finalize or cancel.
func (a *app) podLifecycleCommand(verb string) *cobra.Command {
	var reason string
	short := "End a terminating pod's grace period now"
	if verb == "cancel" {
		short = "Abort a pod's provisioning and roll it back (the pod ends Failed, reason Cancelled)"
	}
	cmd := &cobra.Command{
		Use:               verb + " POD | pod/POD",
		Short:             short,
		ValidArgsFunction: a.completeNames("pods"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("name one pod")
			}
			name := args[0]
			if r, names, err := typeAndNames(args); err == nil && len(names) == 1 {
				if r.Name != "pods" {
					return fmt.Errorf("%s: only pods are %sed", r.Name, verb)
				}
				name = names[0]
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			var body any
			if verb == "cancel" && reason != "" {
				body = zw.Object{"reason": reason}
			}
			if err := c.Post(cmd.Context(), pods, a.namespace(), name, verb, body, nil); err != nil {
				return err
			}
			done := "finalized"
			if verb == "cancel" {
				done = "cancelled"
			}
			fmt.Fprintf(a.out, "pod/%s %s\n", name, done)
			return nil
		},
	}
	if verb == "cancel" {
		cmd.Flags().StringVar(&reason, "reason", "", "why, recorded on the pod")
	}
	return cmd
}

// node is the node the arguments name, and the client to reach it.
func (a *app) node(args []string) (string, *zw.Client, error) {
	name, err := nodeName(args)
	if err != nil {
		return "", nil, err
	}
	c, err := a.connect()
	return name, c, err
}
