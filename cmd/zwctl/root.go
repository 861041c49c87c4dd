package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	zw "github.com/zonewright/zonewright/internal/zwclient"
)

// version is the client's version when set at build time with
// -ldflags "-X main.version=…"; empty: its build information's.
var version string

// streams are the command's standard input, output and error.
type streams struct {
	in          io.Reader
	out, errOut io.Writer
}

// app is one run of zwctl: its streams, flags and (once asked for) client.
type app struct {
	streams
	getenv func(string) string
	now    func() time.Time

	configPath string
	overrides  zw.Overrides
	allNS      bool

	client   *zw.Client
	settings zw.Settings
}

// exitError ends zwctl with a code and (if not empty) a message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// run runs zwctl with args and returns its exit code.
func run(ctx context.Context, args []string, s streams, getenv func(string) string) int {
	a := &app{streams: s, getenv: getenv, now: time.Now}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.errOut)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(s.errOut, ee.msg)
		}
		return ee.code
	}
	var apiErr *zw.APIError
	if errors.As(err, &apiErr) {
		fmt.Fprintln(s.errOut, apiErr.Error())
	} else {
		fmt.Fprintln(s.errOut, "error: "+strings.TrimPrefix(err.Error(), "error: "))
	}
	return 1
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "zwctl",
		Short:         "zwctl controls a zonewright cluster",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	f := root.PersistentFlags()
	f.StringVar(&a.configPath, "zwconfig", "", "config file (default $"+zw.EnvConfig+", else "+zw.DefaultPath()+")")
	f.StringVar(&a.overrides.Context, "context", "", "the config file's context to use")
	f.StringVar(&a.overrides.Server, "server", "", "the API server's URL")
	f.StringVar(&a.overrides.Token, "token", "", "bearer token")
	f.StringVar(&a.overrides.CertificateAuthority, "certificate-authority", "", "CA file the server's certificate chains to")
	f.StringVarP(&a.overrides.Namespace, "namespace", "n", "", "namespace of the request")
	_ = root.RegisterFlagCompletionFunc("namespace", a.completeNames("namespaces"))
	_ = root.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		cfg, err := zw.LoadConfig(zw.ConfigPath(a.configPath, a.getenv))
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		for _, c := range cfg.Contexts {
			names = append(names, c.Name)
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	root.AddCommand(a.getCommand(), a.describeCommand(), a.applyCommand(), a.createCommand(), a.editCommand(),
		a.deleteCommand(), a.waitCommand(), a.scaleCommand(), a.rolloutCommand(),
		a.nodeCommand("cordon"), a.nodeCommand("uncordon"), a.drainCommand(),
		a.imageCommand(), a.podLifecycleCommand("finalize"), a.podLifecycleCommand("cancel"),
		a.logsCommand(), a.execCommand(), a.portForwardCommand(),
		a.tokenCommand(), a.versionCommand(), a.configCommand(), a.completionCommand(root))
	return root
}

// connect resolves the settings and makes the client, once.
func (a *app) connect() (*zw.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	path := zw.ConfigPath(a.configPath, a.getenv)
	cfg, err := zw.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	// $ZW_API_URL, $ZW_TOKEN and $ZW_CACERT (what a dev stack's env file
	// exports) stand in for flags not given.
	o := a.overrides
	for _, e := range []struct {
		flag *string
		env  string
	}{{&o.Server, "ZW_API_URL"}, {&o.Token, "ZW_TOKEN"}, {&o.CertificateAuthority, "ZW_CACERT"}} {
		if *e.flag == "" {
			*e.flag = a.getenv(e.env)
		}
	}
	if a.settings, err = cfg.Resolve(o); err != nil {
		if _, statErr := os.Stat(path); path != "" && statErr != nil {
			return nil, fmt.Errorf("%w (there is no config file %s: %v)", err, path, errors.Unwrap(statErr))
		}
		return nil, fmt.Errorf("%w (config file %s)", err, path)
	}
	if a.client, err = zw.New(a.settings); err != nil {
		return nil, err
	}
	return a.client, nil
}

// namespace is the request's namespace: -n, else the context's, else
// default. Call it after connect.
func (a *app) namespace() string { return a.settings.Namespace }

// namespaceOf is where obj goes: its own namespace, else the request's.
func (a *app) namespaceOf(r zw.Resource, obj zw.Object) string {
	if !r.Namespaced {
		return ""
	}
	if ns := zw.NestedString(obj, "metadata", "namespace"); ns != "" {
		return ns
	}
	return a.namespace()
}

// typeAndNames reads `TYPE NAME...` or `TYPE/NAME...` arguments.
func typeAndNames(args []string) (zw.Resource, []string, error) {
	if len(args) == 0 {
		return zw.Resource{}, nil, errors.New("you must say a resource type: " + strings.Join(resourceTypeList(), ", "))
	}
	if strings.Contains(args[0], "/") {
		var r zw.Resource
		var names []string
		for _, arg := range args {
			t, n, ok := strings.Cut(arg, "/")
			if !ok || n == "" {
				return r, nil, fmt.Errorf("%q: mix TYPE/NAME with TYPE/NAME only", arg)
			}
			rt, err := zw.LookupResource(t)
			if err != nil {
				return r, nil, err
			}
			if r.Name != "" && rt.Name != r.Name {
				return r, nil, fmt.Errorf("%q: give one resource type at a time", arg)
			}
			r = rt
			names = append(names, n)
		}
		return r, names, nil
	}
	r, err := zw.LookupResource(args[0])
	return r, args[1:], err
}

func resourceTypeList() []string {
	var out []string
	for _, r := range zw.Resources {
		out = append(out, r.Name)
	}
	return out
}

// completeNames completes resource types, then names of that type.
func (a *app) completeNames(fixed string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		typ := fixed
		if typ == "" {
			if len(args) == 0 {
				return zw.ResourceNames(), cobra.ShellCompDirectiveNoFileComp
			}
			typ = args[0]
		}
		r, err := zw.LookupResource(typ)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := a.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
		defer cancel()
		items, _, err := c.List(ctx, r, a.namespace(), zw.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, o := range items {
			names = append(names, zw.NestedString(o, "metadata", "name"))
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// withTimeout bounds ctx when d is positive.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// isTerminal says whether w is a terminal (progress bars redraw in place).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
