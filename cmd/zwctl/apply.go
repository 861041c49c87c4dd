package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	zw "github.com/zonewright/zonewright/internal/zwclient"
	"github.com/zonewright/zonewright/internal/zwprint"
)

// manifest is one object read from a file, with where it came from.
type manifest struct {
	source string
	object zw.Object
}

var documentSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// readManifests reads the objects of files, directories (their .yaml,
// .yml and .json files) or "-" (standard input): several YAML documents
// per file, and List objects unpacked.
func readManifests(paths []string, stdin io.Reader) ([]manifest, error) {
	var out []manifest
	for _, p := range paths {
		var files []string
		if p == "-" {
			files = []string{"-"}
		} else if fi, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("the path %q does not exist", p)
		} else if fi.IsDir() {
			entries, err := os.ReadDir(p)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
					files = append(files, filepath.Join(p, e.Name()))
				}
			}
		} else {
			files = []string{p}
		}
		for _, f := range files {
			var data []byte
			var err error
			if f == "-" {
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				return nil, err
			}
			objs, err := decodeManifests(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			for _, o := range objs {
				out = append(out, manifest{source: f, object: o})
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no objects passed (give -f FILE, DIR or -)")
	}
	return out, nil
}

func decodeManifests(data []byte) ([]zw.Object, error) {
	var out []zw.Object
	for i, doc := range documentSeparator.Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj zw.Object
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if obj == nil {
			continue
		}
		if obj["kind"] == "List" {
			for _, item := range zw.NestedSlice(obj, "items") {
				if m, ok := item.(map[string]any); ok {
					out = append(out, m)
				}
			}
			continue
		}
		if zw.NestedString(obj, "kind") == "" {
			return nil, fmt.Errorf("document %d: no kind", i+1)
		}
		if zw.NestedString(obj, "metadata", "name") == "" {
			return nil, fmt.Errorf("document %d (%s): no metadata.name", i+1, obj["kind"])
		}
		out = append(out, obj)
	}
	return out, nil
}

// namespacesFirst orders manifests so the namespaces others live in are
// made first.
func namespacesFirst(ms []manifest) {
	sort.SliceStable(ms, func(i, j int) bool {
		return ms[i].object["kind"] == "Namespace" && ms[j].object["kind"] != "Namespace"
	})
}

func (a *app) applyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create objects, or update them to match the files; unchanged ones are not written",
		Long: `apply creates each object of the files that does not exist and updates those
that differ. An object whose fields all equal the server's (fields the file
leaves out keep the server's values; status and server metadata are ignored)
is not written: apply says "unchanged". Output of "get -o yaml" applies as is.`,
	}
	return a.eachManifest(cmd, a.applyOne)
}

// eachManifest gives cmd its -f flag and runs do on every object of the
// files, namespaces first; a failure is one line on stderr, and any makes
// the exit code 1 after the rest were tried.
func (a *app) eachManifest(cmd *cobra.Command, do func(ctx context.Context, c *zw.Client, obj zw.Object) error) *cobra.Command {
	var files []string
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ms, err := readManifests(files, a.in)
		if err != nil {
			return err
		}
		c, err := a.connect()
		if err != nil {
			return err
		}
		namespacesFirst(ms)
		var failed bool
		for _, m := range ms {
			if err := do(cmd.Context(), c, m.object); err != nil {
				fmt.Fprintln(a.errOut, errorLine(err))
				failed = true
			}
		}
		if failed {
			return &exitError{code: 1}
		}
		return nil
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "files, directories or - (standard input)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// errorLine is err as zwctl shows it.
func errorLine(err error) string {
	var apiErr *zw.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Error()
	}
	return "error: " + err.Error()
}

func (a *app) applyOne(ctx context.Context, c *zw.Client, obj zw.Object) error {
	r, err := zw.ResourceForKind(zw.NestedString(obj, "kind"))
	if err != nil {
		return err
	}
	ns, name := a.namespaceOf(r, obj), zw.NestedString(obj, "metadata", "name")
	want := zw.Desired(obj)
	have, err := c.Get(ctx, r, ns, name)
	if zw.IsNotFound(err) {
		created, err := c.Create(ctx, r, ns, want)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.out, "%s created\n", zwprint.NameOf(r, created))
		return nil
	}
	if err != nil {
		return err
	}
	if zw.Unchanged(want, have) {
		fmt.Fprintf(a.out, "%s unchanged\n", zwprint.NameOf(r, have))
		return nil
	}
	if !r.Updatable {
		return fmt.Errorf("%s: %s cannot be changed; delete it and create it again", zwprint.NameOf(r, have), r.Name)
	}
	// The server's version goes with the change: a write in between is a
	// conflict, not lost.
	updated, err := c.Update(ctx, r, ns, name, zw.Merged(have, want))
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "%s configured\n", zwprint.NameOf(r, updated))
	return nil
}

func (a *app) createCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create -f FILE|DIR|-",
		Short: "Create the objects of files (an existing one is an error)",
	}
	return a.eachManifest(cmd, func(ctx context.Context, c *zw.Client, obj zw.Object) error {
		r, err := zw.ResourceForKind(zw.NestedString(obj, "kind"))
		if err != nil {
			return err
		}
		created, err := c.Create(ctx, r, a.namespaceOf(r, obj), zw.Desired(obj))
		if err != nil {
			return err
		}
		fmt.Fprintf(a.out, "%s created\n", zwprint.NameOf(r, created))
		return nil
	})
}

func (a *app) editCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:               "edit TYPE NAME | TYPE/NAME",
		Short:             "Edit an object in $EDITOR and apply the change",
		Long:              "edit opens the object as YAML in $ZWCTL_EDITOR, else $EDITOR, else vi. A change the server refuses is shown and the edited file kept.",
		ValidArgsFunction: a.completeNames(""),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, names, err := typeAndNames(args)
			if err != nil {
				return err
			}
			if len(names) != 1 {
				return errors.New("edit takes one object")
			}
			if !r.Updatable {
				return fmt.Errorf("%s cannot be changed; delete and create them instead", r.Name)
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			obj, err := c.Get(ctx, r, a.namespace(), names[0])
			if err != nil {
				return err
			}
			before, err := yaml.Marshal(obj)
			if err != nil {
				return err
			}
			path, err := writeEditFile(before)
			if err != nil {
				return err
			}
			if err := a.runEditor(ctx, path); err != nil {
				return err
			}
			return a.applyEdit(ctx, c, r, names[0], obj, before, path)
		},
	}
	return cmd
}

// applyEdit writes the edit of obj (before, as YAML) in the file at path,
// unless it changed nothing; the file is kept when the edit is refused.
func (a *app) applyEdit(ctx context.Context, c *zw.Client, r zw.Resource, name string, obj zw.Object, before []byte, path string) error {
	after, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	keep := func(err error) error {
		fmt.Fprintln(a.errOut, errorLine(err))
		return &exitError{code: 1, msg: "error: the edit was not applied; your changes are kept in " + path}
	}
	var edited zw.Object
	if err := yaml.Unmarshal(after, &edited); err != nil {
		return keep(fmt.Errorf("the edited file is not valid YAML: %w", err))
	}
	if reflect.DeepEqual(edited, obj) || bytes.Equal(bytes.TrimPrefix(after, []byte(editHeader)), before) {
		os.Remove(path)
		fmt.Fprintln(a.out, "Edit cancelled, no changes made.")
		return nil
	}
	if zw.NestedString(edited, "metadata", "name") != name || zw.NestedString(edited, "kind") != r.Kind {
		return keep(errors.New("the kind and metadata.name of an object cannot be edited"))
	}
	updated, err := a.updateEdited(ctx, c, r, name, obj, edited)
	if err != nil {
		return keep(err)
	}
	os.Remove(path)
	fmt.Fprintf(a.out, "%s edited\n", zwprint.NameOf(r, updated))
	return nil
}

// editHeader starts the file edit opens.
const editHeader = "# Edit the object below; save and quit to apply it, or leave it unchanged to cancel.\n"

// writeEditFile writes the object to edit, after editHeader, to a new
// temporary file, and returns its path.
func writeEditFile(obj []byte) (string, error) {
	f, err := os.CreateTemp("", "zwctl-edit-*.yaml")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(editHeader + string(obj))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return f.Name(), err
}

// updateEdited writes edited, the edit of obj, which is r's name.
func (a *app) updateEdited(ctx context.Context, c *zw.Client, r zw.Resource, name string, obj, edited zw.Object) (zw.Object, error) {
	// The edit replaces the version it started from, or one that
	// differs from it only in status (a pod's status changes on
	// its own); a change of its spec or metadata meanwhile fails it.
	want := zw.Desired(edited)
	base := obj
	var updated zw.Object
	var err error
	for range 5 {
		want["metadata"].(map[string]any)["resourceVersion"] = zw.NestedString(base, "metadata", "resourceVersion")
		if updated, err = c.Update(ctx, r, a.namespace(), name, want); !isConflict(err) {
			break
		}
		current, getErr := c.Get(ctx, r, a.namespace(), name)
		if getErr != nil || !reflect.DeepEqual(zw.Desired(current), zw.Desired(obj)) {
			break
		}
		base = current
	}
	return updated, err
}

// runEditor runs the user's editor on path, through the shell so an
// editor with arguments ("code --wait") works.
func (a *app) runEditor(ctx context.Context, path string) error {
	editor := a.getenv("ZWCTL_EDITOR")
	if editor == "" {
		editor = a.getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", editor+` "$1"`, "sh", path)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, a.out, a.errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("editor %q: %w", editor, err)
	}
	return nil
}

func isConflict(err error) bool {
	var apiErr *zw.APIError
	return errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict
}
