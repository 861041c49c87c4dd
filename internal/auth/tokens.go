package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TokenPrefix starts every bearer token, so secret scanners can find them.
const TokenPrefix = "zw_"

// ErrUnauthenticated is a missing, malformed, unknown, wrong, expired or
// revoked credential: the caller learns nothing more than that.
var ErrUnauthenticated = errors.New("invalid or missing credentials")

// errRevoked is ErrUnauthenticated for a token, with its secret, that was
// revoked (EnsureAdminToken tells it from an expired one).
var errRevoked = fmt.Errorf("%w (revoked)", ErrUnauthenticated)

// ErrNotFound is a token ID that names no token (in the namespace asked).
var ErrNotFound = errors.New("token not found")

// Token is a token's metadata: never its secret.
type Token struct {
	ID        string     `json:"id"`
	Role      Role       `json:"role"`
	Namespace string     `json:"namespace,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt time.Time  `json:"expiresAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	// NodeName is the one node a join token lets join, when it names one.
	NodeName string `json:"nodeName,omitempty"`
	// UsedAt is when a join token was spent on a join.
	UsedAt *time.Time `json:"usedAt,omitempty"`
	// Issuer names who issued the token (empty: the control plane or an
	// operator at the database); IssuedBy is the issuing token's ID, when
	// a token issued it.
	Issuer   string `json:"issuer,omitempty"`
	IssuedBy string `json:"issuedBy,omitempty"`
}

// MaxTokensPerIssuer bounds the live tokens one identity has issued.
const MaxTokensPerIssuer = 100

// ErrTooManyTokens: the issuer holds MaxTokensPerIssuer live tokens.
var ErrTooManyTokens = fmt.Errorf("the issuer already holds %d live tokens it issued; revoke some first", MaxTokensPerIssuer)

// Tokens keeps bearer tokens in PostgreSQL (table api_tokens).
type Tokens struct {
	Pool *pgxpool.Pool
}

// Issue creates a token and returns it whole: the only time the secret is
// seen. namespace is empty for cluster-admin and node-join tokens.
func (t *Tokens) Issue(ctx context.Context, role Role, namespace string, ttl time.Duration) (string, Token, error) {
	return t.issue(ctx, Identity{}, role, namespace, "", ttl)
}

// IssueAs creates a token as issuer: recorded as its issuer and, when the
// issuer is itself a token, expiring no later than it and revoked with it.
func (t *Tokens) IssueAs(ctx context.Context, issuer Identity, role Role, namespace string, ttl time.Duration) (string, Token, error) {
	return t.issue(ctx, issuer, role, namespace, "", ttl)
}

// IssueJoin creates a join token: good for one join, of node nodeName
// alone unless that is empty.
func (t *Tokens) IssueJoin(ctx context.Context, issuer Identity, nodeName string, ttl time.Duration) (string, Token, error) {
	return t.issue(ctx, issuer, RoleNodeJoin, "", nodeName, ttl)
}

func (t *Tokens) issue(ctx context.Context, issuer Identity, role Role, namespace, nodeName string, ttl time.Duration) (string, Token, error) {
	if ttl <= 0 {
		return "", Token{}, fmt.Errorf("a token's lifetime must be positive, not %s", ttl)
	}
	if role.clusterWide() != (namespace == "") {
		return "", Token{}, fmt.Errorf("role %q and namespace %q do not go together", role, namespace)
	}
	id := strings.ToLower(rand.Text()[:12])
	secret := rand.Text()
	sum := sha256.Sum256([]byte(secret))
	var ns *string
	if namespace != "" {
		ns = &namespace
	}
	var node *string
	if nodeName != "" {
		node = &nodeName
	}
	tok := Token{ID: id, Role: role, Namespace: namespace, NodeName: nodeName, Issuer: issuer.Name, IssuedBy: issuer.TokenID}
	// One transaction, the issuer's tokens locked while they are counted,
	// so tokens issued at once cannot pass the bound together.
	tx, err := t.Pool.Begin(ctx)
	if err != nil {
		return "", Token{}, fmt.Errorf("issue token: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	if issuer.Name != "" {
		// Each identity's live tokens are bounded: more tokens would be
		// more watch slots (bounded per identity), and more to revoke.
		var live int
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('zonewright-issuer:' || $1, 0))`, issuer.Name); err != nil {
			return "", Token{}, fmt.Errorf("issue token: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM api_tokens WHERE issuer = $1 AND revoked_at IS NULL
			AND used_at IS NULL AND expires_at > now()`, issuer.Name).Scan(&live); err != nil {
			return "", Token{}, fmt.Errorf("issue token: %w", err)
		}
		if live >= MaxTokensPerIssuer {
			return "", Token{}, ErrTooManyTokens
		}
	}
	// A token issued by a token expires with it at the latest; the
	// issuing token must still be live.
	err = tx.QueryRow(ctx, `INSERT INTO api_tokens (id, secret_sha256, role, namespace, node_name, issuer, issued_by, expires_at)
		SELECT $1, $2, $3, $4, $5, nullif($6, ''), nullif($7, ''),
			least(now() + $8::interval, (SELECT expires_at FROM api_tokens WHERE id = $7))
		WHERE $7 = '' OR EXISTS (SELECT 1 FROM api_tokens WHERE id = $7 AND revoked_at IS NULL AND expires_at > now())
		RETURNING created_at, expires_at`,
		id, sum[:], string(role), ns, node, issuer.Name, issuer.TokenID,
		fmt.Sprintf("%d milliseconds", ttl.Milliseconds())).Scan(&tok.CreatedAt, &tok.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", Token{}, ErrUnauthenticated
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return "", Token{}, fmt.Errorf("issue token: %w", err)
	}
	return TokenPrefix + id + "_" + secret, tok, nil
}

// splitToken parses zw_<id>_<secret>.
func splitToken(s string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok {
		return "", "", false
	}
	id, secret, ok = strings.Cut(rest, "_")
	// The id is looked up as text: one PostgreSQL cannot hold is no
	// token's, not a failed query.
	return id, secret, ok && id != "" && secret != "" && utf8.ValidString(id) && !strings.ContainsRune(id, 0)
}

// Authenticate reads the token's row on every call, so a revocation or an
// expiry counts from the very next request, on every replica.
func (t *Tokens) Authenticate(ctx context.Context, bearer string) (Identity, error) {
	id, secret, ok := splitToken(bearer)
	if !ok {
		return Identity{}, ErrUnauthenticated
	}
	var (
		stored []byte
		role   string
		ns     *string
		node   *string
		live   bool
		gone   bool
	)
	err := t.Pool.QueryRow(ctx, `SELECT secret_sha256, role, namespace, node_name,
		revoked_at IS NULL AND used_at IS NULL AND expires_at > now(), revoked_at IS NOT NULL
		FROM api_tokens WHERE id = $1`, id).Scan(&stored, &role, &ns, &node, &live, &gone)
	if errors.Is(err, pgx.ErrNoRows) {
		return Identity{}, ErrUnauthenticated
	}
	if err != nil {
		return Identity{}, fmt.Errorf("look up token: %w", err)
	}
	sum := sha256.Sum256([]byte(secret))
	switch {
	case subtle.ConstantTimeCompare(sum[:], stored) != 1:
		return Identity{}, ErrUnauthenticated
	case gone:
		return Identity{}, errRevoked
	case !live:
		return Identity{}, ErrUnauthenticated
	}
	idt := Identity{Name: "token:" + id, TokenID: id, Role: Role(role)}
	if ns != nil {
		idt.Namespace = *ns
	}
	if node != nil {
		idt.JoinNode = *node
	}
	return idt, nil
}

// SpendJoinToken marks a join token used, once: of two joins with one
// token, the second gets ErrUnauthenticated.
func (t *Tokens) SpendJoinToken(ctx context.Context, id string) error {
	tag, err := t.Pool.Exec(ctx, `UPDATE api_tokens SET used_at = now()
		WHERE id = $1 AND role = $2 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > now()`, id, string(RoleNodeJoin))
	if err != nil {
		return fmt.Errorf("spend join token %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrUnauthenticated
	}
	return nil
}

// Revoke ends a token now, and every token it issued, theirs too.
// namespace, when not empty, must be the token's.
func (t *Tokens) Revoke(ctx context.Context, id, namespace string) error {
	tag, err := t.Pool.Exec(ctx, `WITH RECURSIVE issued AS (
			SELECT id FROM api_tokens WHERE id = $1 AND ($2 = '' OR namespace = $2)
			UNION SELECT t.id FROM api_tokens t JOIN issued ON t.issued_by = issued.id)
		UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id IN (SELECT id FROM issued)`, id, namespace)
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// List returns the tokens of a namespace, or all of them for "".
func (t *Tokens) List(ctx context.Context, namespace string) ([]Token, error) {
	rows, err := t.Pool.Query(ctx, `SELECT id, role, coalesce(namespace, ''), created_at, expires_at, revoked_at,
		coalesce(node_name, ''), used_at, coalesce(issuer, ''), coalesce(issued_by, '')
		FROM api_tokens WHERE $1 = '' OR namespace = $1 ORDER BY created_at, id`, namespace)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	out := []Token{}
	for rows.Next() {
		var tok Token
		var role string
		if err := rows.Scan(&tok.ID, &role, &tok.Namespace, &tok.CreatedAt, &tok.ExpiresAt, &tok.RevokedAt, &tok.NodeName, &tok.UsedAt, &tok.Issuer, &tok.IssuedBy); err != nil {
			return nil, err
		}
		tok.Role = Role(role)
		out = append(out, tok)
	}
	return out, rows.Err()
}

// Valid reports whether the token still authenticates (not expired nor
// revoked): a cluster-admin token file is reused only while it does.
func (t *Tokens) Valid(ctx context.Context, bearer string) bool {
	_, err := t.Authenticate(ctx, bearer)
	return err == nil
}
