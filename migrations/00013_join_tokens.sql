-- +goose Up
-- A join token is spent by the join it allows (used_at) and may name the
-- one node it lets join (node_name).
ALTER TABLE api_tokens ADD COLUMN node_name text, ADD COLUMN used_at timestamptz;

-- +goose Down
ALTER TABLE api_tokens DROP COLUMN node_name, DROP COLUMN used_at;
