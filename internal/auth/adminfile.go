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

// ErrAdminTokenRevoked: the bootstrap token was revoked, and is not
// replaced until its file is removed.
var ErrAdminTokenRevoked = errors.New("the cluster-admin token in the state directory was revoked; remove the file to have a new one issued at the next start, or issue one with `zonewright token create`")

// EnsureAdminToken returns the cluster-admin token kept in path (mode
// 0600), issuing a new one when the file is missing or its token no longer
// authenticates (expired, another database). A token an operator revoked
// stays revoked: ErrAdminTokenRevoked, and no new one, until the file is
// removed (a leaked token's replacement would go to the same place). The
// token is never logged.
func EnsureAdminToken(ctx context.Context, t *Tokens, path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		tok := strings.TrimSpace(string(b))
		_, err := t.Authenticate(ctx, tok)
		switch {
		case err == nil:
			return tok, nil
		case errors.Is(err, errRevoked):
			return "", ErrAdminTokenRevoked
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
