package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	zw "github.com/zonewright/zonewright/internal/zwclient"
	"github.com/zonewright/zonewright/internal/zwprint"
)

var images, _ = zw.LookupResource("images")

func (a *app) imageCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Import, list and delete images"}
	list := &cobra.Command{
		Use:   "list",
		Short: "List images (zwctl get images)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.get(cmd, []string{"images"}, getOptions{output: cmd.Flag("output").Value.String()})
		},
	}
	list.Flags().StringP("output", "o", "", "output format: wide, json, yaml, name or jsonpath=TEMPLATE")

	del := &cobra.Command{
		Use:               "delete NAME...",
		Short:             "Delete images",
		ValidArgsFunction: a.completeNames("images"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("name the images to delete")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			for _, n := range args {
				if err := c.Delete(cmd.Context(), images, "", n, nil); err != nil {
					return err
				}
				fmt.Fprintf(a.out, "image %q deleted\n", n)
			}
			return nil
		},
	}
	cmd.AddCommand(a.imageImportCommand(), list, del)
	return cmd
}

func (a *app) imageImportCommand() *cobra.Command {
	var (
		spec    struct{ kind, source, sha256, compression string }
		size    int64
		noWait  bool
		timeout time.Duration
	)
	imp := &cobra.Command{
		Use:   "import NAME --source URL",
		Short: "Import an image and show its progress until it is Ready",
		Example: `  zwctl image import alpine --source https://example.org/alpine.tar.gz --sha256 <hex>
  zwctl image import base --kind zfs-stream --source file:///images/base.zfs`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errors.New("name the image: image import NAME --source URL")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			s := zw.Object{"kind": spec.kind}
			for k, v := range map[string]string{"source": spec.source, "sha256": spec.sha256, "compression": spec.compression} {
				if v != "" {
					s[k] = v
				}
			}
			if size > 0 {
				s["size"] = size
			}
			obj := zw.Object{"apiVersion": "v1", "kind": "Image", "metadata": zw.Object{"name": args[0]}, "spec": s}
			ctx := cmd.Context()
			if _, err := c.Create(ctx, images, "", obj); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "image/%s created\n", args[0])
			if noWait {
				return nil
			}
			ctx, cancel := withTimeout(ctx, timeout)
			defer cancel()
			return a.followImport(ctx, c, args[0])
		},
	}
	f := imp.Flags()
	f.StringVar(&spec.kind, "kind", "lx-tarball", "lx-tarball, zfs-stream, bhyve-disk or zone-template")
	f.StringVar(&spec.source, "source", "", "http(s):// or file:// URL of the image")
	f.StringVar(&spec.sha256, "sha256", "", "hex digest of the file at the source")
	f.StringVar(&spec.compression, "compression", "", "none, gzip, zstd or xz (default: detect)")
	f.Int64Var(&size, "size", 0, "the download's size in bytes, when the source does not say")
	f.BoolVar(&noWait, "no-wait", false, "return once the image is created")
	f.DurationVar(&timeout, "timeout", 0, "how long to follow the import (0: until it ends)")
	return imp
}

// followImport shows an import's progress from the image's status (bytes
// done of the total, and the rate) until it is Ready or Failed. On a
// terminal the bar redraws in place; elsewhere each change is a line.
func (a *app) followImport(ctx context.Context, c *zw.Client, name string) error {
	tty := isTerminal(a.out)
	start := a.now()
	last := ""
	var outcome error
	err := zw.WaitUntil(ctx, 200*time.Millisecond, func() (bool, error) {
		img, err := c.Get(ctx, images, "", name)
		if err != nil {
			return false, err
		}
		phase := zw.NestedString(img, "status", "phase")
		line := progressLine(zw.NestedInt(img, "status", "bytesDone"), zw.NestedInt(img, "status", "bytesTotal"), a.now().Sub(start), phase)
		if line != last {
			writeProgress(a.out, line, tty)
			last = line
		}
		switch phase {
		case "Ready":
			if tty {
				fmt.Fprintln(a.out)
			}
			fmt.Fprintf(a.out, "image/%s imported\n", name)
			return true, nil
		case "Failed":
			if tty {
				fmt.Fprintln(a.out)
			}
			outcome = fmt.Errorf("image/%s failed: %s: %s", name, zw.NestedString(img, "status", "reason"), zw.NestedString(img, "status", "message"))
			return true, nil
		}
		return false, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return &exitError{code: 1, msg: fmt.Sprintf("error: image/%s is still importing", name)}
	}
	if err != nil {
		return err
	}
	return outcome
}

func writeProgress(w io.Writer, line string, tty bool) {
	if tty {
		fmt.Fprintf(w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(w, line)
}

// progressLine is a bar of bytes done of total, and the mean rate:
// [##########----------]  20.0MiB/40.0MiB  4.0MiB/s  Importing
func progressLine(done, total int64, elapsed time.Duration, phase string) string {
	const width = 20
	bar := strings.Repeat("-", width)
	if total > 0 {
		n := int(min(done, total) * width / total)
		bar = strings.Repeat("#", n) + strings.Repeat("-", width-n)
	}
	sizes := zwprint.Bytes(done)
	if total > 0 {
		sizes += "/" + zwprint.Bytes(total)
	}
	rate := "-"
	if secs := elapsed.Seconds(); secs > 0 && done > 0 {
		rate = zwprint.Bytes(int64(float64(done)/secs)) + "/s"
	}
	if phase == "" {
		phase = "Pending"
	}
	return fmt.Sprintf("[%s]  %s  %s  %s", bar, sizes, rate, phase)
}
