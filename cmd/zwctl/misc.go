package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	zwversion "github.com/zonewright/zonewright/internal/version"
	zw "github.com/zonewright/zonewright/internal/zwclient"
	"github.com/zonewright/zonewright/internal/zwprint"
)

var tokens, _ = zw.LookupResource("tokens")

func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create and revoke API tokens"}
	var (
		role       string
		ttl        time.Duration
		namespaced bool
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Issue a token and print it (the only time it is shown)",
		Long: `token create issues a cluster-admin token, or a token of the namespace (-n)
with a namespace --role (view, edit, admin; --namespaced with no role
takes the server's default). It prints the token alone on standard output
and its id on standard error.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.connect()
			if err != nil {
				return err
			}
			body := zw.Object{}
			if role != "" {
				body["role"] = role
			}
			if ttl > 0 {
				body["ttlSeconds"] = int64(ttl / time.Second)
			}
			path := "/api/v1/tokens"
			if namespaced || (role != "" && role != "cluster-admin") {
				path = "/api/v1/namespaces/" + a.namespace() + "/tokens"
			}
			var issued struct {
				Token, ID, Role, Namespace string
				ExpiresAt                  time.Time
			}
			if err := c.Do(cmd.Context(), http.MethodPost, path, nil, body, &issued); err != nil {
				return err
			}
			fmt.Fprintln(a.out, issued.Token)
			fmt.Fprintf(a.errOut, "token %s (role %s%s) expires %s\n", issued.ID, issued.Role, inNS(issued.Namespace), issued.ExpiresAt.Format(time.RFC3339))
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "", "view, edit or admin: a token of the namespace (-n); cluster-admin (the default): of the cluster")
	create.Flags().DurationVar(&ttl, "ttl", 0, "lifetime (default: the server's)")
	create.Flags().BoolVar(&namespaced, "namespaced", false, "a token of the namespace (-n) instead of a cluster-admin one")

	revoke := &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke tokens by id",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("give the ids of the tokens to revoke (zwctl get tokens)")
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			for _, id := range args {
				if err := c.Delete(cmd.Context(), tokens, "", id, nil); err != nil {
					return err
				}
				fmt.Fprintf(a.out, "token/%s revoked\n", id)
			}
			return nil
		},
	}
	cmd.AddCommand(create, revoke)
	return cmd
}

func inNS(ns string) string {
	if ns == "" {
		return ""
	}
	return " in " + ns
}

func (a *app) versionCommand() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print zwctl's version and the server's",
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version
			if v == "" {
				v = zwversion.String()
			}
			fmt.Fprintf(a.out, "Client Version: %s\n", v)
			if clientOnly {
				return nil
			}
			c, err := a.connect()
			if err != nil {
				return err
			}
			var info zwversion.Info
			if err := c.Do(cmd.Context(), http.MethodGet, "/version", nil, nil, &info); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "Server Version: %s (%s, %s)\n", info.GitVersion, info.GoVersion, info.Platform)
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "the client's version only")
	return cmd
}

func (a *app) configCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show and switch the config file's contexts"}
	path := func() string { return zw.ConfigPath(a.configPath, a.getenv) }
	view := &cobra.Command{
		Use:   "view",
		Short: "Print the config file, tokens hidden",
		RunE: func(*cobra.Command, []string) error {
			cfg, err := zw.LoadConfig(path())
			if err != nil {
				return err
			}
			for i := range cfg.Users {
				if cfg.Users[i].Token != "" {
					cfg.Users[i].Token = "REDACTED"
				}
			}
			for i := range cfg.Clusters {
				if cfg.Clusters[i].CertificateAuthorityData != "" {
					cfg.Clusters[i].CertificateAuthorityData = "DATA+OMITTED"
				}
			}
			b, err := yaml.Marshal(cfg)
			if err != nil {
				return err
			}
			_, err = a.out.Write(b)
			return err
		},
	}
	getContexts := &cobra.Command{
		Use:   "get-contexts",
		Short: "List the contexts; * marks the current one",
		RunE: func(*cobra.Command, []string) error {
			cfg, err := zw.LoadConfig(path())
			if err != nil {
				return err
			}
			rows := [][]string{{"CURRENT", "NAME", "CLUSTER", "USER", "NAMESPACE"}}
			for _, c := range cfg.Contexts {
				cur := ""
				if c.Name == cfg.CurrentContext {
					cur = "*"
				}
				rows = append(rows, []string{cur, c.Name, c.Cluster, c.User, c.Namespace})
			}
			return zwprint.NewTable(a.out).Write(rows)
		},
	}
	useContext := &cobra.Command{
		Use:   "use-context NAME",
		Short: "Make a context the current one",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			p := path()
			cfg, err := zw.LoadConfig(p)
			if err != nil {
				return err
			}
			if _, ok := cfg.Context(args[0]); !ok {
				return fmt.Errorf("no context %q in %s", args[0], p)
			}
			cfg.CurrentContext = args[0]
			if err := cfg.Save(p); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "Switched to context %q.\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(view, getContexts, useContext)
	return cmd
}

func (a *app) completionCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh",
		Short: "Print a shell completion script (commands, flags, resource types and names)",
		Example: `  source <(zwctl completion bash)
  zwctl completion zsh > "${fpath[1]}/_zwctl"`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"bash", "zsh"},
		RunE: func(_ *cobra.Command, args []string) error {
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(a.out, true)
			case "zsh":
				return root.GenZshCompletion(a.out)
			}
			return fmt.Errorf("completion for %q: want bash or zsh", args[0])
		},
	}
}
