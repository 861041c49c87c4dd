-- +goose Up
-- The grace period a pending deletion asked for (metadata.deletionGracePeriodSeconds).
ALTER TABLE namespaces ADD COLUMN deletion_grace_seconds bigint;
ALTER TABLE nodes ADD COLUMN deletion_grace_seconds bigint;
ALTER TABLE pods ADD COLUMN deletion_grace_seconds bigint;
ALTER TABLE events ADD COLUMN deletion_grace_seconds bigint;

-- +goose Down
ALTER TABLE events DROP COLUMN deletion_grace_seconds;
ALTER TABLE pods DROP COLUMN deletion_grace_seconds;
ALTER TABLE nodes DROP COLUMN deletion_grace_seconds;
ALTER TABLE namespaces DROP COLUMN deletion_grace_seconds;
