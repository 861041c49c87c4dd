-- +goose Up
-- PersistentVolumeClaims: the same columns as pods, so the generic store
-- serves them. A claim's dataset lives on status.nodeName once bound.
CREATE TABLE persistentvolumeclaims (
    uid                    uuid PRIMARY KEY,
    namespace              text NOT NULL REFERENCES namespaces (name),
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
CREATE INDEX persistentvolumeclaims_labels ON persistentvolumeclaims USING gin (labels);

-- VolumeSnapshots: ZFS snapshots of claims' datasets.
CREATE TABLE volumesnapshots (
    uid                    uuid PRIMARY KEY,
    namespace              text NOT NULL REFERENCES namespaces (name),
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

-- +goose Down
DROP TABLE volumesnapshots;
DROP TABLE persistentvolumeclaims;
