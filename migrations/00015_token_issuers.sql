-- +goose Up
-- Who issued a token (the identity's name, for the record) and, when it
-- was another token, which one: a token never outlives the token that
-- issued it, and is revoked with it.
ALTER TABLE api_tokens ADD COLUMN issuer text, ADD COLUMN issued_by text REFERENCES api_tokens (id);
CREATE INDEX api_tokens_issued_by ON api_tokens (issued_by);

-- +goose Down
DROP INDEX api_tokens_issued_by;
ALTER TABLE api_tokens DROP COLUMN issuer, DROP COLUMN issued_by;
