package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/zonewright/zonewright/internal/execstream"
	zw "github.com/zonewright/zonewright/internal/zwclient"
)

// podName reads POD or pod/POD.
func podName(arg string) (string, error) {
	if t, n, ok := strings.Cut(arg, "/"); ok {
		if t != "pod" && t != "pods" && t != "po" || n == "" {
			return "", fmt.Errorf("%q: want a pod, as NAME or pod/NAME", arg)
		}
		return n, nil
	}
	return arg, nil
}

// podPath is the pod's path, or its subresource's when sub is not "".
func podPath(ns, name, sub string) string {
	p := "/api/v1/namespaces/" + url.PathEscape(ns) + "/pods/" + url.PathEscape(name)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

func (a *app) logsCommand() *cobra.Command {
	var container string
	var follow, previous, timestamps, smfLines bool
	var tail int
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a container's output (what its SMF service wrote)",
		Example: `  zwctl logs web
  zwctl logs -f --tail 20 web
  zwctl logs --previous web     # the run before the last restart`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: a.completeNames("pods"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := podName(args[0])
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			q := url.Values{}
			if container != "" {
				q.Set("container", container)
			}
			for k, v := range map[string]bool{"follow": follow, "previous": previous, "timestamps": timestamps, "smfLines": smfLines} {
				if v {
					q.Set(k, "true")
				}
			}
			if tail >= 0 {
				q.Set("tailLines", strconv.Itoa(tail))
			}
			if since > 0 {
				q.Set("sinceSeconds", strconv.Itoa(int((since+time.Second-1)/time.Second)))
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			body, err := c.Stream(ctx, "GET", podPath(a.namespace(), name, "log"), q, nil)
			if err != nil {
				return err
			}
			defer body.Close()
			if _, err := io.Copy(a.out, body); err != nil && ctx.Err() == nil {
				return fmt.Errorf("the log stream broke: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&container, "container", "c", "", "the container (optional when the pod has one)")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing what the container writes")
	f.BoolVarP(&previous, "previous", "p", false, "the container's previous run, before its last restart")
	f.IntVar(&tail, "tail", -1, "only the last N lines (-1: all)")
	f.DurationVar(&since, "since", 0, "only lines newer than this, e.g. 5m")
	f.BoolVar(&timestamps, "timestamps", false, "prefix each line with its time")
	f.BoolVar(&smfLines, "smf-lines", false, "include svc.startd's own [ ... ] lines")
	return cmd
}

func (a *app) execCommand() *cobra.Command {
	var container string
	var stdin, tty bool
	cmd := &cobra.Command{
		Use:   "exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]",
		Short: "Run a command in a pod's zone; zwctl exits with its exit code",
		Example: `  zwctl exec web -- uname -a
  zwctl exec web -- echo 'a b;c'      # each argument reaches the command as given
  zwctl exec -it web -- sh`,
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: a.completeNames("pods"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return errors.New("say the pod, then -- and the command: zwctl exec POD -- COMMAND [ARG...]")
			}
			name, err := podName(args[0])
			if err != nil {
				return err
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			opts := execstream.Options{Command: args[1:], Container: container, Stdin: stdin, Stdout: true, Stderr: !tty, TTY: tty}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM)
			defer stop()
			sess, err := execstream.Dial(ctx, c.HTTP1Client(), c.URL(podPath(a.namespace(), name, "exec"), opts.Values()), nil)
			if err != nil {
				return refusal(err)
			}
			var in io.Reader
			if stdin {
				in = a.in
			}
			var resize chan execstream.Size
			if tty {
				restore, sizes := a.terminal(ctx)
				defer restore()
				resize = sizes
			}
			code, err := sess.Run(ctx, in, a.out, a.errOut, resize)
			if err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&container, "container", "c", "", "the container (optional when the pod has one)")
	f.BoolVarP(&stdin, "stdin", "i", false, "pass zwctl's standard input to the command")
	f.BoolVarP(&tty, "tty", "t", false, "run the command on a terminal (its stderr then comes on stdout)")
	return cmd
}

// refusal is the API error a refused upgrade (exec, port-forward) carries,
// printed as any other answer of the server; other errors as they are.
func refusal(err error) error {
	var refused *execstream.RefusedError
	if errors.As(err, &refused) {
		return &zw.APIError{Code: refused.Code, Reason: strings.ReplaceAll(http.StatusText(refused.Code), " ", ""), Message: refused.Message}
	}
	return err
}

// terminal puts zwctl's terminal in raw mode, when its input is one, and
// yields its size now and at every change; restore puts it back.
func (a *app) terminal(ctx context.Context) (restore func(), sizes chan execstream.Size) {
	sizes = make(chan execstream.Size, 1)
	f, ok := a.in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func() {}, sizes
	}
	fd := int(f.Fd())
	send := func() {
		if w, h, err := term.GetSize(fd); err == nil {
			select {
			case sizes <- execstream.Size{Width: uint16(w), Height: uint16(h)}:
			default: // the previous size is not sent yet: it is stale anyway
			}
		}
	}
	send()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-winch:
				send()
			}
		}
	}()
	state, err := term.MakeRaw(fd)
	if err != nil {
		signal.Stop(winch)
		return func() {}, sizes
	}
	return func() {
		signal.Stop(winch)
		_ = term.Restore(fd, state)
	}, sizes
}
