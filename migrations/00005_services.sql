-- +goose Up
-- Services and their Endpoints: the same columns as pods, so the generic
-- store serves them.
CREATE TABLE services (
    uid                    uuid PRIMARY KEY,
    namespace              text NOT NULL REFERENCES namespaces (name),
    name                   text NOT NULL,
    resource_version       bigint NOT NULL,
    labels                 jsonb NOT NULL DEFAULT '{}',
    annotations            jsonb NOT NULL DEFAULT '{}',
    spec                   jsonb NOT NULL DEFAULT '{}',
    status                 jsonb NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL DEFAULT now(),
    deleted_at             timestamptz,
    deletion_grace_seconds bigint,
    UNIQUE (namespace, name)
);
CREATE INDEX services_labels ON services USING gin (labels);

-- Written only by the endpoints controller; no foreign key to namespaces,
-- so deleting a namespace emptied of services does not wait for the
-- controller to delete their Endpoints.
CREATE TABLE endpoints (
    uid                    uuid PRIMARY KEY,
    namespace              text NOT NULL,
    name                   text NOT NULL,
    resource_version       bigint NOT NULL,
    labels                 jsonb NOT NULL DEFAULT '{}',
    annotations            jsonb NOT NULL DEFAULT '{}',
    spec                   jsonb NOT NULL DEFAULT '{}',
    status                 jsonb NOT NULL DEFAULT '{}',
    created_at             timestamptz NOT NULL DEFAULT now(),
    deleted_at             timestamptz,
    deletion_grace_seconds bigint,
    UNIQUE (namespace, name)
);

-- ClusterIP allocations: one row per address handed out, written in the
-- same transaction as the service, so an address is never given twice
-- (the primary key) and never outlives its service (released in the
-- delete's transaction; a sweep frees any left behind).
CREATE TABLE cluster_ips (
    ip          inet PRIMARY KEY,
    service_uid uuid NOT NULL UNIQUE,
    namespace   text NOT NULL,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE cluster_ips;
DROP TABLE endpoints;
DROP TABLE services;
