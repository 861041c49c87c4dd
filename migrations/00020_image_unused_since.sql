-- +goose Up
-- When the image sweep first found no pod using an image made for pods
-- (NULL while pods use it): the sweep removes it once that is older than
-- the control plane's --pod-registry-image-ttl. Bookkeeping, not part of
-- the API object.
ALTER TABLE images ADD COLUMN unused_since timestamptz;

-- +goose Down
ALTER TABLE images DROP COLUMN unused_since;
