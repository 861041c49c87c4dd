-- +goose Up
-- Secrets: the same columns as every other kind so the generic store
-- serves them. spec holds the type and the data sealed with the control
-- plane's encryption key (internal/encryption); no value is stored in
-- plain text, here or in the change feed. They go with their namespace.
CREATE TABLE secrets (
    uid                    uuid PRIMARY KEY,
    namespace              text NOT NULL REFERENCES namespaces (name) ON DELETE CASCADE,
    name                   text NOT NULL,
    resource_version       bigint NOT NULL,
    generation             bigint NOT NULL DEFAULT 1,
    owner_references       jsonb NOT NULL DEFAULT '[]',
    labels                 jsonb NOT NULL DEFAULT '{}',
    annotations            jsonb NOT NULL DEFAULT '{}',
    spec                   jsonb NOT NULL DEFAULT '{}',
    status                 jsonb NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL DEFAULT now(),
    deleted_at             timestamptz,
    deletion_grace_seconds bigint,
    UNIQUE (namespace, name)
);
CREATE INDEX secrets_labels ON secrets USING gin (labels);

-- +goose Down
DROP TABLE secrets;
