-- +goose Up
-- Bearer tokens (zw_<id>_<secret>) and node join tokens. Only the SHA-256
-- of a token's secret is kept; a revoked or expired row authenticates
-- nobody from the next request on (every request reads its row).
CREATE TABLE api_tokens (
    id            text PRIMARY KEY,
    secret_sha256 bytea NOT NULL,
    -- view, edit or admin in namespace; cluster-admin or node-join with no namespace.
    role          text NOT NULL,
    namespace     text REFERENCES namespaces (name) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    revoked_at    timestamptz,
    CHECK ((namespace IS NULL) = (role IN ('cluster-admin', 'node-join')))
);
CREATE INDEX api_tokens_namespace ON api_tokens (namespace);

-- +goose Down
DROP TABLE api_tokens;
