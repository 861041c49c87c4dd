package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	zw "github.com/zonewright/zonewright/internal/zwclient"
	"github.com/zonewright/zonewright/internal/zwprint"
)

var deployments, _ = zw.LookupResource("deployments")

// deploymentName reads `deploy/NAME`, `deployment NAME` or `NAME`.
func deploymentName(args []string) (string, error) {
	if len(args) == 1 {
		if r, names, err := typeAndNames(args); err == nil && len(names) == 1 {
			if r.Name != "deployments" {
				return "", fmt.Errorf("%s: only deployments have this", r.Name)
			}
			return names[0], nil
		}
		return args[0], nil
	}
	if len(args) == 2 {
		r, err := zw.LookupResource(args[0])
		if err != nil {
			return "", err
		}
		if r.Name != "deployments" {
			return "", fmt.Errorf("%s: only deployments have this", r.Name)
		}
		return args[1], nil
	}
	return "", errors.New("name one deployment: deploy/NAME")
}

func (a *app) scaleCommand() *cobra.Command {
	var replicas int32
	cmd := &cobra.Command{
		Use:   "scale deploy/NAME --replicas=N",
		Short: "Set a deployment's number of replicas",
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := deploymentName(args)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("replicas") || replicas < 0 {
				return errors.New("--replicas=N (N >= 0) is required")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			body := zw.Object{"apiVersion": "autoscaling/v1", "kind": "Scale",
				"metadata": zw.Object{"name": name, "namespace": a.namespace()}, "spec": zw.Object{"replicas": replicas}}
			if err := c.Do(cmd.Context(), http.MethodPut, deployments.ObjectPath(a.namespace(), name)+"/scale", nil, body, nil); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "deployment.apps/%s scaled\n", name)
			return nil
		},
	}
	cmd.Flags().Int32Var(&replicas, "replicas", 0, "the number of replicas")
	return cmd
}

func (a *app) rolloutCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "rollout", Short: "Manage a deployment's rollout: status, history, undo, pause, resume, restart"}
	var toRevision int64
	undo := &cobra.Command{
		Use:   "undo deploy/NAME",
		Short: "Roll back to the previous revision, or to --to-revision",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.deploymentAction(cmd, args, "rollback", zw.Object{"revision": toRevision}, "rolled back")
		},
	}
	undo.Flags().Int64Var(&toRevision, "to-revision", 0, "the revision to go back to (0: the previous one)")

	action := func(use, sub, done, short string) *cobra.Command {
		return &cobra.Command{Use: use + " deploy/NAME", Short: short, RunE: func(cmd *cobra.Command, args []string) error {
			return a.deploymentAction(cmd, args, sub, nil, done)
		}}
	}
	cmd.AddCommand(a.rolloutStatusCommand(), a.rolloutHistoryCommand(), undo,
		action("pause", "pause", "paused", "Stop rolling out changes of the template"),
		action("resume", "resume", "resumed", "Roll out changes again"),
		action("restart", "restart", "restarted", "Replace every pod, one batch at a time"))
	return cmd
}

func (a *app) rolloutStatusCommand() *cobra.Command {
	var timeout time.Duration
	status := &cobra.Command{
		Use:   "status deploy/NAME",
		Short: "Follow a rollout until it completes (exit 0), or exceeds its progress deadline or is rolled back by autoRevert (exit 1)",
		RunE: func(cmd *cobra.Command, args []string) error {
			name, c, err := a.deployment(args)
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			err = a.followRollout(ctx, c, name)
			if errors.Is(err, context.DeadlineExceeded) {
				return &exitError{code: 1, msg: "error: timed out waiting for the rollout of deployment " + strconv.Quote(name)}
			}
			return err
		},
	}
	status.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait (0: until the deployment's own progress deadline decides)")
	return status
}

// followRollout prints the rollout's status whenever it changes until it
// completes, fails, or autoRevert rolls it back.
func (a *app) followRollout(ctx context.Context, c *zw.Client, name string) error {
	last := ""
	// The revision whose rollout is watched: when another takes
	// its place, it was either a new template (followed, as
	// kubectl follows it) or autoRevert undoing it (a failure,
	// though the Progressing condition may already say the
	// reverted revision is available).
	watched, since := int64(-1), time.Now().Add(-2*time.Second)
	return zw.WaitUntil(ctx, 250*time.Millisecond, func() (bool, error) {
		d, err := c.Get(ctx, deployments, a.namespace(), name)
		if err != nil {
			return false, err
		}
		if rev := zw.NestedInt(d, "status", "revision"); zw.NestedInt(d, "metadata", "generation") <= zw.NestedInt(d, "status", "observedGeneration") && rev != watched {
			if watched >= 0 {
				if why, err := revertedSince(ctx, c, d, since); err != nil || why != "" {
					if err == nil {
						msg := fmt.Sprintf("deployment %q rolled back: %s", name, why)
						fmt.Fprintln(a.out, msg)
						err = &exitError{code: 1, msg: "error: " + msg}
					}
					return false, err
				}
			}
			watched = rev
		}
		msg, done, err := rolloutStatus(d)
		if msg != last {
			fmt.Fprintln(a.out, msg)
			last = msg
		}
		return done, err
	})
}

func (a *app) rolloutHistoryCommand() *cobra.Command {
	var revision int64
	history := &cobra.Command{
		Use:   "history deploy/NAME",
		Short: "List a deployment's revisions, or show one (--revision)",
		RunE: func(cmd *cobra.Command, args []string) error {
			name, c, err := a.deployment(args)
			if err != nil {
				return err
			}
			revs, err := a.revisionsOf(cmd.Context(), c, name)
			if err != nil {
				return err
			}
			if revision > 0 {
				return a.printRevision(name, revs, revision)
			}
			fmt.Fprintf(a.out, "deployment.apps/%s\n", name)
			rows := [][]string{{"REVISION", "IMAGES", "CHANGE-CAUSE"}}
			for _, r := range revs {
				_, images := containerImages(zw.NestedSlice(r, "data", "spec", "containers"))
				cause := zw.NestedString(r, "metadata", "annotations", "kubernetes.io/change-cause")
				rows = append(rows, []string{zw.NestedString(r, "revision"), images, orNone(cause)})
			}
			return zwprint.NewTable(a.out).Write(rows)
		},
	}
	history.Flags().Int64Var(&revision, "revision", 0, "show this revision's pod template")
	return history
}

// printRevision prints the pod template of revision, one of revs.
func (a *app) printRevision(name string, revs []zw.Object, revision int64) error {
	for _, r := range revs {
		if zw.NestedInt(r, "revision") == revision {
			b, err := yaml.Marshal(zw.Nested(r, "data"))
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "deployment.apps/%s with revision #%d\nPod Template:\n", name, revision)
			a.out.Write(indent(b))
			return nil
		}
	}
	return fmt.Errorf("deployment %q has no revision %d", name, revision)
}

func (a *app) deploymentAction(cmd *cobra.Command, args []string, sub string, body any, done string) error {
	name, c, err := a.deployment(args)
	if err != nil {
		return err
	}
	if err := c.Post(cmd.Context(), deployments, a.namespace(), name, sub, body, nil); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "deployment.apps/%s %s\n", name, done)
	return nil
}

// revisionsOf lists a deployment's controller revisions, oldest first.
func (a *app) revisionsOf(ctx context.Context, c *zw.Client, name string) ([]zw.Object, error) {
	d, err := c.Get(ctx, deployments, a.namespace(), name)
	if err != nil {
		return nil, err
	}
	crs, _ := zw.LookupResource("controllerrevisions")
	all, _, err := c.List(ctx, crs, a.namespace(), zw.ListOptions{})
	if err != nil {
		return nil, err
	}
	uid := zw.NestedString(d, "metadata", "uid")
	var out []zw.Object
	for _, r := range all {
		for _, ref := range zw.NestedSlice(r, "metadata", "ownerReferences") {
			if zw.NestedString(ref, "uid") == uid {
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return zw.NestedInt(out[i], "revision") < zw.NestedInt(out[j], "revision") })
	return out, nil
}

// revertedSince is the message of the newest autoRevert of d since the
// time given ("" if none), from its events: the condition that says so
// lasts only until the reverted revision is available again.
func revertedSince(ctx context.Context, c *zw.Client, d zw.Object, since time.Time) (string, error) {
	events, _ := zw.LookupResource("events")
	evs, _, err := c.List(ctx, events, zw.NestedString(d, "metadata", "namespace"), zw.ListOptions{
		FieldSelector: "involvedObject.uid=" + zw.NestedString(d, "metadata", "uid") + ",reason=DeploymentRolledBack"})
	if err != nil {
		return "", err
	}
	why, newest := "", since
	for _, e := range evs {
		if t, err := time.Parse(time.RFC3339, zw.NestedString(e, "lastTimestamp")); err == nil && t.After(newest) {
			why, newest = zw.NestedString(e, "message"), t
		}
	}
	return why, nil
}

// rolloutStatus is kubectl's reading of a deployment: what to say, whether
// the rollout is complete, and an error when it has failed.
func rolloutStatus(d zw.Object) (string, bool, error) {
	name := zw.NestedString(d, "metadata", "name")
	if zw.NestedInt(d, "metadata", "generation") > zw.NestedInt(d, "status", "observedGeneration") {
		return "Waiting for deployment spec update to be observed...", false, nil
	}
	for _, c := range zw.NestedSlice(d, "status", "conditions") {
		if zw.NestedString(c, "type") != "Progressing" {
			continue
		}
		switch zw.NestedString(c, "reason") {
		case "ProgressDeadlineExceeded":
			msg := fmt.Sprintf("deployment %q exceeded its progress deadline", name)
			return msg, false, &exitError{code: 1, msg: "error: " + msg}
		case "DeploymentRolledBack":
			// autoRevert undid the rollout: it did not complete.
			msg := fmt.Sprintf("deployment %q rolled back: %s", name, zw.NestedString(c, "message"))
			return msg, false, &exitError{code: 1, msg: "error: " + msg}
		}
	}
	want := int64(1)
	if zw.Nested(d, "spec", "replicas") != nil {
		want = zw.NestedInt(d, "spec", "replicas")
	}
	updated, replicas, available := zw.NestedInt(d, "status", "updatedReplicas"), zw.NestedInt(d, "status", "replicas"), zw.NestedInt(d, "status", "availableReplicas")
	switch {
	case zw.Nested(d, "spec", "paused") == true:
		return fmt.Sprintf("deployment %q is paused; resume it to continue its rollout", name), false, &exitError{code: 1}
	case updated < want:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d out of %d new replicas have been updated...", name, updated, want), false, nil
	case replicas > updated:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d old replicas are pending termination...", name, replicas-updated), false, nil
	case available < updated:
		return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d of %d updated replicas are available...", name, available, updated), false, nil
	}
	return fmt.Sprintf("deployment %q successfully rolled out", name), true, nil
}

func containerImages(cs []any) (names, images string) {
	var n, i []string
	for _, c := range cs {
		n = append(n, zw.NestedString(c, "name"))
		i = append(i, zw.NestedString(c, "image"))
	}
	return join(n), join(i)
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return orNone(out)
}

func indent(b []byte) []byte {
	var out []byte
	out = append(out, "  "...)
	for i, c := range b {
		out = append(out, c)
		if c == '\n' && i < len(b)-1 {
			out = append(out, "  "...)
		}
	}
	return out
}

// deployment is the deployment the arguments name, and the client to reach it.
func (a *app) deployment(args []string) (string, *zw.Client, error) {
	name, err := deploymentName(args)
	if err != nil {
		return "", nil, err
	}
	c, err := a.connect()
	return name, c, err
}
