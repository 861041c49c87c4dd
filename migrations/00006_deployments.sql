-- +goose Up
-- Every object may now name its owners (a deployment's pods name the
-- deployment) and carries a generation that counts changes of its spec.
ALTER TABLE namespaces ADD COLUMN generation bigint NOT NULL DEFAULT 1, ADD COLUMN owner_references jsonb NOT NULL DEFAULT '[]';
ALTER TABLE nodes      ADD COLUMN generation bigint NOT NULL DEFAULT 1, ADD COLUMN owner_references jsonb NOT NULL DEFAULT '[]';
ALTER TABLE pods       ADD COLUMN generation bigint NOT NULL DEFAULT 1, ADD COLUMN owner_references jsonb NOT NULL DEFAULT '[]';
ALTER TABLE events     ADD COLUMN generation bigint NOT NULL DEFAULT 1, ADD COLUMN owner_references jsonb NOT NULL DEFAULT '[]';
ALTER TABLE images     ADD COLUMN generation bigint NOT NULL DEFAULT 1, ADD COLUMN owner_references jsonb NOT NULL DEFAULT '[]';
ALTER TABLE services   ADD COLUMN generation bigint NOT NULL DEFAULT 1, ADD COLUMN owner_references jsonb NOT NULL DEFAULT '[]';
ALTER TABLE endpoints  ADD COLUMN generation bigint NOT NULL DEFAULT 1, ADD COLUMN owner_references jsonb NOT NULL DEFAULT '[]';

-- Deployments and the revisions of their pod templates, and jobs, with the same
-- columns as every other kind so the generic store serves them.
CREATE TABLE deployments (
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
CREATE INDEX deployments_labels ON deployments USING gin (labels);

-- Written only by the deployment's workflow; no foreign key, as they go
-- with their deployment, after it left the namespace's count.
CREATE TABLE controllerrevisions (
    uid                    uuid PRIMARY KEY,
    namespace              text NOT NULL,
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
CREATE INDEX controllerrevisions_labels ON controllerrevisions USING gin (labels);

-- Jobs: pods run to completion.
CREATE TABLE jobs (
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
CREATE INDEX jobs_labels ON jobs USING gin (labels);

-- +goose Down
DROP TABLE jobs;
DROP TABLE controllerrevisions;
DROP TABLE deployments;
ALTER TABLE endpoints  DROP COLUMN generation, DROP COLUMN owner_references;
ALTER TABLE services   DROP COLUMN generation, DROP COLUMN owner_references;
ALTER TABLE images     DROP COLUMN generation, DROP COLUMN owner_references;
ALTER TABLE events     DROP COLUMN generation, DROP COLUMN owner_references;
ALTER TABLE pods       DROP COLUMN generation, DROP COLUMN owner_references;
ALTER TABLE nodes      DROP COLUMN generation, DROP COLUMN owner_references;
ALTER TABLE namespaces DROP COLUMN generation, DROP COLUMN owner_references;
