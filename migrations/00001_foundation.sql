-- +goose Up
-- Every write takes the next resource version, under an advisory lock held
-- shared to commit, so that the change feed can learn which versions are
-- settled (internal/store/order.go); the sequence must keep CACHE 1.
CREATE SEQUENCE resource_version_seq;

CREATE TABLE namespaces (
    uid              uuid PRIMARY KEY,
    name             text NOT NULL UNIQUE,
    resource_version bigint NOT NULL,
    labels           jsonb NOT NULL DEFAULT '{}',
    annotations      jsonb NOT NULL DEFAULT '{}',
    spec             jsonb NOT NULL DEFAULT '{}',
    status           jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);

CREATE TABLE nodes (
    uid              uuid PRIMARY KEY,
    name             text NOT NULL UNIQUE,
    resource_version bigint NOT NULL,
    labels           jsonb NOT NULL DEFAULT '{}',
    annotations      jsonb NOT NULL DEFAULT '{}',
    spec             jsonb NOT NULL DEFAULT '{}',
    status           jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz
);

CREATE TABLE pods (
    uid              uuid PRIMARY KEY,
    namespace        text NOT NULL REFERENCES namespaces (name),
    name             text NOT NULL,
    resource_version bigint NOT NULL,
    labels           jsonb NOT NULL DEFAULT '{}',
    annotations      jsonb NOT NULL DEFAULT '{}',
    spec             jsonb NOT NULL DEFAULT '{}',
    status           jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz,
    -- Field selectors and the scheduler filter on these.
    node_name        text GENERATED ALWAYS AS (spec ->> 'nodeName') STORED,
    phase            text GENERATED ALWAYS AS (status ->> 'phase') STORED,
    UNIQUE (namespace, name)
);
CREATE INDEX pods_node_name ON pods (node_name) WHERE node_name IS NOT NULL;
CREATE INDEX pods_labels ON pods USING gin (labels);

CREATE TABLE events (
    uid              uuid PRIMARY KEY,
    namespace        text NOT NULL,
    name             text NOT NULL,
    resource_version bigint NOT NULL,
    labels           jsonb NOT NULL DEFAULT '{}',
    annotations      jsonb NOT NULL DEFAULT '{}',
    spec             jsonb NOT NULL DEFAULT '{}',
    status           jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT now(),
    deleted_at       timestamptz,
    UNIQUE (namespace, name)
);
CREATE INDEX events_created_at ON events (created_at);

-- The change feed behind watches: one row per write, in version order.
CREATE TABLE changes (
    resource_version bigint PRIMARY KEY,
    kind             text NOT NULL,
    namespace        text NOT NULL DEFAULT '',
    name             text NOT NULL,
    type             text NOT NULL CHECK (type IN ('ADDED', 'MODIFIED', 'DELETED')),
    object           jsonb NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX changes_kind ON changes (kind, resource_version);

-- Watches resuming from before this version get 410 Gone: their history was compacted.
CREATE TABLE changes_compacted (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    through bigint NOT NULL
);
INSERT INTO changes_compacted (through) VALUES (0);

-- IPAM: one row per address handed out from a node's pod CIDR.
CREATE TABLE ip_allocations (
    node_name  text NOT NULL,
    ip         inet NOT NULL,
    pod_uid    uuid NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (node_name, ip)
);

-- +goose Down
DROP TABLE ip_allocations;
DROP TABLE changes_compacted;
DROP TABLE changes;
DROP TABLE events;
DROP TABLE pods;
DROP TABLE nodes;
DROP TABLE namespaces;
DROP SEQUENCE resource_version_seq;
