package auth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/zonewright/zonewright/internal/pki"
)

// AdminTokenTTL is the lifetime of the cluster-admin token made on first start.
const AdminTokenTTL = 365 * 24 * time.Hour

// EnsureAdminToken returns the cluster-admin token kept in path (mode
// 0600), issuing a new one when the file is missing or its token no longer
// authenticates (expired, revoked, another database). The token is never
// logged.
func EnsureAdminToken(ctx context.Context, t *Tokens, path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if tok := strings.TrimSpace(string(b)); t.Valid(ctx, tok) {
			return tok, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read the admin token: %w", err)
	}
	tok, _, err := t.Issue(ctx, RoleClusterAdmin, "", AdminTokenTTL)
	if err != nil {
		return "", err
	}
	if err := pki.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save the admin token: %w", err)
	}
	return tok, nil
}
