-- +goose Up
-- Which manager set which fields (server-side apply), per object.
ALTER TABLE namespaces ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE nodes ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE pods ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE services ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE endpoints ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE persistentvolumeclaims ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE volumesnapshots ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE images ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE deployments ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE controllerrevisions ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE jobs ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE events ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';
ALTER TABLE secrets ADD COLUMN managed_fields jsonb NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE namespaces DROP COLUMN managed_fields;
ALTER TABLE nodes DROP COLUMN managed_fields;
ALTER TABLE pods DROP COLUMN managed_fields;
ALTER TABLE services DROP COLUMN managed_fields;
ALTER TABLE endpoints DROP COLUMN managed_fields;
ALTER TABLE persistentvolumeclaims DROP COLUMN managed_fields;
ALTER TABLE volumesnapshots DROP COLUMN managed_fields;
ALTER TABLE images DROP COLUMN managed_fields;
ALTER TABLE deployments DROP COLUMN managed_fields;
ALTER TABLE controllerrevisions DROP COLUMN managed_fields;
ALTER TABLE jobs DROP COLUMN managed_fields;
ALTER TABLE events DROP COLUMN managed_fields;
ALTER TABLE secrets DROP COLUMN managed_fields;
