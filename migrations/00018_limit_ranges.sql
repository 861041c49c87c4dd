-- +goose Up
-- Limit ranges: the generic columns; they go with their namespace.
CREATE TABLE limitranges (
    uid                    uuid PRIMARY KEY,
    namespace              text NOT NULL REFERENCES namespaces (name) ON DELETE CASCADE,
    name                   text NOT NULL,
    resource_version       bigint NOT NULL,
    generation             bigint NOT NULL DEFAULT 1,
    owner_references       jsonb NOT NULL DEFAULT '[]',
    managed_fields         jsonb NOT NULL DEFAULT '[]',
    labels                 jsonb NOT NULL DEFAULT '{}',
    annotations            jsonb NOT NULL DEFAULT '{}',
    spec                   jsonb NOT NULL DEFAULT '{}',
    status                 jsonb NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL DEFAULT now(),
    deleted_at             timestamptz,
    deletion_grace_seconds bigint,
    UNIQUE (namespace, name)
);

-- +goose Down
DROP TABLE limitranges;
