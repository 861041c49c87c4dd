package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/auth"
	"github.com/zonewright/zonewright/internal/model"
)

// token is the operator's way to tokens, straight through the database
// (like migrate), so it works before any token exists:
//
//	zonewright token create [--namespace NS --role view|edit|admin] [--ttl 24h]
//	zonewright token revoke ID
func token(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: zonewright token create|revoke [flags]")
	}
	switch args[0] {
	case "create":
		fs := flag.NewFlagSet("token create", flag.ExitOnError)
		dbURL := databaseURLFlag(fs)
		ns := fs.String("namespace", "", "the token's namespace; empty: a cluster-admin token")
		role := fs.String("role", "", "view, edit or admin, with --namespace")
		ttl := fs.Duration("ttl", api.DefaultTokenTTL, "how long the token is valid")
		_ = fs.Parse(args[1:])
		r := auth.Role(*role)
		switch {
		case *ns == "" && r != "":
			return fmt.Errorf("--role is for namespace tokens (with --namespace); without, the token is cluster-admin")
		case *ns == "":
			r = auth.RoleClusterAdmin
		case !slices.Contains(auth.NamespaceRoles, r):
			return fmt.Errorf("--role %q: want view, edit or admin", *role)
		}
		return issueToken(ctx, *dbURL, r, *ns, *ttl)
	case "revoke":
		fs := flag.NewFlagSet("token revoke", flag.ExitOnError)
		dbURL := databaseURLFlag(fs)
		_ = fs.Parse(args[1:])
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: zonewright token revoke [--database-url URL] ID")
		}
		return withTokens(ctx, *dbURL, func(t *auth.Tokens) error {
			if err := t.Revoke(ctx, fs.Arg(0), ""); err != nil {
				return err
			}
			fmt.Printf("token %s revoked\n", fs.Arg(0))
			return nil
		})
	}
	return fmt.Errorf("unknown token action %q: want create or revoke", args[0])
}

// node is the operator's node commands: `zonewright node join-token create [--node NAME] [--ttl 1h]`.
func node(ctx context.Context, args []string) error {
	if len(args) < 2 || args[0] != "join-token" || args[1] != "create" {
		return fmt.Errorf("usage: zonewright node join-token create [--database-url URL] [--node NAME] [--ttl 1h]")
	}
	fs := flag.NewFlagSet("node join-token create", flag.ExitOnError)
	dbURL := databaseURLFlag(fs)
	name := fs.String("node", "", "the one node the token lets join (default: any new node)")
	ttl := fs.Duration("ttl", api.DefaultJoinTokenTTL, "how long the join token is valid")
	_ = fs.Parse(args[2:])
	if *name != "" {
		if errs := model.ValidateName("--node", *name); len(errs) > 0 {
			return errs
		}
	}
	if *ttl > api.MaxJoinTokenTTL {
		return fmt.Errorf("--ttl %s: a join token lives at most %s", *ttl, api.MaxJoinTokenTTL)
	}
	return issue(ctx, *dbURL, *ttl, func(t *auth.Tokens) (string, auth.Token, error) {
		return t.IssueJoin(ctx, auth.Identity{}, *name, *ttl)
	})
}

func databaseURLFlag(fs *flag.FlagSet) *string {
	return fs.String("database-url", env("ZW_DATABASE_URL", ""), "PostgreSQL URL (env ZW_DATABASE_URL)")
}

// issueToken prints the token on stdout (the only place it is shown) and
// its ID and expiry on stderr.
func issueToken(ctx context.Context, dbURL string, role auth.Role, ns string, ttl time.Duration) error {
	return issue(ctx, dbURL, ttl, func(t *auth.Tokens) (string, auth.Token, error) { return t.Issue(ctx, role, ns, ttl) })
}

func issue(ctx context.Context, dbURL string, ttl time.Duration, mint func(*auth.Tokens) (string, auth.Token, error)) error {
	if ttl <= 0 || ttl > api.MaxTokenTTL {
		return fmt.Errorf("--ttl %s: want more than 0 and at most %s", ttl, api.MaxTokenTTL)
	}
	return withTokens(ctx, dbURL, func(t *auth.Tokens) error {
		secret, tok, err := mint(t)
		if err != nil {
			return err
		}
		what := inNamespace(tok.Namespace)
		if tok.NodeName != "" {
			what = " for node " + tok.NodeName
		}
		fmt.Fprintf(os.Stderr, "token %s (%s%s) expires %s\n", tok.ID, tok.Role, what, tok.ExpiresAt.Format(time.RFC3339))
		fmt.Println(secret)
		return nil
	})
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in " + ns
}

func withTokens(ctx context.Context, dbURL string, fn func(*auth.Tokens) error) error {
	if dbURL == "" {
		return fmt.Errorf("--database-url (or ZW_DATABASE_URL) is required")
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	return fn(&auth.Tokens{Pool: pool})
}
