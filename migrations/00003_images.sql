-- +goose Up
-- The image catalog: cluster-scoped, the same columns as nodes so the
-- generic store serves it.
CREATE TABLE images (
    uid                    uuid PRIMARY KEY,
    name                   text NOT NULL UNIQUE,
    resource_version       bigint NOT NULL,
    labels                 jsonb NOT NULL DEFAULT '{}',
    annotations            jsonb NOT NULL DEFAULT '{}',
    spec                   jsonb NOT NULL DEFAULT '{}',
    status                 jsonb NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL DEFAULT now(),
    deleted_at             timestamptz,
    deletion_grace_seconds bigint
);
CREATE INDEX images_labels ON images USING gin (labels);

-- +goose Down
DROP TABLE images;
